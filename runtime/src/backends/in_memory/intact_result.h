#pragma once
// Note [Intact results]: the result of an elementwise op over a packed storage (a consolidated
// tensordict, ops/packed.cpp) is one new storage whose levels keep where each leaf lies in it
// (Note [Lazy leaves]). The result stays *intact* while none of its levels is written to: every
// write (set, erase, rename, update, clear, a nested level replaced) drops the level's records.
// Reading leaves does not: a made leaf is checked against its record (same storage, offset,
// sizes, strides, dtype and key set, and in grad mode no autograd), which catches in-place
// changes of a leaf's metadata (`set_`, `resize_`, `transpose_`, names, and in grad mode
// `requires_grad_`).
//
// The next elementwise op runs over the storage of an intact result whole, without gathering
// its leaves, and lays its own result out the same way, so a chain of such ops over a
// consolidated tensordict makes leaves only where a result is read, and reading them costs the
// next op only that check. An intact tree is the tree the op built (a level replaced or shared
// is a write to its parent), so its leaves tile its storage; a nested level of a result, whose
// leaves cover part of the storage, is told apart by counting its elements.

#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <tensordict/tensor_dict.h>

namespace tensordict {

class TensorDictImpl;
struct LazyLeaves;
struct LevelShape;

namespace in_memory {

/// The in-memory level of `td` when it is built as a packed op's result or is the table of a
/// consolidated tensordict (those levels only are looked at for intact results), else nullptr.
const TensorDictImpl* packed_level(const TensorDictBase& td);

/// Whether the made leaves of `level` (a built packed level whose leaves were made, `layout` its
/// records) are still the views the records describe, over whichever flat each names: same
/// storage, offset, sizes, strides, dtype and key set, and in grad mode none requiring grad.
bool made_leaves_intact(const TensorDictImpl& level, const LazyLeaves& layout, bool grad_mode);

/// The storage (1-D, whole) the tensor leaves of `td` tile, when `td` is an intact packed result
/// (every level in memory and as built, its made leaves as made, one storage for all, each element
/// in one leaf). Undefined otherwise, also for a tree without tensor leaves. `own_versions`, when
/// given, is set when a made leaf has a version counter of its own (not the storage's).
at::Tensor intact_packed_storage(const TensorDictBase& td, bool* own_versions = nullptr);
/// For an in-place op over intact_packed_storage(td) that set `own_versions`: bumps the version
/// of every made leaf with a counter of its own, as an in-place op on each leaf would (autograd
/// then refuses a backward through a leaf saved before).
void bump_made_leaf_versions(const TensorDictBase& td);
/// intact_packed_storage(td) when `td` is also laid out as `like` (an intact packed result, as
/// intact_packed_storage(like) found): the same keys and kinds in the same order and the same
/// batch sizes at every level, each leaf at the same element offset with the same sizes and
/// strides. Compared through the two trees' shapes (Note [Shared shapes]): two pointers when
/// they are laid out alike. `like_shape`, when given, receives like's shape where it was made
/// (null when `td` is `like`), for intact_packed_like to take rather than check it again.
at::Tensor intact_packed_storage_like(const TensorDictBase& td, const TensorDictBase& like,
                                      c10::intrusive_ptr<LevelShape>* like_shape = nullptr);
/// A result shaped like `like` (an intact packed result) with like's batch sizes, whose leaves
/// are views of `flat` (an elementwise result over like's storage) laid out as like's, made on
/// first access. `filter_empty` drops nested levels without entries (RebuildOptions); `lock`
/// builds it locked, as lock_() would leave it. `shape`: like's, when the caller has it from
/// intact_packed_storage_like in the same op.
TensorDict intact_packed_like(const TensorDictBase& like, const at::Tensor& flat, bool filter_empty, bool lock = false,
                              c10::intrusive_ptr<LevelShape> shape = {});
/// td.detach() when `td` is an intact packed result over one storage or over runs (Note [Intact
/// runs]) whose leaves, made or not, all share their storage's version counter (a consolidated
/// tensordict's; made leaves may require grad): the result's leaves view each storage's
/// detach() laid out as td's, made on first access and sharing that counter, as each leaf's
/// detach() would. Nullopt otherwise (detach per leaf).
std::optional<TensorDict> intact_detached(const TensorDictBase& td, bool lock);

}  // namespace in_memory
}  // namespace tensordict
