// Writes the seed corpus of every fuzz target under OUT/<target>/, from the repository's test
// fixtures (SOURCE_DIR: Python's memmap example, the schemas) and from what this port writes
// (memmap directories, consolidated bytes, HDF5 files, store records).
//
//   fuzz_seeds SOURCE_DIR OUT
#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/memmap.h>
#include <tensordict/tabular.h>
#include <tensordict/tensordict.h>
#ifdef TENSORDICT_FUZZ_HDF5
#include <tensordict/backends/persistent.h>
#endif

#include "fuzz_input.h"

namespace fs = std::filesystem;
using tensordict::TensorDict;

namespace {

void write(const fs::path& file, const std::string& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TensorDict sample() {
  TensorDict td = TensorDict::empty_with({3});
  td.set("obs", at::arange(12, at::kFloat).reshape({3, 4}));
  td.set("done", at::arange(3) % 2 == 0);
  td.set({"next", "reward"}, at::arange(3, at::kDouble));
  td.set("code", at::arange(3, at::kInt));
  td.set_non_tensor("label", tensordict::json::Value("episode"));
  return td;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fuzz_seeds SOURCE_DIR OUT\n";
    return 2;
  }
  const fs::path source = argv[1], out = argv[2];
  const fs::path python_memmap = source / "tests/data/python-tensordict/mmap_example";
  // JSON: meta.json as Python writes it, and as this port does.
  int n = 0;
  for (const auto& entry : fs::recursive_directory_iterator(python_memmap))
    if (entry.path().filename() == "meta.json") write(out / "json" / ("python" + std::to_string(n++)), read(entry.path()));
  fuzz::ScratchDir dir;
  const fs::path ours = dir.path() / "ours";
  tensordict::memmap(sample(), ours.string());
  for (const auto& entry : fs::recursive_directory_iterator(ours))
    if (entry.path().filename() == "meta.json") write(out / "json" / ("cpp" + std::to_string(n++)), read(entry.path()));
  // Memmap directories as images.
  write(out / "memmap" / "python", fuzz::pack_image(python_memmap));
  write(out / "memmap" / "cpp", fuzz::pack_image(ours));
  // Consolidated bytes.
  write(out / "consolidated" / "cpp", tensordict::to_bytes(sample()));
  // Tabular files (the first byte picks the reader: 0 CSV, 1 JSON records, 2 JSON Lines).
  TensorDict rows({{"x", at::arange(6, at::kFloat).view({3, 2})}, {"id", at::arange(3)}}, {3});
  rows.set({"obs", "ok"}, at::arange(3) % 2 == 0);
  rows.set("tag", tensordict::NonTensorData::from_list(tensordict::json::parse(R"(["a", "b,c", "d\"e"])"), {3}));
  tensordict::TabularWriteOptions nested;
  nested.separator = ".";
  for (int kind = 0; kind < 3; ++kind) {
    const fs::path file = dir.path() / ("rows" + std::to_string(kind));
    nested.lines = kind == 2;
    if (kind == 0) tensordict::to_csv(rows, file.string(), nested);
    else tensordict::to_json(rows, file.string(), nested);
    write(out / "tabular" / ("cpp" + std::to_string(kind)), std::string(1, static_cast<char>(kind)) + read(file));
  }
  // Schemas.
  for (const fs::path& folder : {source / "schemas", source / "tests/generator/golden"})
    for (const auto& entry : fs::directory_iterator(folder))
      if (entry.path().extension() == ".yaml")
        write(out / "yaml_schema" / entry.path().filename(), read(entry.path()));
#ifdef TENSORDICT_FUZZ_HDF5
  const fs::path h5 = dir.path() / "td.h5";
  tensordict::PersistentTensorDict::to_h5(sample(), h5.string()).close();
  write(out / "h5" / "cpp", read(h5));
#endif
  // Store records: __batch_size__ \0 m: fields and values \0 d: value.
  const std::string nul(1, '\0');
  write(out / "store_metadata" / "tensor",
        "[3]" + nul + "shape" + nul + "[3, 2]" + nul + "dtype" + nul + "torch.float32" + nul + std::string(24, '\1'));
  write(out / "store_metadata" / "json",
        "[3]" + nul + "is_non_tensor" + nul + "1" + nul + "encoding" + nul + "json" + nul + "\"episode\"");
  write(out / "store_metadata" / "json_array",
        "[3]" + nul + "is_non_tensor" + nul + "1" + nul + "encoding" + nul + "json_array" + nul + "[\"a\", \"b\", null]");
  write(out / "store_metadata" / "elements", "[2, 2]" + nul + "is_non_tensor" + nul + "1" + nul + "encoding" + nul +
                                                  "json_array" + nul + "elements" + nul + "1" + nul + "[[1, 2], [3, 4]]");
  return 0;
}
