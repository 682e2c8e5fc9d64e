#pragma once
// Running one operation over a list of leaves: one `_foreach_*` call where it applies, else a
// loop whose LibTorch errors name the failing leaf's key. Every leaf-by-leaf operation of
// ops/ goes through these two, out of place and in place.

#include <ATen/core/Tensor.h>

#include <tensordict/function_ref.h>
#include <tensordict/key.h>

#include "ops/leafwise.h"

namespace tensordict {
namespace ops {

/// The `n` results of an out-of-place operation: `foreach()` when `try_foreach` and it applies
/// (it returns a list of `n` results, or an empty list when it does not apply), else `loop(i)`
/// for each i. `key_of(i)` names the leaf of a failing loop step; it runs only then.
LeafList compute(size_t n, bool try_foreach, FunctionRef<LeafList()> foreach, FunctionRef<at::Tensor(size_t)> loop,
                 FunctionRef<NestedKey(size_t)> key_of, const char* op);
/// The in-place form: `foreach()` when `try_foreach` (false when it does not apply), else
/// `loop(i)` for each i.
void compute_(size_t n, bool try_foreach, FunctionRef<bool()> foreach, FunctionRef<void(size_t)> loop,
              FunctionRef<NestedKey(size_t)> key_of, const char* op);

/// key_of for the leaves of one tree (collected again only on failure).
struct LeafKeys {
  const TensorDictBase& tree;
  NestedKey operator()(size_t i) const {
    std::vector<NestedKey> keys;
    collect_keys(tree, keys);
    return i < keys.size() ? keys[i] : NestedKey("?");
  }
};

/// key_of for the i-th pair of two matched trees (matched again only on failure).
struct PairKeys {
  const TensorDict& a;
  const TensorDict& b;
  const BinaryDefault& def;
  bool ignore_extra_rhs = false;
  NestedKey operator()(size_t i) const {
    std::vector<NestedKey> keys;
    MatchedLeaves again;
    again.keys = &keys;
    again.ignore_extra_rhs = ignore_extra_rhs;
    match_leaves(a, b, def, again);
    return i < keys.size() ? keys[i] : NestedKey("?");
  }
};

/// `fn(leaf)` for every leaf of `td` (read once), rebuilt in its structure with `options`; a
/// LibTorch error names the leaf.
TensorDict map_each_leaf(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                         const RebuildOptions& options = {});
/// map_each_leaf for an elementwise `fn` (its result has its input's shape, each element made
/// from the element at the same place): one call over the packed storage when the leaves tile
/// one (ops/packed.h), so the result is packed too; per leaf otherwise. `result_itemsize`: the
/// result's bytes an element (0: the input's), for packed_storage_for_result.
TensorDict map_elementwise(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                           const RebuildOptions& options = {}, size_t result_itemsize = 0);

}  // namespace ops
}  // namespace tensordict
