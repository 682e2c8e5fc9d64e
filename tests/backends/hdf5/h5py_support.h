#pragma once
// The h5py side of the HDF5 tests: files written and read by Debian's python3-h5py through the
// scripts beside this header (h5py_write.py, h5py_read.py).

#include <string>

#include <tensordict/json.h>

// support.h (ATen) before Catch: c10/util/logging defines its own CHECK macro.
#include "backends/memmap/support.h"
#include "support/catch_torch.h"

namespace h5_test {

inline std::string h5_script(const std::string& name) {
  return std::string(TENSORDICT_SOURCE_DIR) + "/tests/backends/hdf5/" + name;
}

/// Writes h5py_write.py's fixture `kind` at `path`.
inline void h5py_write(const std::string& kind, const std::string& path) {
  using memmap_test::quoted;
  auto [code, out] =
      memmap_test::run("/usr/bin/python3 " + quoted(h5_script("h5py_write.py")) + " " + kind + " " + quoted(path) + " 2>&1");
  INFO(out);
  REQUIRE(code == 0);
}

/// What h5py reads from `path`, as h5py_read.py prints it.
inline tensordict::json::Value h5py_read(const std::string& path) {
  using memmap_test::quoted;
  auto [code, out] = memmap_test::run("/usr/bin/python3 " + quoted(h5_script("h5py_read.py")) + " " + quoted(path) + " 2>&1");
  INFO(out);
  REQUIRE(code == 0);
  return tensordict::json::parse(out);
}

}  // namespace h5_test
