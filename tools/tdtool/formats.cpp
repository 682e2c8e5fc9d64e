#include "formats.h"

#include <filesystem>

#include <tensordict/errors.h>
#include <tensordict/backends/memmap.h>

namespace tdtool {

namespace fs = std::filesystem;

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
  };
  return all;
}

const StoredFormat& detect_format(const std::string& path) {
  TD_CHECK(fs::exists(path), ValueError, path, ": no such file or directory");
  for (const auto& f : formats()) {
    if (f.detect(path)) return f;
  }
  TD_THROW(ValueError, path, ": not a stored tensordict (no meta.json: not a memmap directory)");
}

const StoredFormat& format_named(const std::string& name) {
  for (const auto& f : formats()) {
    if (f.name == name) return f;
  }
  TD_THROW(ValueError, "unknown format '", name, "' (known: memmap)");
}

}  // namespace tdtool
