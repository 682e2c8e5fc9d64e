#pragma once
// Note [Grouped results]: a reduction per leaf over an intact packed tree (a consolidated
// tensordict, or a packed op's result over its storage or runs, Notes [Intact results] and
// [Intact runs])
// runs one kernel a group of leaves of one shape (Note [Shape groups], ops/shape_groups.h), as
// over any tree. Here the groups are read from the tree's shape (Note [Shared shapes]) instead
// of from its leaves, and the result is one deferred level over the groups' results: no leaf of
// the operand made or walked, no level of the result built until it is read.
//
// Both the groups and the result's shape depend only on the operand's shape and on what the
// reduction does (the dims it reduces, the sizes of a group's entries), so both are made once
// and kept with the operand's shape: the next reduction of a tree laid out alike pays a lookup.
// The result lists its keys, kinds, nested levels and non-tensor entries as the operand does,
// with the batch sizes the reduction leaves; leaf k of a group is entry k of the group's
// result, a contiguous view made on first access, as the per-leaf path's grouped leaves are.
// Anything else (leaves without elements or dims, one needing grad, several storages, leaves
// LibTorch would reduce over threads, a kernel that raises) takes that path.

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

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
    std::vector<int64_t> sizes, strides;  // a leaf's (standard strides)
  };
  std::vector<Group> groups;
  std::vector<uint32_t> group_of;  // per leaf: its group
  std::vector<uint32_t> place;     // per leaf: its entry in the group
};

namespace in_memory {

/// What a reduction does to the batch sizes, as RebuildOptions says it: the root's becomes
/// `root`, and a nested level's `root` followed by its dims past the operand root's, unless
/// `nested_extra_dims` is false (then `root` too).
struct GroupedReduction {
  c10::IntArrayRef root;
  bool nested_extra_dims = true;
};

/// `group_fn(view)` once a group of `td`'s leaves (view: [count, *leaf sizes]; its result's entry
/// k is the k-th leaf's result), the result shaped as Note [Grouped results] says. Nullopt when
/// `td` is no intact packed tree (over one storage, or runs every level numbers alike), a leaf
/// cannot group, a result is not as expected or `group_fn` raises a c10::Error: the caller's
/// per-leaf path then runs.
std::optional<TensorDict> reduce_intact_groups(const TensorDictBase& td,
                                               FunctionRef<at::Tensor(const at::Tensor&)> group_fn,
                                               const GroupedReduction& how);

}  // namespace in_memory
}  // namespace tensordict
