#pragma once
// An unread packed result (Note [Lazy leaves]): the result of an elementwise op over a packed
// storage none of whose leaves was made since. The next elementwise op reads its storage and its
// structure without making the leaves, and lays its own result out the same way, so a chain of
// such ops over a consolidated tensordict makes leaves only where the last result is read.

#include <ATen/core/Tensor.h>

#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace in_memory {

/// The storage (1-D, whole) the tensor leaves of `td` tile, when `td` is an unread packed
/// result: every level in memory, every leaf unmade, one storage for all, each element in one
/// leaf. Undefined otherwise, also for a tree without tensor leaves. A level whose entries were
/// changed has made its leaves; a root holding only nested levels may have lost one (erased or
/// replaced) or hold one twice, which the check that the leaves tile the storage finds.
at::Tensor unread_packed_storage(const TensorDictBase& td);
/// True when `a` and `b` are unread packed results laid out alike: the same keys and kinds in
/// the same order and the same batch sizes at every level, each leaf at the same element offset
/// with the same sizes and strides.
bool same_unread_layout(const TensorDictBase& a, const TensorDictBase& b);
/// A result shaped like `like` (an unread packed result) with like's batch sizes, whose leaves
/// are views of `flat` (an elementwise result over like's storage) laid out as like's, made on
/// first access. `filter_empty` drops nested levels without entries (RebuildOptions).
TensorDict unread_packed_like(const TensorDictBase& like, const at::Tensor& flat, bool filter_empty);

}  // namespace in_memory
}  // namespace tensordict
