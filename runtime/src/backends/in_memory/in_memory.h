#pragma once
// Entry points of the in-memory backend for the rest of the runtime: new levels, the
// constructors' fast path, the in-place writes of a leaf by update and index_put_, the direct
// set and erase of a leaf, and select_'s rebuild of a level.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/intrusive_ptr.h>

#include <tensordict/batch_index.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace in_memory {

/// An empty in-memory level with room for `capacity` entries.
c10::intrusive_ptr<TensorDictBase> make_level(c10::IntArrayRef batch_size, std::optional<at::Device> device,
                                              size_t capacity = 0);
/// The level of a TensorDict constructor: every value checked against the batch size and moved
/// to the device, nested braced lists built as nested levels, duplicate keys refused.
c10::intrusive_ptr<TensorDictBase> make_from_items(c10::ArrayRef<TensorDict::Item> items,
                                                   c10::IntArrayRef batch_size, std::optional<at::Device> device);
/// Writes `value` over the leaf `key` of `dest` when `dest` is an in-memory level whose entry at
/// `position` is that key's and a tensor (update's walk, where both levels list the same keys in
/// the same order): one handle assigned, no Entry made. False, nothing written, otherwise. The
/// caller has checked dest's lock and that `value` is storable as is.
bool assign_leaf_at(TensorDictBase& dest, std::string_view key, size_t position, const at::Tensor& value);
/// `dest[key][index] = value` when `dest` is an in-memory level holding a tensor at `key` (tried
/// at `position` first, as peek_at): write_at_'s default, with no second lookup, no virtual call
/// and no handle copied (index_put_ and update_at_ walking `value`'s keys in step). False, nothing
/// written, otherwise. LibTorch's refusal propagates as a c10::Error, as from write_at_.
bool write_leaf_at(TensorDictBase& dest, std::string_view key, size_t position, const BatchIndex& index,
                   const at::Tensor& value);

/// Note [Direct writes]: `root.set(key, value)` done directly when `root` is an in-memory tree
/// open for it all the way down to `key`'s level and `value` is storable there as is (value moved
/// from). False, nothing changed and value untouched, otherwise: the caller takes the general path.
bool try_set_tensor(TensorDictBase& root, const KeyRef& key, at::Tensor& value);
/// The same for `root.erase(key)`; false also when the key is missing (the general path raises).
bool try_erase(TensorDictBase& root, const KeyRef& key);
/// select_'s last step on `level` when it is in memory: only `kept` (distinct keys it holds) stay,
/// in that order, the level rebuilt at once. False, nothing changed, for other backends.
bool keep_in_order(TensorDictBase& level, const std::vector<std::string>& kept);

}  // namespace in_memory
}  // namespace tensordict
