#pragma once
// Checks shared by every operation that stores values: batch dims, device placement, locks,
// and the KeyError that lists the keys present.

#include <c10/macros/Macros.h>

#include <string_view>

#include <tensordict/entry.h>
#include <tensordict/function_ref.h>
#include <tensordict/key.h>
#include <tensordict/tensor_dict_base.h>

namespace tensordict {

class BatchIndex;

namespace detail {

/// True when the defined tensor `value`'s shape starts with `dest`'s batch size. Inline, reading
/// the sizes from the TensorImpl (an out-of-line sizes() call was a third of the constructor's
/// cost).
C10_ALWAYS_INLINE bool batch_leads(const TensorDictBase& dest, const at::Tensor& value) {
  const c10::IntArrayRef batch = dest.batch_size();
  const c10::IntArrayRef shape = value.unsafeGetTensorImpl()->sizes();
  if (shape.size() < batch.size()) return false;
  for (size_t d = 0; d < batch.size(); ++d) {
    if (shape[d] != batch[d]) return false;
  }
  return true;
}

/// True when `value` can be stored in `dest` as it is: its shape starts with the batch size and
/// it is on the tensordict's device. The fast path of constructors and of prepare_tensor().
C10_ALWAYS_INLINE bool storable_as_is(const TensorDictBase& dest, const at::Tensor& value) {
  if (!value.defined() || !batch_leads(dest, value)) return false;
  const auto& device = dest.device();
  return !device.has_value() || value.device() == *device;
}

/// The shape of `leaf[index]` for a leaf of shape `leaf` whose first `batch_dims` dims are
/// batch dims: the index's result batch, then the leaf's own dims.
BatchSize indexed_shape(c10::IntArrayRef leaf, size_t batch_dims, const BatchIndex& index);
/// Whether `value` broadcasts to `target` as `leaf[index] = value` allows: trailing dims equal
/// or 1, extra leading dims 1. For backends that write nothing when an index selects nothing,
/// and so would skip the check LibTorch makes.
bool broadcasts_to(c10::IntArrayRef value, c10::IntArrayRef target);

/// Checks that `value`'s leading dims are `dest`'s batch size; moves it to `dest`'s device.
at::Tensor prepare_tensor(const TensorDictBase& dest, KeyRef key, at::Tensor value);
TensorDict prepare_tensordict(const TensorDictBase& dest, KeyRef key, TensorDict value);
NonTensorData prepare_non_tensor(const TensorDictBase& dest, KeyRef key, NonTensorData value);
Entry prepare_entry(const TensorDictBase& dest, KeyRef key, Entry value);
/// set_'s write of `value` over the tensor leaf `name` of `level`: ShapeError unless value's
/// leading dims are level's batch size; a copy LibTorch refuses is a ValueError naming both
/// shapes. `key` makes the full key, for those errors only.
void write_tensor_(TensorDictBase& level, std::string_view name, const at::Tensor& value, FunctionRef<NestedKey()> key);

/// KeyError for `key[depth]` missing at `level`, listing the keys there.
[[noreturn]] void throw_missing(const TensorDictBase& level, KeyRef key, size_t depth);
[[noreturn]] void throw_locked();
[[noreturn]] void throw_empty_key();
/// LockedError when `td` is locked. Inline: every write checks it, often once per level.
inline void check_unlocked(const TensorDictBase& td) {
  if (C10_UNLIKELY(td.is_locked())) throw_locked();
}
/// KeyError for the empty key.
inline void check_key(KeyRef key) {
  if (C10_UNLIKELY(key.empty())) throw_empty_key();
}

}  // namespace detail
}  // namespace tensordict
