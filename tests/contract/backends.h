#pragma once
// Backends the contract suite runs against. Each backend is a type with:
//   static constexpr const char* name;
//   static tensordict::TensorDict make(const tensordict::TensorDict& reference);
//     -> the same keys, values, batch size and device, stored in this backend;
//   static constexpr bool kMutableKeys;  // new keys can be added / removed after make()
// Later backends (memmap, HDF5, lazy stack, Redis, typed wrappers) add a type here and every
// TEMPLATE_LIST_TEST_CASE over ContractBackends runs against them too.

#include <tuple>

#include <tensordict/tensordict.h>

namespace contract {

/// The in-memory TensorDict itself.
struct InMemoryBackend {
  static constexpr const char* name = "TensorDict";
  static constexpr bool kMutableKeys = true;
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) { return reference; }
};

using ContractBackends = std::tuple<InMemoryBackend>;

}  // namespace contract
