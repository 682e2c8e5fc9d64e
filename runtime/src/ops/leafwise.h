#pragma once
// The machinery every leaf-by-leaf operation shares: read the tree (one batched read per level
// whose reads are copies), gather its tensor leaves (or the matched leaves of two trees) into
// flat lists, run one kernel over the lists (a `_foreach_*` call or a loop), and rebuild a
// tensordict of the same structure around the results. In-place operations change the leaves
// and then commit: changes made to copies are written back through the backend
// (Note [Reads, copies and writes] in tensor_dict_base.h).

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/SmallVector.h>

#include <tensordict/entry.h>
#include <tensordict/function_ref.h>
#include <tensordict/key.h>
#include <tensordict/op_options.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace ops {

using LeafList = std::vector<at::Tensor>;

/// The tree the leaf-by-leaf operations read: `td` itself when every level's leaves alias its
/// storage, otherwise `td` with every level whose reads are copies replaced by its snapshot().
TensorDict readable(const TensorDict& td);

/// The target of an in-place operation: tree() holds the leaves to change in place (the
/// stored tensors, or copies read in one snapshot per level), and commit() writes the changed
/// copies back through the backend, one write_many_ per level read. Nothing is written back when
/// the kernel throws before commit().
class InPlaceTarget {
 public:
  explicit InPlaceTarget(const TensorDict& td);
  const TensorDict& tree() const { return tree_; }
  void commit() const;

 private:
  // Filled while tree_ is built: declared first.
  std::vector<std::pair<TensorDict, TensorDict>> write_backs_;  // (level, its changed snapshot)
  TensorDict tree_;
};

/// Appends the tensor leaves of `td` (nested ones included) in key order.
void collect_leaves(const TensorDictBase& td, LeafList& out);
LeafList leaves_of(const TensorDict& td);
/// The tensor leaves of `td` with their full keys, in the same order.
void collect_keys(const TensorDictBase& td, std::vector<NestedKey>& out);

/// What rebuild() does with the structure around the results.
struct RebuildOptions {
  /// Batch size of the result's root; its nested levels keep their extra batch dims unless
  /// `nested_extra_dims` is false. Default: the batch size of `like`.
  std::optional<c10::IntArrayRef> batch_size;
  bool nested_extra_dims = true;
  /// Drop nested levels left without entries (Python's filter_empty=True of the math ops).
  bool filter_empty = false;
};

/// A tensordict shaped like `like` (same keys, nested tensordicts, non-tensor entries) whose
/// i-th tensor leaf is `results[i]`; undefined results drop the entry.
TensorDict rebuild(const TensorDictBase& like, const LeafList& results, const RebuildOptions& options = {});
/// The same, taking the results' handles over (no reference count touched per leaf).
TensorDict rebuild(const TensorDictBase& like, LeafList&& results, const RebuildOptions& options = {});

/// Leaves of two tensordicts matched by key, following `default_` for keys on one side only.
/// `lhs[i]` and `rhs[i]` are the operands of the i-th result; `rebuild_pair` rebuilds.
struct MatchedLeaves {
  LeafList lhs;
  LeafList rhs;
  /// When set, the full key of every pair is appended too (for error messages).
  std::vector<NestedKey>* keys = nullptr;
  /// Keys only the second tensordict has are ignored instead of raising (the in-place ops: the
  /// first one's structure cannot grow, as in Python).
  bool ignore_extra_rhs = false;
};
void match_leaves(const TensorDict& a, const TensorDict& b, const BinaryDefault& default_, MatchedLeaves& out);
/// The result of a binary op over match_leaves' pairs: the structure of `a` (and, for a fill
/// value default, the keys only `b` has, after a's), batch size `batch_size`.
TensorDict rebuild_pair(const TensorDict& a, const TensorDict& b, const BinaryDefault& default_, LeafList results,
                        c10::IntArrayRef batch_size, bool filter_empty = false);

/// `fn(x, y)` for the leaves of `a` and `b` at each key, in one walk that builds the result as
/// it goes (no pair lists, no second walk): the strict match of match_leaves + rebuild_pair at one
/// batch size, nested levels left empty dropped when `filter_empty`. For the plain case only: nullopt, nothing kept,
/// when anything else shows up (a key on one side only, kinds that differ, non-tensor data, a leaf
/// off the CPU, leaves that may lie in one storage, an error from `fn`), for the general path
/// to handle, or to raise with the key named.
std::optional<TensorDict> zip_leaves(const TensorDict& a, const TensorDict& b,
                                     FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn,
                                     bool filter_empty);

/// Broadcast of two batch sizes; ShapeError naming both when they do not broadcast.
std::vector<int64_t> broadcast_batch(c10::IntArrayRef a, c10::IntArrayRef b, const char* op);

/// `other` prepared for `td op other` (Python semantics 1.12): broadcast with the batch size,
/// then left-aligned to the batch dims. `aligned(leaf)` gives the operand for one leaf.
class AlignedTensor {
 public:
  AlignedTensor(const TensorDict& td, const at::Tensor& other, const char* op);
  at::Tensor operand(const at::Tensor& leaf) const { return operand_of_rank(leaf.dim()); }
  /// The same for a leaf of `leaf_dims` dims.
  at::Tensor operand_of_rank(int64_t leaf_dims) const;
  /// The same for a group of such leaves (Note [Shape groups]): a leading 1 for the group's dim,
  /// unless the operand has no dims (it then promotes as a 0-dim tensor next to the group as
  /// next to each leaf).
  at::Tensor group_operand(int64_t leaf_dims) const;
  c10::IntArrayRef batch_size() const { return batch_; }

 private:
  at::Tensor expanded_;
  std::vector<int64_t> batch_;
  int64_t root_dims_;
  bool zero_dim_;
};

/// The operand to use for `leaf op scalar`: a 0-dim tensor of the leaf's own dtype when that
/// gives exactly LibTorch's scalar result (float and double leaves with a real scalar), which
/// skips the slow wrapped-scalar path; otherwise an undefined tensor (use the Scalar overload).
class ScalarOperand {
 public:
  explicit ScalarOperand(const c10::Scalar& value) : value_(value) {}
  /// The 0-dim tensor for `leaf`, or undefined.
  const at::Tensor& for_leaf(const at::Tensor& leaf);
  const c10::Scalar& value() const { return value_; }

 private:
  c10::Scalar value_;
  at::Tensor float_, double_;
  at::Tensor undefined_;
};

/// True when autograd would record an op on one of `leaves` (the 1.13 `_foreach_*` kernels
/// have no autograd formulas, so such lists take the per-leaf loop).
bool needs_autograd(const LeafList& leaves);
/// True when one `_foreach_*` call over `leaves` can beat a loop of `at::` calls: not on the CPU,
/// whose `_foreach_*` kernels (1.13 and 2.x alike) are that loop plus a dispatch and list checks,
/// and not under autograd.
bool foreach_pays(const LeafList& leaves);

/// From a catch-all block around the work on one leaf: rethrows a LibTorch error as a tensordict
/// RuntimeError naming the leaf's key, made by `key` only then. LibTorch raises most errors as
/// c10::Error, a few as a plain std::runtime_error (1.13's view/reshape shape inference), which
/// is wrapped too, wherever it came from (it stays a std::runtime_error to its catcher). Anything
/// else (a tensordict error, std::bad_alloc, an exception type of the callable's own, a forced
/// unwind) passes through untouched, with no key made.
[[noreturn]] void rethrow_leaf_error(const char* op, FunctionRef<NestedKey()> key);

/// Runs `fn(i)` for every leaf index, turning a LibTorch error into one naming the leaf's key
/// (looked up in `td` only on failure).
template <typename Fn>
void for_each_index(const TensorDictBase& td, size_t n, const char* op, Fn&& fn) {
  size_t i = 0;
  try {
    for (; i < n; ++i) fn(i);
  } catch (...) {
    rethrow_leaf_error(op, [&] {
      std::vector<NestedKey> keys;
      collect_keys(td, keys);
      return i < keys.size() ? keys[i] : NestedKey("?");
    });
  }
}

/// Keeps the lock of `src` on `out` (pointwise results inherit it, semantics 1.7).
/// Whether an in-place `_foreach_*` kernel may write `self` with `other` (matched leaf by leaf):
/// it pays (foreach_pays), `other` needs no grad, and each pair is of one floating dtype, shape
/// and device (the kernels do not promote or broadcast).
bool foreach_inplace_safe(const LeafList& self, const LeafList& other);

TensorDict keep_lock(TensorDict out, const TensorDict& src);

/// Python's `inplace=True` for an operation that makes a new tree: `td` (an in-memory tensordict;
/// NotImplementedError otherwise, LockedError when locked) and its nested levels keep their
/// identity and take `result`'s entries, batch size and names.
TensorDict& rebind_leaves(TensorDict& td, const TensorDict& result, const char* op);

}  // namespace ops
}  // namespace tensordict
