#include "formats.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <tensordict/errors.h>
#include <tensordict/backends/memmap.h>
#ifdef TDTOOL_WITH_HDF5
#include <tensordict/backends/persistent.h>
#endif

namespace tdtool {

namespace fs = std::filesystem;

namespace {

#ifdef TDTOOL_WITH_HDF5
// HDF5's format signature, at offset 0 of files HDF5 writes (a user block can move it to 512,
// 1024, ...: those are found too).
bool has_hdf5_signature(const std::string& path) {
  if (!fs::is_regular_file(path)) return false;
  static constexpr char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  std::ifstream in(path, std::ios::binary);
  const auto size = static_cast<std::uintmax_t>(fs::file_size(path));
  for (std::uintmax_t offset = 0; offset + 8 <= size; offset = offset ? offset * 2 : 512) {
    char head[8];
    if (!in.seekg(static_cast<std::streamoff>(offset)) || !in.read(head, 8)) return false;
    if (std::memcmp(head, kSignature, 8) == 0) return true;
  }
  return false;
}
#endif

}  // namespace

const std::vector<StoredFormat>& formats() {
  static const std::vector<StoredFormat> all = {
      {"memmap",
       [](const std::string& path) { return fs::is_regular_file(fs::path(path) / "meta.json"); },
       [](const std::string& path) { return tensordict::load_memmap(path); },
       [](const tensordict::TensorDict& td, const std::string& path, int num_threads,
          const Progress& progress) {
         tensordict::MemmapOptions options;
         options.copy_existing = true;  // the source is itself file-backed
         options.existsok = false;
         options.num_threads = num_threads;
         options.progress = progress;
         tensordict::memmap(td, path, options);
       }},
#ifdef TDTOOL_WITH_HDF5
      {"h5", has_hdf5_signature,
       [](const std::string& path) {
         // Files tdtool is pointed at may come from anywhere: HDF5 is kept from crashing tdtool
         // on a corrupt one by checking it in a child process first.
         tensordict::H5OpenOptions open;
         open.untrusted = true;
         return tensordict::PersistentTensorDict::from_h5(path, "r", std::nullopt, open);
       },
       [](const tensordict::TensorDict& td, const std::string& path, int /*num_threads*/, const Progress& progress) {
         // One pass, entry by entry, in the file's order; reported as done when it closes.
         tensordict::PersistentTensorDict::to_h5(td, path).close();
         if (progress) progress(1, 1);
       }},
#endif
  };
  return all;
}

const StoredFormat& detect_format(const std::string& path) {
  TD_CHECK(fs::exists(path), ValueError, path, ": no such file or directory");
  for (const auto& f : formats()) {
    if (f.detect(path)) return f;
  }
  TD_THROW(ValueError, path, ": not a stored tensordict (no meta.json: not a memmap directory",
#ifdef TDTOOL_WITH_HDF5
           "; no HDF5 signature: not an .h5 file",
#endif
           ")");
}

const StoredFormat& format_named(const std::string& name) {
  for (const auto& f : formats()) {
    if (f.name == name) return f;
  }
  std::string known;
  for (const auto& f : formats()) known += (known.empty() ? "" : ", ") + f.name;
  TD_THROW(ValueError, "unknown format '", name, "' (known: ", known, ")");
}

const StoredFormat& format_for_destination(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".h5" || ext == ".hdf5" || ext == ".hdf") return format_named("h5");
  return format_named("memmap");
}

}  // namespace tdtool
