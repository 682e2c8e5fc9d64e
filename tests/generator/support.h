#pragma once
// Helpers for the generator tests: schema files in a fresh temporary directory, and tdgen run
// in-process with its output captured.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "support/temp_dir.h"

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

using TempDir = testing_support::TempDir;

inline std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Checks schema `text` (saved as bad.yaml) with --check; returns stderr after the file name
/// (":line:col: message\n"), requiring exit code 1 and the file named first.
inline std::string diagnose(const std::string& text) {
  TempDir dir;
  const std::string path = dir.write("bad.yaml", text);
  auto result = run({"--check", path});
  INFO(result.err.substr(0, 2000));
  REQUIRE(result.exit_code == 1);
  REQUIRE(result.err.rfind(path + ":", 0) == 0);
  return result.err.substr(path.size());
}

}  // namespace tdgen_test
