#pragma once
// Note [Shape groups]: a per-leaf op whose result is not laid out as its input (a reduction: a
// leaf's sum over a batch dim, its mean, its sum over its features) cannot run once over a
// packed storage as the elementwise ops do (Note [Packed runs]). But leaves of one shape lying
// evenly spaced in one storage (a consolidated tensordict's leaves of one shape and dtype, side
// by side; slices of one tensor) are one tensor of one more dim: [count, *leaf sizes] with
// strides [spacing, *leaf strides]. The op then runs once over that view, along the leaf's dims
// shifted by one, and its result's entry k is the k-th leaf's result. Leaves group wherever they
// sit in key order (consolidate lays each dtype's leaves out together, whatever the keys): sorted
// by storage, dtype, shape and place, leaves alike whose places step evenly form a group.
//
// The group's view holds exactly its leaves' elements (it steps over whatever lies between
// them), so the op reads nothing else; ops here only read, so leaves may even overlap. The
// result per leaf is the same as the op on the leaf alone: the kernel reduces each group entry
// as it would the leaf (the same inner loop over the same elements; checked against the
// per-leaf results in tests/unit/shape_groups_test.cpp).

#include <optional>

#include <ATen/core/Tensor.h>

#include <tensordict/function_ref.h>
#include <tensordict/tensor_dict.h>

#include "ops/leafwise.h"

namespace tensordict {
namespace ops {

using GroupFn = FunctionRef<at::Tensor(const at::Tensor& group, size_t first)>;

/// `per_leaf(i)` for every leaf of `like` (its tensor leaves `leaves`, in key order), rebuilt in
/// its structure with `options` as rebuild() does; each group of two or more leaves takes one
/// `group_fn(view, first)` instead, `view` being the group's [count, *leaf sizes] (its leaves
/// by place in their storage), `first` the index of the first of them, and the result's entry k
/// (along dim 0) the k-th one's result, made on first access (Note [Lazy leaves]). `level_dims[i]`, when given: the batch dims of the level
/// holding leaf i, which a group's leaves share (the feature reductions). Nullopt when no two
/// leaves group (the per-leaf path is then as fast), when a result is not as expected, under an
/// open forward-mode AD level, or when either function raises a c10::Error: the caller's
/// per-leaf path then runs, and names the key.
std::optional<TensorDict> map_shape_groups(const TensorDictBase& like, const LeafList& leaves, GroupFn group_fn,
                                           FunctionRef<at::Tensor(size_t)> per_leaf, const RebuildOptions& options,
                                           c10::ArrayRef<int64_t> level_dims = {});

using PairGroupFn = FunctionRef<at::Tensor(const at::Tensor& group, const at::Tensor& partner_group, size_t first)>;

/// map_shape_groups for an op with a second operand per leaf: `partners[i]`, leaf i's partner
/// (the other tensordict's leaf at its key). A group runs `group_fn(view, partner_view, first)`
/// where its leaves' partners, in the group's order, are of the leaves' rank, alike and evenly
/// spaced in one storage (`partner_view` their [count, *partner sizes]); its leaves go per leaf
/// otherwise.
std::optional<TensorDict> map_shape_group_pairs(const TensorDictBase& like, const LeafList& leaves,
                                                const LeafList& partners, PairGroupFn group_fn,
                                                FunctionRef<at::Tensor(size_t)> per_leaf,
                                                const RebuildOptions& options = {});

/// `fn(leaf)` for every leaf of `td`, rebuilt with `options` (map_each_leaf), with `group_fn` the
/// same op over a group: from an intact tree's shape first (Note [Grouped results],
/// backends/in_memory/grouped_result.h), else through map_shape_groups; per leaf, naming the key
/// of a failing leaf, where both decline. `lock`: a result from the shape comes locked, as
/// lock_() would leave it (others are the caller's to lock).
TensorDict map_leaves_grouped(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                              FunctionRef<at::Tensor(const at::Tensor& group)> group_fn,
                              const RebuildOptions& options = {}, bool lock = false);

/// In place: `write(view, first)` once a group of two or more leaves (writing them through their
/// group's view, `first` the index of the first of them; then each leaf's version is bumped as an
/// in-place op on it would), `write_leaf(i)` for every other leaf. Only where no kernel can fail
/// once another has written, and the order leaves are written in changes nothing: every leaf
/// plain (as a group's), of one dtype and device, not overlapping itself or another, not an
/// inference tensor outside inference mode; `reads` (the op's other tensor operand) needing no
/// grad and in no leaf's storage. False, nothing written, when it declines or the first kernel
/// raises a c10::Error: the caller's per-leaf path then runs, and names the key.
bool write_shape_groups(const LeafList& leaves, FunctionRef<void(const at::Tensor& group, size_t first)> write,
                        FunctionRef<void(size_t)> write_leaf, const at::Tensor& reads);

/// `per_leaf`'s operand shaped for a group: `t` (covering a leaf's leading dims, as a mask does)
/// with a leading 1 for the group's dim and trailing 1s up to `group`'s rank.
at::Tensor group_operand(const at::Tensor& t, const at::Tensor& group);

}  // namespace ops
}  // namespace tensordict
