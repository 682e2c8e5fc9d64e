#pragma once
// Note [Grouped results]: an op per leaf whose result is not laid out as its input (a reduction
// per leaf, an op with a batch-shaped operand) over an intact packed tree (a consolidated
// tensordict, or a packed op's result over its storage or runs, Notes [Intact results] and
// [Intact runs]) runs one kernel a group of leaves of one shape (Note [Shape groups],
// ops/shape_groups.h), as over any tree. Here the groups are read from the tree's shape (Note
// [Shared shapes]) instead of from its leaves, and the result is one deferred level over the
// groups' results: no leaf of the operand made or walked, no level of the result built until it
// is read.
//
// Both the groups and the result's shape depend only on the operand's shape and on what the op
// does (the batch sizes it leaves, the sizes of a group's entries), so both are made once and
// kept with the operand's shape: the next op of a tree laid out alike pays a lookup. The result
// lists its keys, kinds, nested levels and non-tensor entries as the operand does; leaf k of a
// group is entry k of the group's result, a contiguous view made on first access, as the
// per-leaf path's grouped leaves are. Anything else (leaves without elements or dims, one
// needing grad, runs numbered otherwise at some level, leaves LibTorch would reduce over
// threads, a kernel that raises) takes that path.

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <tensordict/function_ref.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

/// The groups of an intact tree's leaves, read from its shape: leaves of one shape, contiguous,
/// evenly spaced in one of its storages. Leaves are numbered in the shape's walk order (a level's
/// records, then its nested levels in slot order).
struct GroupPlan {
  struct Group {
    uint32_t storage = 0;  // which of the tree's storages (its runs, in the records' numbering)
    int64_t offset = 0;    // of its first leaf, in elements from the storage's start
    int64_t count = 0;    // leaves
    int64_t spacing = 0;  // elements from one leaf's start to the next's
    int64_t numel = 0;    // a leaf's elements
    int64_t level_dims = 0;  // the batch dims of its leaves' levels (one for the group)
    std::vector<int64_t> sizes, strides;  // a leaf's (standard strides)
  };
  std::vector<Group> groups;
  std::vector<uint32_t> group_of;  // per leaf: its group
  std::vector<uint32_t> place;     // per leaf: its entry in the group
};

namespace in_memory {

/// The result's batch sizes, as RebuildOptions gives them: the root's becomes `root`, and a
/// nested level's `root` followed by its dims past the operand root's, unless
/// `nested_extra_dims` is false (then `root` too). `filter_empty`: nested levels without entries
/// are dropped (the intact path then declines a tree holding one). `lock`: the result is built
/// locked, as lock_() would leave it.
struct GroupedResult {
  c10::IntArrayRef root;
  bool nested_extra_dims = true;
  bool filter_empty = false;
  bool lock = false;
  /// The op selects batch rows (td[index]): a NonTensorStack, whose rows would have to follow,
  /// keeps the tree off this path.
  bool indexes_rows = false;
};

/// `group_fn(view, level_dims)` once a group of `td`'s leaves (view: [count, *leaf sizes]; its
/// result's entry k is the k-th leaf's result; `level_dims`: the batch dims of the leaves'
/// levels), the result shaped as Note [Grouped results] says. Nullopt when `td` is no intact
/// packed tree (over one storage, or runs every level numbers alike), a leaf cannot group, a
/// result is not as expected or `group_fn` raises a c10::Error: the caller's per-leaf path then
/// runs.
std::optional<TensorDict> map_intact_groups(const TensorDictBase& td,
                                            FunctionRef<at::Tensor(const at::Tensor& group, int64_t level_dims)> group_fn,
                                            const GroupedResult& how);

/// map_intact_groups with a second operand: `partner`, a tree laid out as `td` (the same shape,
/// its storages of the same sizes numbered alike), whose group `group_fn` gets second, viewed
/// as `td`'s. Nullopt as map_intact_groups says, and where `partner` is not laid out so.
std::optional<TensorDict> map_intact_group_pairs(
    const TensorDictBase& td, const TensorDictBase* partner,
    FunctionRef<at::Tensor(const at::Tensor& group, const at::Tensor& partner_group, int64_t level_dims)> group_fn,
    const GroupedResult& how);

/// In place: `write(view)` once a group of `td`'s leaves (view: [count, *leaf sizes]), below
/// autograd, for an intact tree (over one storage, or runs every level numbers alike); then each
/// storage's version is bumped (and each made leaf's with a counter of its own), as
/// write_over_intact does. Only where the order of writes changes nothing and no write can fail
/// once another has written: `reads` (the op's tensor operand) needs no grad and is in no
/// storage of the tree, the storages need no grad and are no inference tensors outside inference
/// mode, and over runs of several dtypes each group's write is tried on no entries first. False,
/// nothing written, when it declines or a write raises a c10::Error before any wrote: the
/// caller's per-leaf path then runs, and names the key.
bool write_intact_groups(const TensorDictBase& td, FunctionRef<void(const at::Tensor& group)> write,
                         const at::Tensor& reads);

/// Raises the RuntimeError of a group write that failed after others had written (the callers'
/// rules make it unexpected), with LibTorch's message; the caller bumps the written versions.
[[noreturn]] void raise_after_group_writes(const c10::Error& e);

}  // namespace in_memory
}  // namespace tensordict
