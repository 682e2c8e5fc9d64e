#pragma once
// Backends the contract suite runs against. Each backend is a type with:
//   static constexpr const char* name;
//   static tensordict::TensorDict make(const tensordict::TensorDict& reference);
//     -> the same keys, values, batch size and device, stored in this backend;
//   static constexpr bool kMutableKeys;          // new keys can be added / removed after make()
//   static constexpr bool kLeavesAliasStorage;   // reads hand out the stored tensors (views write through)
//   static constexpr bool kNonTensorStacks;      // per-element non-tensor values can be stored
//   static constexpr const char* kTypeName;      // class name repr prints for the tensordict
//   static constexpr const char* kLeafClass;     // class name repr prints for tensor leaves
//   static constexpr const char* kDefaultDevice; // repr of the device a device-less reference gets
//   static constexpr bool kLazyStack;            // a lazy stack: indexing dim 0 gives the members
//                                                // (writes through them reach it), shape ops and
//                                                // copies stay lazy, nested reads are new stacks,
//                                                // the batch size cannot change
//   static constexpr bool kViewsWriteThrough;    // td.index(any index) is a view of the storage:
//                                                // set_ on it writes the selected elements
//   static constexpr bool kStoresAutograd;       // leaves that require grad can be stored
//   static constexpr bool kAnyKeyName;           // every string is a key (a file's links cannot be
//                                                // empty or hold '/')
//   static tensordict::TensorDict reload(const tensordict::TensorDict& td);
//     -> what a new process reads from td's storage (itself for storage held in memory)
// Every TEMPLATE_LIST_TEST_CASE over ContractBackends runs against each of them.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include <tensordict/tensordict.h>

#ifdef TENSORDICT_TEST_HDF5
#include <tensordict/backends/persistent.h>
#endif
#ifdef TENSORDICT_TEST_REDIS
#include <tensordict/backends/store.h>

#include "support/redis_server.h"
#endif

#include "support/copy_on_read_backend.h"
#include "support/temp_dir.h"

namespace contract {

/// The in-memory TensorDict itself.
struct InMemoryBackend {
  static constexpr const char* name = "TensorDict";
  static constexpr bool kMutableKeys = true;
  static constexpr bool kLeavesAliasStorage = true;
  static constexpr bool kNonTensorStacks = true;
  static constexpr const char* kTypeName = "TensorDict";
  static constexpr const char* kLeafClass = "Tensor";
  static constexpr const char* kDefaultDevice = "None";
  static constexpr bool kLazyStack = false;
  static constexpr bool kViewsWriteThrough = false;
  static constexpr bool kStoresAutograd = true;
  static constexpr bool kAnyKeyName = true;
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) { return reference; }
  static tensordict::TensorDict reload(const tensordict::TensorDict& td) { return td; }
};

/// Memory-mapped (Python tensordict's memmap format): the reference written to a fresh
/// directory and loaded back with load_memmap, so every leaf is a file mapping. Locked. As in
/// Python, a loaded directory lists its leaves before its sub-collections and has device cpu.
struct MemmapBackend {
  static constexpr const char* name = "MemmapTensorDict";
  static constexpr bool kMutableKeys = false;
  static constexpr bool kLeavesAliasStorage = true;
  static constexpr bool kNonTensorStacks = true;
  static constexpr const char* kTypeName = "TensorDict";
  static constexpr const char* kLeafClass = "MemoryMappedTensor";
  static constexpr const char* kDefaultDevice = "cpu";
  static constexpr bool kLazyStack = false;
  static constexpr bool kViewsWriteThrough = false;
  static constexpr bool kStoresAutograd = true;
  static constexpr bool kAnyKeyName = true;
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) {
    // One directory per test process, removed at exit (mappings stay valid after unlink).
    static testing_support::TempDir scratch("td_contract");
    static int counter = 0;
    const std::string dir = scratch / std::to_string(counter++);
    tensordict::memmap(reference, dir);
    return tensordict::load_memmap(dir);
  }
  static tensordict::TensorDict reload(const tensordict::TensorDict& td) {
    return tensordict::load_memmap(tensordict::memmap_path(td));
  }
};

/// Consolidated: every leaf a view of one storage (consolidate()). Locked. Non-tensor stacks
/// are refused with NotImplementedError (not in the consolidated format yet).
struct ConsolidatedBackend {
  static constexpr const char* name = "ConsolidatedTensorDict";
  static constexpr bool kMutableKeys = false;
  static constexpr bool kLeavesAliasStorage = true;
  static constexpr bool kNonTensorStacks = false;
  static constexpr const char* kTypeName = "TensorDict";
  static constexpr const char* kLeafClass = "Tensor";
  static constexpr const char* kDefaultDevice = "None";
  static constexpr bool kLazyStack = false;
  static constexpr bool kViewsWriteThrough = false;
  static constexpr bool kStoresAutograd = true;
  static constexpr bool kAnyKeyName = true;
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) {
    return tensordict::consolidate(reference);
  }
  /// Its serialized form, read back (to_bytes packs anew when the tree changed since).
  static tensordict::TensorDict reload(const tensordict::TensorDict& td) {
    return tensordict::from_bytes(tensordict::to_bytes(td));
  }
};

/// The proving backend (support/copy_on_read_backend.h): tensors kept privately, every read a
/// fresh copy, as a remote store. Writes reach it only through the backend interface.
struct CopyOnReadBackend {
  static constexpr const char* name = "CopyOnReadTensorDict";
  static constexpr bool kMutableKeys = true;
  static constexpr bool kLeavesAliasStorage = false;
  static constexpr bool kNonTensorStacks = true;
  static constexpr const char* kTypeName = "CopyOnReadTensorDict";
  static constexpr const char* kLeafClass = "Tensor";
  static constexpr const char* kDefaultDevice = "None";
  static constexpr bool kLazyStack = false;
  static constexpr bool kViewsWriteThrough = false;
  static constexpr bool kStoresAutograd = true;
  static constexpr bool kAnyKeyName = true;
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) {
    return testing_backends::CopyOnRead::from(reference);
  }
  static tensordict::TensorDict reload(const tensordict::TensorDict& td) { return td; }
};

/// A lazy stack: the reference unbound along dim 0 and restacked lazily, so every read stacks
/// the members' leaves and every write is split among them. A reference without batch dims
/// cannot be a stack (a lazy stack always has its stack dim), nor can one whose dim 0 is
/// empty (an empty stack has no keys): those stay in memory.
struct LazyStackBackend {
  static constexpr const char* name = "LazyStackedTensorDict";
  static constexpr bool kMutableKeys = true;
  static constexpr bool kLeavesAliasStorage = false;
  static constexpr bool kNonTensorStacks = true;
  static constexpr const char* kTypeName = "LazyStackedTensorDict";
  static constexpr const char* kLeafClass = "Tensor";
  static constexpr const char* kDefaultDevice = "None";
  static constexpr bool kLazyStack = true;
  static constexpr bool kViewsWriteThrough = false;
  static constexpr bool kStoresAutograd = true;
  static constexpr bool kAnyKeyName = true;
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) {
    // Without a batch dim, or with none to unbind, there are no members to stack.
    if (reference.batch_dims() == 0 || reference.size(0) == 0) return reference;
    std::vector<tensordict::TensorDict> members = reference.clone().unbind(0);
    tensordict::TensorDict out = tensordict::lazy_stack(members, 0);
    if (reference.is_locked()) out.lock_();
    return out;
  }
  static tensordict::TensorDict reload(const tensordict::TensorDict& td) { return td; }
};

#ifdef TENSORDICT_TEST_HDF5
/// An HDF5 file: the reference written with to_h5 and reopened "r+". Reads are copies; every
/// write goes to the file, and an indexed view (any index kind) reads and writes only its
/// elements. Per-element strings are string arrays shaped like the batch. Leaves that require
/// grad are refused (as Python does), and keys must name HDF5 links (not empty, no '/').
struct H5Backend {
  static constexpr const char* name = "PersistentTensorDict";
  static constexpr bool kMutableKeys = true;
  static constexpr bool kLeavesAliasStorage = false;
  static constexpr bool kNonTensorStacks = true;
  static constexpr const char* kTypeName = "PersistentTensorDict";
  static constexpr const char* kLeafClass = "Tensor";
  static constexpr const char* kDefaultDevice = "None";
  static constexpr bool kLazyStack = false;
  static constexpr bool kViewsWriteThrough = true;
  static constexpr bool kStoresAutograd = false;
  static constexpr bool kAnyKeyName = false;
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) {
    static testing_support::TempDir scratch("td_contract_h5");
    static int counter = 0;
    const std::string path = scratch / (std::to_string(counter++) + ".h5");
    tensordict::PersistentTensorDict::to_h5(reference, path).close();
    tensordict::TensorDict out = tensordict::PersistentTensorDict::from_h5(path, "r+");
    if (reference.is_locked()) out.lock_();
    return out;
  }
  static tensordict::TensorDict reload(const tensordict::TensorDict& td) {
    return tensordict::PersistentTensorDict::from_h5(tensordict::PersistentTensorDict::from(td).filename(), "r");
  }
};
#endif

#ifdef TENSORDICT_TEST_REDIS
/// A store on a real redis-server (one per test process, on a unix socket in a temporary
/// directory, stopped at exit): the reference uploaded with from_tensordict. Reads are copies,
/// every write goes to the server; an index is an in-memory copy (Python's store[idx] too).
/// Leaves that require grad are refused; every key name reads back as written.
struct StoreBackend {
  static constexpr const char* name = "TensorDictStore";
  static constexpr bool kMutableKeys = true;
  static constexpr bool kLeavesAliasStorage = false;
  static constexpr bool kNonTensorStacks = true;
  static constexpr const char* kTypeName = "TensorDictStore";
  static constexpr const char* kLeafClass = "Tensor";
  static constexpr const char* kDefaultDevice = "None";
  static constexpr bool kLazyStack = false;
  static constexpr bool kViewsWriteThrough = false;
  static constexpr bool kStoresAutograd = false;
  static constexpr bool kAnyKeyName = true;
  static tensordict::StoreOptions options() {
    static testing_support::RedisServer server;
    return testing_support::store_options(server);
  }
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) {
    tensordict::TensorDict out = tensordict::TensorDictStore::from_tensordict(reference, options());
    if (reference.is_locked()) out.lock_();
    return out;
  }
  static tensordict::TensorDict reload(const tensordict::TensorDict& td) {
    return tensordict::TensorDictStore::from_store(tensordict::store_id(td), options());
  }
};

/// The same server, in this port's per-row layout (StoreLayout::per_row): the tensor leaves
/// are fixed when the store is created, so its handle is locked, as memmap's is.
struct RowStoreBackend : StoreBackend {
  static constexpr const char* name = "TensorDictStore per_row";
  static constexpr bool kMutableKeys = false;
  static tensordict::StoreOptions options() {
    tensordict::StoreOptions out = StoreBackend::options();
    out.layout = tensordict::StoreLayout::per_row;
    return out;
  }
  static tensordict::TensorDict make(const tensordict::TensorDict& reference) {
    return tensordict::TensorDictStore::from_tensordict(reference, options());
  }
  static tensordict::TensorDict reload(const tensordict::TensorDict& td) {
    return tensordict::TensorDictStore::from_store(tensordict::store_id(td), options());
  }
};
#endif

template <class... A, class... B>
auto concat(std::tuple<A...>, std::tuple<B...>) -> std::tuple<A..., B...>;

#ifdef TENSORDICT_TEST_HDF5
using ContractBackendsWithoutRedis = std::tuple<InMemoryBackend, MemmapBackend, ConsolidatedBackend, CopyOnReadBackend,
                                    LazyStackBackend, H5Backend>;
#else
using ContractBackendsWithoutRedis =
    std::tuple<InMemoryBackend, MemmapBackend, ConsolidatedBackend, CopyOnReadBackend, LazyStackBackend>;
#endif
#ifdef TENSORDICT_TEST_REDIS
using ContractBackends =
    decltype(concat(ContractBackendsWithoutRedis{}, std::tuple<StoreBackend, RowStoreBackend>{}));
#else
using ContractBackends = ContractBackendsWithoutRedis;
#endif

}  // namespace contract
