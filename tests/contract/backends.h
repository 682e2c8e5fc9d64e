#pragma once
// Backends the contract suite runs against. Each backend is a type with:
//   static constexpr const char* name;
//   static tensordict::TensorDict make(const tensordict::TensorDict& reference);
//     -> the same keys, values, batch size and device, stored in this backend;
//   static constexpr bool kMutableKeys;  // new keys can be added / removed after make()
//   static constexpr const char* kLeafClass;   // class name repr prints for tensor leaves
//   static constexpr const char* kDefaultDevice;  // repr of the device a device-less reference gets
// Later backends (memmap, HDF5, lazy stack, Redis, typed wrappers) add a type here and every
// TEMPLATE_LIST_TEST_CASE over ContractBackends runs against them too.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include <tensordict/tensordict.h>

namespace contract {

/// The in-memory TensorDict itself.
struct InMemoryBackend {
  static constexpr const char* name = "TensorDict";
  static constexpr bool kMutableKeys = true;
  static constexpr const char* kLeafClass = "Tensor";
  static constexpr const char* kDefaultDevice = "None";
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) { return reference; }
};

/// Memory-mapped (Python tensordict's memmap format): the reference written to a fresh
/// directory and loaded back with load_memmap, so every leaf is a file mapping. Locked. As in
/// Python, a loaded directory lists its leaves before its sub-collections and has device cpu.
struct MemmapBackend {
  static constexpr const char* name = "MemmapTensorDict";
  static constexpr bool kMutableKeys = false;
  static constexpr const char* kLeafClass = "MemoryMappedTensor";
  static constexpr const char* kDefaultDevice = "cpu";
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) {
    const std::string dir = scratch_dir() + "/" + std::to_string(counter()++);
    tensordict::memmap(reference, dir);
    return tensordict::load_memmap(dir);
  }

 private:
  // One directory per test process, removed at exit (mappings stay valid after unlink).
  static const std::string& scratch_dir() {
    struct Scratch {
      std::string path;
      Scratch() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "td_contract_XXXXXX").string();
        path = ::mkdtemp(tmpl.data());
      }
      ~Scratch() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
      }
    };
    static Scratch scratch;
    return scratch.path;
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

using ContractBackends = std::tuple<InMemoryBackend, MemmapBackend>;

}  // namespace contract
