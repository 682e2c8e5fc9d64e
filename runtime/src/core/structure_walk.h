#pragma once
// The one recursive structure walk: an in-memory level rebuilt from another level entry by
// entry. Indexing, batch-shape ops, leaf maps, snapshots and the leaf-by-leaf operations all
// build their results through it, each saying only what happens to a tensor, a nested level
// and non-tensor data.

#include <optional>
#include <string>
#include <typeinfo>
#include <utility>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/level_builder.h"

namespace tensordict {
namespace detail {

/// An in-memory level of batch size `batch_size` on `device` holding, for each entry of `level`
/// in order: `on_tensor(key, tensor)` (an undefined result drops the entry),
/// `on_nested(key, child)` (a std::optional<TensorDict>; nullopt drops it) and
/// `on_non_tensor(key, data)` (a NonTensorData).
template <typename OnTensor, typename OnNested, typename OnNonTensor>
TensorDict map_level(const TensorDictBase& level, c10::IntArrayRef batch_size, std::optional<at::Device> device,
                     OnTensor&& on_tensor, OnNested&& on_nested, OnNonTensor&& on_non_tensor) {
  LevelBuilder out(batch_size, device, level.num_entries());
  auto visit = [&](const std::string& key, uint32_t hash, const Entry& entry) {
    switch (entry.kind()) {
      case EntryKind::Tensor: {
        at::Tensor result = on_tensor(key, entry.tensor_unchecked());
        if (result.defined()) out.append(key, hash, std::move(result));
        break;
      }
      case EntryKind::TensorDict: {
        std::optional<TensorDict> result = on_nested(key, entry.tensordict_unchecked());
        if (result) out.append(key, hash, std::move(*result));
        break;
      }
      case EntryKind::NonTensor:
        out.append(key, hash, on_non_tensor(key, entry.non_tensor()));
        break;
      case EntryKind::Undefined:
        break;
    }
  };
  // Most levels walked are in memory: their slots are read in place, each key's hash reused.
  if (typeid(level) == typeid(TensorDictImpl)) {
    static_cast<const TensorDictImpl&>(level).for_each_made_slot(
        [&](const TensorDictImpl::Slot& slot) { visit(slot.key, slot.hash, slot.value); });
  } else {
    level.for_each([&](const std::string& key, const Entry& entry) { visit(key, in_memory::key_hash(key), entry); });
  }
  TensorDict result = out.finish();
  // Same batch dims, same names (Python's empty(batch_size) keeps them unless the batch changes).
  if (C10_UNLIKELY(!level.dim_names().empty()) && batch_size == level.batch_size())
    result.impl()->set_dim_names(level.dim_names());
  return result;
}

/// The batch size of a nested level once its root's `old_root_dims` leading dims become
/// `new_root`: the nested level keeps its extra dims.
inline BatchSize nested_batch(c10::IntArrayRef new_root, c10::IntArrayRef level_batch, size_t old_root_dims) {
  BatchSize batch(new_root.begin(), new_root.end());
  if (level_batch.size() > old_root_dims) batch.append(level_batch.begin() + old_root_dims, level_batch.end());
  return batch;
}

}  // namespace detail
}  // namespace tensordict
