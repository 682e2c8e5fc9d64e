#pragma once
// Helpers of the memmap tests: temporary directories, running Debian's python3 scripts, and the
// expected values of the fixtures make_fixtures.py writes.

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>

#include "support/temp_dir.h"

namespace memmap_test {

namespace fs = std::filesystem;

using TempDir = testing_support::TempDir;

/// Runs a shell command; returns its exit status and standard output.
inline std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {-1, out};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// The contents of a (small) file.
inline std::string read_file(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

inline std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

inline std::string script(const std::string& name) {
  return std::string(TENSORDICT_SOURCE_DIR) + "/tests/backends/memmap/" + name;
}

/// The directory make_fixtures.py wrote (once per test process).
inline const std::string& fixtures() {
  static TempDir dir;
  static bool made = [] {
    auto [code, out] = run("/usr/bin/python3 " + quoted(script("make_fixtures.py")) + " " + quoted(dir.path()));
    if (code != 0) throw std::runtime_error("make_fixtures.py failed: " + out);
    return true;
  }();
  (void)made;
  static const std::string path = dir.path();
  return path;
}

/// What make_fixtures.py stores in a leaf: arange(numel) % 7 (bool: % 2), complex (v, -v).
inline at::Tensor expected_leaf(at::ScalarType dtype, c10::IntArrayRef shape) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  at::Tensor base = at::arange(numel, at::kLong).remainder(dtype == at::kBool ? 2 : 7);
  if (at::isComplexType(dtype)) {
    at::Tensor re = base.to(at::kDouble);
    return at::complex(re, -re).to(at::kComplexDouble).view(shape);
  }
  return base.to(dtype).view(shape);
}

/// Compares a loaded leaf with expected_leaf (complex32 through its (re, im) halves).
inline bool leaf_matches(const at::Tensor& t, at::ScalarType dtype, c10::IntArrayRef shape) {
  if (t.scalar_type() != dtype || t.sizes() != shape) return false;
  at::Tensor expected = expected_leaf(dtype, shape);
  if (at::isComplexType(dtype)) {
    at::Tensor parts = dtype == at::kComplexHalf ? t.view(at::kHalf).to(at::kDouble)
                                                  : at::view_as_real(t.to(at::kComplexDouble)).flatten(-2);
    if (dtype != at::kComplexHalf) return at::equal(parts, at::view_as_real(expected).flatten(-2));
    return at::equal(parts.flatten(), at::view_as_real(expected).flatten());
  }
  return at::equal(t, expected);
}

}  // namespace memmap_test
