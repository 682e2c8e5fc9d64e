#pragma once
// Checks shared by every operation that stores values: batch dims, device placement, locks,
// and the KeyError that lists the keys present.

#include <tensordict/entry.h>
#include <tensordict/key.h>
#include <tensordict/tensor_dict_base.h>

namespace tensordict {
namespace detail {

/// Checks that `value`'s leading dims are `dest`'s batch size; moves it to `dest`'s device.
at::Tensor prepare_tensor(const TensorDictBase& dest, KeyRef key, at::Tensor value);
TensorDict prepare_tensordict(const TensorDictBase& dest, KeyRef key, TensorDict value);
NonTensorData prepare_non_tensor(const TensorDictBase& dest, KeyRef key, NonTensorData value);
Entry prepare_entry(const TensorDictBase& dest, KeyRef key, Entry value);

/// KeyError for `key[depth]` missing at `level`, listing the keys there.
[[noreturn]] void throw_missing(const TensorDictBase& level, KeyRef key, size_t depth);
/// LockedError when `td` is locked.
void check_unlocked(const TensorDictBase& td);

}  // namespace detail
}  // namespace tensordict
