#pragma once
// StoreGroup: a replay buffer or dataset larger than one Redis node, as several TensorDictStores
// whose ids spread over a cluster's masters (spread_store_ids). Actors each write their own
// store; a learner reads rows of every store together: one round trip per master, all masters
// at once, each store's rows planned from its cached structure and read in one transaction with
// the structure the server holds (docs/backends.md, "Many stores, many nodes").
//
//   auto ids = tensordict::spread_store_ids("replay", 8, options);
//   // actor k: TensorDictStore::from_schema(schema, {capacity}, options with td_id = ids[k])
//   tensordict::StoreGroup group(stores);        // the learner's handles, from_store(ids[k])
//   TensorDict batch = group.sample(256);        // 256 rows drawn from all stores

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include <tensordict/backends/store.h>

namespace tensordict {

class StoreGroup {
 public:
  /// The stores, all on one server or one cluster (ValueError otherwise, or for none), each a
  /// root store with at least one batch dim. Opens one more connection per node for the group.
  explicit StoreGroup(std::vector<TensorDictStore> stores);

  size_t size() const;
  const TensorDictStore& store(size_t i) const;

  /// Rows of every store: `rows[i]` (a 1-d index tensor or mask on dim 0) of store i, as
  /// `store(i).index({rows[i]})` returns them, read in one round trip per node (a store whose
  /// structure changed since it was cached reads its rows again itself).
  std::vector<TensorDict> index(const std::vector<at::Tensor>& rows) const;
  /// `count` rows drawn uniformly with replacement from the rows of all stores together, in one
  /// tensordict (store by store); the stores' leaves must match. `generator`: as at::randint's.
  TensorDict sample(int64_t count, c10::optional<at::Generator> generator = c10::nullopt) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tensordict
