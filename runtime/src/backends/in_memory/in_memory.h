#pragma once
// Entry points of the in-memory backend for the rest of the runtime: new levels, the
// constructors' fast path, and update's write of a leaf in place.

#include <optional>
#include <string_view>

#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/intrusive_ptr.h>

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

}  // namespace in_memory
}  // namespace tensordict
