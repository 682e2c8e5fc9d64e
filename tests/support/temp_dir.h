#pragma once
// The tests' one temporary directory: made fresh with mkdtemp(3), removed with everything in it
// when the object dies.

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace testing_support {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "td_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  // (nftw, not std::filesystem::remove_all: pip's LibTorch 2.x exports a copy of the latter
  // that the dynamic linker binds first and that crashes.)
  ~TempDir() {
    ::nftw(path_.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p), 0; }, 16,
           FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The directory, or `name` inside it.
  std::string path(const std::string& name = "") const { return name.empty() ? path_.string() : (path_ / name).string(); }
  std::string operator/(const std::string& name) const { return path(name); }
  /// Writes `text` to `name` inside the directory (parents created) and returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace testing_support
