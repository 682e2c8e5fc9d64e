#pragma once
// TensorDictStore: a tensordict kept on a Redis-protocol server (Python tensordict's
// TensorDictStore, v0.14 key layout), shared by every process and machine that can reach the
// server. Leaves are byte strings, metadata are hashes and sets; every write goes to the
// server, and reads return fresh tensors. Built with TENSORDICT_WITH_REDIS (hiredis). See
// docs/backends.md, "Redis stores".
//
//   tensordict::StoreOptions options;
//   options.host = "10.0.0.5";
//   auto store = tensordict::TensorDictStore::from_tensordict(td, options);
//   // elsewhere: TensorDictStore::from_store(store.td_id(), options)

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <tensordict/backends/leaf_spec.h>
#include <tensordict/backends/store_options.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

class TensorDictStore : public TensorDict {
 public:
  /// Uploads `td` (nested levels, non-tensor values) to a new store in one transaction and
  /// returns it. The store's id is `options.td_id`, or a new uuid4. A store that already
  /// exists under that id is refused (StorageError naming it) unless `options.overwrite`.
  static TensorDictStore from_tensordict(const TensorDict& td, StoreOptions options = {});
  /// A store with a leaf per entry of `schema`: tensors zero-filled, shaped batch_size + event
  /// shape, non-tensor values stored as given (leaf_spec.h). The server allocates the zeros
  /// (one SETRANGE per leaf): no tensor bytes pass through the client. Refuses an existing
  /// store as from_tensordict does.
  static TensorDictStore from_schema(const LeafSpecs& schema, c10::IntArrayRef batch_size, StoreOptions options = {});
  /// Reconnects to the existing store `td_id` (written by C++ or Python): KeyError "No
  /// TensorDictStore" when the server holds none.
  static TensorDictStore from_store(const std::string& td_id, StoreOptions options = {});

  /// `td` as a TensorDictStore; TypeError naming its class when it is not one.
  static TensorDictStore from(const TensorDict& td);
  /// True when `td` is a TensorDictStore (its root or a nested level).
  static bool is_store(const TensorDict& td);

  /// The store's id: what another process passes to from_store.
  const std::string& td_id() const;
  /// The options it was opened with (prefix, server, timeouts).
  const StoreOptions& options() const;
  /// Every leaf read in one round trip into an in-memory tensordict.
  TensorDict to_tensordict() const;
  /// Deletes every key of the store from the server; the handle is then an empty store.
  void clear_store();

 private:
  explicit TensorDictStore(TensorDict td) : TensorDict(std::move(td)) {}
};

/// The id of the store behind `td` (a TensorDictStore handle or one of its nested levels).
std::string store_id(const TensorDict& td);

/// Ids for `count` stores that spread over a Redis Cluster's masters, round robin: a buffer
/// larger than one node as `count` stores (docs/backends.md, "Many stores, many nodes"). Id i
/// is "<base>-<i>", or "<base>-<i>.<k>" with the smallest k that puts its slot on master
/// i % masters (each id's slot is its hash tag's, so the masters are read once, from the
/// cluster's slot map). On one server: "<base>-0" ... "<base>-<count - 1>".
std::vector<std::string> spread_store_ids(const std::string& base, int64_t count, const StoreOptions& options);

}  // namespace tensordict
