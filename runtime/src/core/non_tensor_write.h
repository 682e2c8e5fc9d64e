#pragma once
// An indexed write of non-tensor values (index_put_ of strings), shared by every level that
// stores whole values: the handle's index_put_ and a file view's set_non_tensor_; and what a
// writer of a stack's values reads of it.

#include <c10/util/ArrayRef.h>

#include <tensordict/batch_index.h>
#include <tensordict/non_tensor.h>

namespace tensordict {
namespace detail {

/// `value` with its pool cut to the values its elements hold: a stack keeps replaced values
/// until compacted() finds enough of them, which a writer that looks at the pool must not see.
NonTensorData held_values_only(const NonTensorData& value);

/// `current` (uniform, or a stack shaped `batch`) with the elements `index` selects replaced
/// by `incoming` (uniform, or shaped like the index's result). The pool is compacted, and a
/// result whose values all agree is one uniform value again (what every format can hold).
NonTensorData assign_non_tensor(const NonTensorData& current, c10::IntArrayRef batch, const BatchIndex& index,
                                const NonTensorData& incoming);

}  // namespace detail
}  // namespace tensordict
