#pragma once
// Helpers for the generator tests: schema files in a fresh temporary directory, and tdgen run
// in-process with its output captured.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <tdgen/driver.h>

namespace tdgen_test {

struct RunResult {
  int exit_code;
  std::string out;
  std::string err;
};

inline RunResult run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = tdgen::run_tdgen(args, out, err);
  return RunResult{code, out.str(), err.str()};
}

/// A temporary directory removed when the object dies.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("tdgen_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  /// Writes `text` to `name` inside the directory and returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string path(const std::string& name = "") const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tdgen_test
