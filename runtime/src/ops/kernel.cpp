#include "ops/kernel.h"

#include "ops/packed.h"
#include "ops/packed_runs.h"

namespace tensordict {
namespace ops {

LeafList compute(size_t n, bool try_foreach, FunctionRef<LeafList()> foreach, FunctionRef<at::Tensor(size_t)> loop,
                 FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  LeafList results;
  if (n > 0 && try_foreach) {
    try {
      results = foreach();
    } catch (const c10::Error&) {
      results.clear();  // the loop names the failing leaf
    }
  }
  if (results.size() != n) {
    results.assign(n, at::Tensor());
    size_t i = 0;
    try {
      for (; i < n; ++i) results[i] = loop(i);
    } catch (...) {
      rethrow_leaf_error(op, [&] { return key_of(i); });
    }
  }
  return results;
}

void compute_(size_t n, bool try_foreach, FunctionRef<bool()> foreach, FunctionRef<void(size_t)> loop,
              FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  if (n == 0 || (try_foreach && foreach())) return;
  size_t i = 0;
  try {
    for (; i < n; ++i) loop(i);
  } catch (...) {
    rethrow_leaf_error(op, [&] { return key_of(i); });
  }
}

namespace {
// fn of each leaf of `src` (its `leaves`), rebuilt in its structure; errors name the leaf.
TensorDict map_leaf_list(const TensorDict& src, const LeafList& leaves, const char* op,
                         FunctionRef<at::Tensor(const at::Tensor&)> fn, const RebuildOptions& options) {
  LeafList results = compute(
      leaves.size(), false, [] { return LeafList(); }, [&](size_t i) { return fn(leaves[i]); }, LeafKeys{*src.impl()},
      op);
  return rebuild(*src.impl(), std::move(results), options);
}
}  // namespace

TensorDict map_each_leaf(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                         const RebuildOptions& options) {
  const TensorDict src = readable(td);
  return map_leaf_list(src, leaves_of(src), op, fn, options);
}

TensorDict map_elementwise(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                           const RebuildOptions& options, size_t result_itemsize) {
  if (!options.batch_size) {
    if (auto intact = map_intact(*td.impl(), fn, result_itemsize, options.filter_empty)) return std::move(*intact);
  }
  const TensorDict src = readable(td);
  const LeafList leaves = leaves_of(src);
  if (!options.batch_size) {
    if (auto packed = map_packed(*src.impl(), leaves, fn, result_itemsize, options.filter_empty)) return std::move(*packed);
  } else if (const at::Tensor out = run_over(packed_storage_for_result(leaves, result_itemsize), fn); out.defined()) {
    // A new batch size: the leaves are made here, and rebuild() reshapes the structure.
    return rebuild(*src.impl(), unpack_like(out, leaves), options);
  } else if (std::optional<LeafList> results = map_runs(leaves, fn, result_itemsize)) {
    return rebuild(*src.impl(), std::move(*results), options);  // Note [Packed runs]
  }
  return map_leaf_list(src, leaves, op, fn, options);
}

}  // namespace ops
}  // namespace tensordict
