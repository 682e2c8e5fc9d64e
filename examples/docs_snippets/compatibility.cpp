// The snippets of docs/compatibility.md (docs/compatibility.md#reading-what-python-saved).
// Usage: docs_snippet_compatibility [DIR]: DIR is a directory Python tensordict saved
// (the test passes tests/data/python-tensordict/mmap_example); without it, the program
// writes one with C++ first.
#include <filesystem>
#include <iostream>
#include <string>

#include <unistd.h>

#include <ATen/ATen.h>
#include <tensordict/backends/memmap.h>
#include <tensordict/tensordict.h>

namespace td = tensordict;

namespace {

// docs/compatibility.md#reading-what-python-saved
void read_python(const std::string& python_dir) {
  td::LoadMemmapOptions options;
  options.writable = false;  // map copy-on-write: never modify Python's files
  td::TensorDict data = td::load_memmap(python_dir, options);
  std::cout << data << "\n";  // the same repr layout as Python's print(td)
  for (const td::NestedKey& key : data.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    at::Tensor leaf = data.get(key);
    std::cout << key.repr() << ": " << leaf.sizes() << " " << leaf.scalar_type() << "\n";
  }
}

// docs/compatibility.md#writing-for-python
void write_for_python(const std::string& dir) {
  td::TensorDict data({{"obs", at::randn({4, 3})},
                       {"next", {{"reward", at::zeros({4, 1}, at::kBFloat16)}}},
                       {"a/b", at::arange(4)},     // stored as a%2Fb.memmap
                       {"split", "train"}},        // NonTensorData
                      /*batch_size=*/{4});
  td::memmap(data, dir);
}

}  // namespace

int main(int argc, char** argv) {
  // One directory per process: CTest runs this program twice, in parallel.
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("tensordict_docs_compat_" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  write_for_python(tmp.string());
  read_python(argc > 1 ? argv[1] : tmp.string());
  std::filesystem::remove_all(tmp);
  return 0;
}
