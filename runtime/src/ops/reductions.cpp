// Reductions (semantics 1.13): per leaf (a tensordict), over a batch dim, over the feature dims,
// or with `reduce` one tensor over all leaves; max/min with indices, logsumexp, quantile.

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include "backends/in_memory/grouped_result.h"
#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/intact_runs.h"
#include "core/batch_dim.h"
#include "core/format.h"
#include "core/strided_view.h"
#include "ops/element_views.h"
#include "ops/kernel.h"
#include "ops/leafwise.h"
#include "ops/packed.h"
#include "ops/packed_runs.h"
#include "ops/shape_groups.h"

namespace tensordict {

using namespace ops;

namespace {

enum class Red : uint8_t { Sum, Nansum, Mean, Nanmean, Prod, Norm, Std, Var, Amax, Amin, Max, Min, Quantile };

// The arguments some reductions take besides the dim.
struct Extra {
  bool unbiased = true;
  double q = 0.5;
  std::string_view interpolation = "linear";
  c10::string_view interp() const { return c10::string_view(interpolation.data(), interpolation.size()); }
};

const char* red_name(Red r) {
  switch (r) {
    case Red::Sum: return "sum";
    case Red::Nansum: return "nansum";
    case Red::Mean: return "mean";
    case Red::Nanmean: return "nanmean";
    case Red::Prod: return "prod";
    case Red::Norm: return "norm";
    case Red::Std: return "std";
    case Red::Var: return "var";
    case Red::Amax: return "amax";
    case Red::Amin: return "amin";
    case Red::Max: return "max";
    case Red::Min: return "min";
    case Red::Quantile: return "quantile";
  }
  return "?";
}

at::Tensor reduce_full(Red r, const at::Tensor& t, const Extra& x) {
  switch (r) {
    case Red::Sum: return at::sum(t);
    case Red::Nansum: return at::nansum(t);
    case Red::Mean: return at::mean(t);
    case Red::Nanmean: return at::nanmean(t);
    case Red::Prod: return at::prod(t);
    case Red::Norm: return at::norm(t);
    case Red::Std: return at::std(t, x.unbiased);
    case Red::Var: return at::var(t, x.unbiased);
    case Red::Amax: return at::amax(t, c10::IntArrayRef{});
    case Red::Amin: return at::amin(t, c10::IntArrayRef{});
    case Red::Max: return at::max(t);
    case Red::Min: return at::min(t);
    case Red::Quantile: return at::quantile(t, x.q, c10::nullopt, false, x.interp());
  }
  return at::Tensor();
}

at::Tensor reduce_dim(Red r, const at::Tensor& t, int64_t dim, bool keepdim, const Extra& x) {
  switch (r) {
    case Red::Sum: return at::sum(t, {dim}, keepdim);
    case Red::Nansum: return at::nansum(t, {dim}, keepdim);
    case Red::Mean: return at::mean(t, {dim}, keepdim);
    case Red::Nanmean: return at::nanmean(t, {dim}, keepdim);
    case Red::Prod: return at::prod(t, dim, keepdim);
    case Red::Norm: return at::norm(t, 2, {dim}, keepdim);
    case Red::Std: return at::std(t, {dim}, x.unbiased, keepdim);
    case Red::Var: return at::var(t, {dim}, x.unbiased, keepdim);
    case Red::Amax: return at::amax(t, {dim}, keepdim);
    case Red::Amin: return at::amin(t, {dim}, keepdim);
    case Red::Max: return std::get<0>(at::max(t, dim, keepdim));
    case Red::Min: return std::get<0>(at::min(t, dim, keepdim));
    case Red::Quantile: return at::quantile(t, x.q, c10::optional<int64_t>(dim), keepdim, x.interp());
  }
  return at::Tensor();
}

// A batch dim of a reduction: Python raises IndexError outside the batch.
int64_t reduction_dim(const TensorDict& td, int64_t dim, const char* op) {
  return detail::wrap_batch_dim<IndexError>(dim, td.batch_dims(), op, td.batch_size());
}

// The batch size once `dim` is reduced.
std::vector<int64_t> reduced_batch(c10::IntArrayRef batch, int64_t dim, bool keepdim) {
  std::vector<int64_t> out = batch.vec();
  if (keepdim) {
    out[dim] = 1;
  } else {
    out.erase(out.begin() + dim);
  }
  return out;
}

// Whether a group's rows reduce as each leaf would, bit for bit. Not std and var: LibTorch
// reduces a leaf to one value with another algorithm than a group's rows (1-2 ulp apart in
// double), so they stay per leaf.
bool groups_exact(Red r) { return r != Red::Std && r != Red::Var; }

using GroupReduction = FunctionRef<at::Tensor(const at::Tensor& group)>;

// `fn(leaf)` for every leaf, rebuilt with batch size `batch` (nested levels keep their extra
// dims unless `nested_extra_dims` is false); `group_fn` is the same reduction over a group of
// leaves (Notes [Grouped results] and [Shape groups]).
// `group`: whether groups may take `group_fn` (groups_exact), else every leaf takes `fn`.
TensorDict map_leaves_to(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                         GroupReduction group_fn, c10::IntArrayRef batch, bool nested_extra_dims = true,
                         bool group = true) {
  RebuildOptions options;
  options.batch_size = batch;
  options.nested_extra_dims = nested_extra_dims;
  return group ? map_leaves_grouped(td, op, fn, group_fn, options) : map_each_leaf(td, op, fn, options);
}

// A group's leaves as the rows of [count, leaf elements]: a plain view, since a group's leaves
// have the standard strides (Note [Shape groups]; a reshape through the dispatcher costs as
// much as a small reduction).
at::Tensor group_rows(const at::Tensor& g) {
  const c10::IntArrayRef leaf = g.sizes().slice(1);
  if (!detail::has_standard_strides(leaf, g.strides().slice(1))) return g.reshape({g.size(0), -1});
  const int64_t sizes[] = {g.size(0), c10::multiply_integers(leaf)}, strides[] = {g.stride(0), 1};
  return detail::strided_view(g, sizes, strides, g.storage_offset());
}

TensorDict reduce_td(const TensorDict& td, Red r, std::optional<int64_t> dim, bool keepdim, const Extra& x) {
  if (!dim) {
    // A group's entries flattened, each reduced whole as its leaf would be.
    return map_leaves_to(
        td, red_name(r), [&](const at::Tensor& t) { return reduce_full(r, t, x); },
        [&](const at::Tensor& g) { return reduce_dim(r, group_rows(g), 1, false, x); }, {},
        /*nested_extra_dims=*/false, groups_exact(r));
  }
  const int64_t d = reduction_dim(td, *dim, red_name(r));
  const std::vector<int64_t> batch = reduced_batch(td.batch_size(), d, keepdim);
  return map_leaves_to(
      td, red_name(r), [&](const at::Tensor& t) { return reduce_dim(r, t, d, keepdim, x); },
      [&](const at::Tensor& g) { return reduce_dim(r, g, d + 1, keepdim, x); }, batch,
      /*nested_extra_dims=*/true, groups_exact(r));
}

// `leaf` with its feature dims (those past `batch_dims`) flattened into one last dim, or a new
// unit last dim when it has none: reducing over dim -1 then reduces every feature dim.
at::Tensor features_last(const at::Tensor& leaf, int64_t batch_dims) {
  return leaf.dim() > batch_dims ? leaf.flatten(batch_dims) : leaf.unsqueeze(-1);
}

// The leaves of `td` with the batch dims of the level that holds each, in key order.
void collect_with_level_dims(const TensorDictBase& td, LeafList& leaves, std::vector<int64_t>& dims) {
  td.for_each([&](const std::string&, const Entry& e) {
    if (e.is_tensor()) {
      leaves.push_back(e.tensor_unchecked());
      dims.push_back(td.batch_dims());
    } else if (e.is_tensordict()) {
      collect_with_level_dims(*e.tensordict_unchecked().impl(), leaves, dims);
    }
  });
}

// Python's dim="feature": every level reduces its own leaves' feature dims, so batch sizes stay.
TensorDict reduce_features(const TensorDict& td, Red r, const Extra& x) {
  const TensorDict src = readable(td);
  if (groups_exact(r)) {
    // The group's dim 0 comes before the leaves' batch dims (Note [Grouped results]).
    const auto per_group = [&](const at::Tensor& g, int64_t level_dims) {
      return reduce_dim(r, features_last(g, level_dims + 1), -1, false, x);
    };
    if (auto grouped = in_memory::map_intact_groups(*src.impl(), per_group, {src.batch_size()}))
      return std::move(*grouped);
  }
  LeafList leaves;
  std::vector<int64_t> dims;
  collect_with_level_dims(*src.impl(), leaves, dims);
  const auto per_leaf = [&](size_t i) { return reduce_dim(r, features_last(leaves[i], dims[i]), -1, false, x); };
  const auto per_group = [&](const at::Tensor& g, size_t first) {
    // The group's dim 0 comes before the leaves' batch dims.
    return reduce_dim(r, features_last(g, dims[first] + 1), -1, false, x);
  };
  if (groups_exact(r)) {
    if (auto grouped = map_shape_groups(*src.impl(), leaves, per_group, per_leaf, RebuildOptions(), dims))
      return std::move(*grouped);
  }
  LeafList results =
      compute(leaves.size(), false, [] { return LeafList(); }, per_leaf, LeafKeys{*src.impl()}, red_name(r));
  return ops::rebuild(*src.impl(), std::move(results));
}

// One tensor over all leaves (Python's reduce=True). No dim: every leaf flattened, all
// concatenated, reduced fully. A batch `dim`: the leaves concatenated along it, then reduced
// there. The feature dims: every leaf's features past the root batch dims joined along one
// last dim, then reduced over it (a tensor of the batch size).
at::Tensor reduce_all(const TensorDict& td, Red r, std::optional<int64_t> dim, bool feature, const Extra& x) {
  const char* form = feature ? "(reduce, feature)" : "(reduce)";
  // Tensors that hold every leaf's elements and nothing else (a packed storage, its runs, or
  // element_views' 2-D views over padding): reduced whole, below autograd (Note [Below
  // autograd], packed.cpp), several joined first.
  const auto over_storage = [&](c10::ArrayRef<at::Tensor> flats) {
    try {
      const at::AutoDispatchBelowADInplaceOrView below_autograd;
      if (flats.size() == 1) return reduce_full(r, flats.front(), x);
      c10::SmallVector<at::Tensor, 4> parts;
      for (const at::Tensor& f : flats) parts.push_back(f.dim() == 1 ? f : f.reshape({-1}));
      return reduce_full(r, at::cat(parts, 0), x);
    } catch (const c10::Error& e) {
      TD_THROW(RuntimeError, red_name(r), form, ": ", e.what_without_backtrace());
    }
  };
  if (!feature && !dim) {
    // An intact packed result (Note [Intact results]): its storage is every leaf's elements.
    if (const at::Tensor flat = in_memory::intact_packed_storage(*td.impl()); flat.defined())
      return over_storage(flat);
    // Intact runs (Note [Intact runs]): every leaf's elements, a run at a time, or as
    // element_views over the padding, found from the records.
    if (const auto runs = in_memory::intact_runs(*td.impl())) {
      if (const auto views = element_views(*runs)) return over_storage(*views);
    }
  }
  LeafList leaves = leaves_of(readable(td));
  TD_CHECK(!leaves.empty(), ValueError, red_name(r), form, ": the tensordict has no tensor leaves");
  std::optional<int64_t> d;
  if (dim) d = reduction_dim(td, *dim, red_name(r));
  if (!feature && !d) {
    // A packed storage (a consolidated tensordict) is already every leaf's elements in one
    // tensor: reduced as it is, no concatenation (the order differs, the result only by rounding).
    if (const at::Tensor flat = packed_storage(leaves); flat.defined()) return over_storage(flat);
    // Runs of leaves (Note [Packed runs]), never over padding: one view a run, or one over
    // evenly spaced runs that padding splits (Python's layout of odd-sized 4-byte leaves).
    if (const auto views = element_views(leaves)) return over_storage(*views);
  }
  LeafList parts;
  parts.reserve(leaves.size());
  for (const auto& t : leaves) {
    parts.push_back(feature ? features_last(t, td.batch_dims()) : d ? t : t.reshape({-1}));
  }
  try {
    const int64_t cat_dim = feature ? -1 : d ? *d : 0;
    at::Tensor joined = at::cat(parts, cat_dim);
    if (!feature && !d) return reduce_full(r, joined, x);
    return reduce_dim(r, joined, cat_dim, false, x);
  } catch (const c10::Error& e) {
    TD_THROW(RuntimeError, red_name(r), form, ": ", e.what_without_backtrace());
  }
}

ValuesIndices max_min(const TensorDict& td, bool max, int64_t dim, bool keepdim) {
  const char* op = max ? "max" : "min";
  const int64_t d = reduction_dim(td, dim, op);
  const TensorDict src = readable(td);
  LeafList leaves = leaves_of(src);
  const std::vector<int64_t> batch = reduced_batch(td.batch_size(), d, keepdim);
  RebuildOptions options;
  options.batch_size = c10::IntArrayRef(batch);
  // Groups of leaves (Note [Shape groups]): the values' pass keeps each group's indices, by its
  // first leaf, and each other leaf's, for the indices' pass over the same groups.
  std::vector<std::pair<size_t, at::Tensor>> group_indices;
  const auto of_leaf = [&](size_t i) { return max ? at::max(leaves[i], d, keepdim) : at::min(leaves[i], d, keepdim); };
  LeafList single_indices(leaves.size());  // of the leaves in no group, from the values' pass
  const auto one = [&](size_t i) {
    auto [v, index] = of_leaf(i);
    single_indices[i] = std::move(index);
    return v;
  };
  const auto one_index = [&](size_t i) {
    return single_indices[i].defined() ? single_indices[i] : std::get<1>(of_leaf(i));
  };
  std::optional<TensorDict> grouped_values = map_shape_groups(
      *src.impl(), leaves,
      [&](const at::Tensor& g, size_t first) {
        auto [v, i] = max ? at::max(g, d + 1, keepdim) : at::min(g, d + 1, keepdim);
        group_indices.emplace_back(first, std::move(i));
        return v;
      },
      one, options);
  if (grouped_values) {
    std::optional<TensorDict> grouped_indices = map_shape_groups(
        *src.impl(), leaves,
        [&](const at::Tensor&, size_t first) {
          at::Tensor found;
          for (const auto& [f, i] : group_indices)
            if (f == first) found = i;
          TORCH_CHECK(found.defined(), "no indices kept for this group");  // the same groups: not reached
          return found;
        },
        one_index, options);
    if (grouped_indices) return ValuesIndices{std::move(*grouped_values), std::move(*grouped_indices)};
  }
  LeafList values(leaves.size()), indices(leaves.size());
  compute_(
      leaves.size(), false, [] { return false; },
      [&](size_t i) {
        std::tie(values[i], indices[i]) = max ? at::max(leaves[i], d, keepdim) : at::min(leaves[i], d, keepdim);
      },
      LeafKeys{*src.impl()}, op);
  return ValuesIndices{ops::rebuild(*src.impl(), values, options), ops::rebuild(*src.impl(), indices, options)};
}

}  // namespace

#define TENSORDICT_DEFINE_REDUCTION(name, R)                                                                 \
  TensorDict TensorDict::name(std::optional<int64_t> dim, bool keepdim) const {                              \
    return reduce_td(*this, Red::R, dim, keepdim, Extra());                                                  \
  }                                                                                                          \
  at::Tensor TensorDict::name(Reduce, std::optional<int64_t> dim) const {                                    \
    return reduce_all(*this, Red::R, dim, /*feature=*/false, Extra());                                       \
  }                                                                                                          \
  TensorDict TensorDict::name(FeatureDims) const { return reduce_features(*this, Red::R, Extra()); }         \
  at::Tensor TensorDict::name(Reduce, FeatureDims) const {                                                   \
    return reduce_all(*this, Red::R, std::nullopt, /*feature=*/true, Extra());                               \
  }
TENSORDICT_DEFINE_REDUCTION(sum, Sum)
TENSORDICT_DEFINE_REDUCTION(nansum, Nansum)
TENSORDICT_DEFINE_REDUCTION(mean, Mean)
TENSORDICT_DEFINE_REDUCTION(nanmean, Nanmean)
TENSORDICT_DEFINE_REDUCTION(prod, Prod)
TENSORDICT_DEFINE_REDUCTION(norm, Norm)
TENSORDICT_DEFINE_REDUCTION(amax, Amax)
TENSORDICT_DEFINE_REDUCTION(amin, Amin)
#undef TENSORDICT_DEFINE_REDUCTION

namespace {
Extra bessel(bool unbiased) {
  Extra x;
  x.unbiased = unbiased;
  return x;
}
Extra quantile_args(double q, std::string_view interpolation) {
  TD_CHECK(q >= 0 && q <= 1, ValueError, "quantile: q must be in [0, 1], got ", q);
  Extra x;
  x.q = q;
  x.interpolation = interpolation;
  return x;
}
}  // namespace

TensorDict TensorDict::std(std::optional<int64_t> dim, bool keepdim, bool unbiased) const {
  return reduce_td(*this, Red::Std, dim, keepdim, bessel(unbiased));
}
at::Tensor TensorDict::std(Reduce, std::optional<int64_t> dim, bool unbiased) const {
  return reduce_all(*this, Red::Std, dim, /*feature=*/false, bessel(unbiased));
}
TensorDict TensorDict::var(std::optional<int64_t> dim, bool keepdim, bool unbiased) const {
  return reduce_td(*this, Red::Var, dim, keepdim, bessel(unbiased));
}
at::Tensor TensorDict::var(Reduce, std::optional<int64_t> dim, bool unbiased) const {
  return reduce_all(*this, Red::Var, dim, /*feature=*/false, bessel(unbiased));
}
TensorDict TensorDict::std(FeatureDims, bool unbiased) const { return reduce_features(*this, Red::Std, bessel(unbiased)); }
at::Tensor TensorDict::std(Reduce, FeatureDims, bool unbiased) const {
  return reduce_all(*this, Red::Std, std::nullopt, /*feature=*/true, bessel(unbiased));
}
TensorDict TensorDict::var(FeatureDims, bool unbiased) const { return reduce_features(*this, Red::Var, bessel(unbiased)); }
at::Tensor TensorDict::var(Reduce, FeatureDims, bool unbiased) const {
  return reduce_all(*this, Red::Var, std::nullopt, /*feature=*/true, bessel(unbiased));
}

TensorDict TensorDict::max() const { return reduce_td(*this, Red::Max, std::nullopt, false, Extra()); }
ValuesIndices TensorDict::max(int64_t dim, bool keepdim) const { return max_min(*this, true, dim, keepdim); }
at::Tensor TensorDict::max(Reduce) const { return reduce_all(*this, Red::Max, std::nullopt, false, Extra()); }
TensorDict TensorDict::min() const { return reduce_td(*this, Red::Min, std::nullopt, false, Extra()); }
ValuesIndices TensorDict::min(int64_t dim, bool keepdim) const { return max_min(*this, false, dim, keepdim); }
at::Tensor TensorDict::min(Reduce) const { return reduce_all(*this, Red::Min, std::nullopt, false, Extra()); }

TensorDict TensorDict::quantile(double q, std::optional<int64_t> dim, bool keepdim,
                                std::string_view interpolation) const {
  return reduce_td(*this, Red::Quantile, dim, keepdim, quantile_args(q, interpolation));
}
at::Tensor TensorDict::quantile(Reduce, double q, std::optional<int64_t> dim, std::string_view interpolation) const {
  return reduce_all(*this, Red::Quantile, dim, /*feature=*/false, quantile_args(q, interpolation));
}
TensorDict TensorDict::quantile(FeatureDims, double q, std::string_view interpolation) const {
  return reduce_features(*this, Red::Quantile, quantile_args(q, interpolation));
}
at::Tensor TensorDict::quantile(Reduce, FeatureDims, double q, std::string_view interpolation) const {
  return reduce_all(*this, Red::Quantile, std::nullopt, /*feature=*/true, quantile_args(q, interpolation));
}

TensorDict TensorDict::logsumexp(std::optional<int64_t> dim, bool keepdim) const {
  const int64_t n = batch_dims();
  std::vector<int64_t> dims;
  if (dim) {
    TD_CHECK(*dim >= -n && *dim < n, ValueError, "The dimension ", *dim,
             " is incompatible with a tensordict with batch_size ", detail::size_str(batch_size()), ".");
    dims.push_back(*dim < 0 ? *dim + n : *dim);
  } else {
    for (int64_t d = 0; d < n; ++d) dims.push_back(d);
  }
  std::vector<int64_t> batch;
  for (int64_t d = 0; d < n; ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) batch.push_back(batch_size()[d]);
    else if (keepdim) batch.push_back(1);
  }
  std::vector<int64_t> group_dims(dims.size());  // past a group's dim 0
  for (size_t i = 0; i < dims.size(); ++i) group_dims[i] = dims[i] + 1;
  return map_leaves_to(
      *this, "logsumexp", [&](const at::Tensor& t) { return at::logsumexp(t, dims, keepdim); },
      [&](const at::Tensor& g) { return at::logsumexp(g, group_dims, keepdim); }, batch);
}

TensorDict TensorDict::all(int64_t dim) const {
  const int64_t d = detail::wrap_batch_dim<RuntimeError>(dim, batch_dims(), "all", batch_size());
  return map_leaves_to(
      *this, "all", [&](const at::Tensor& t) { return at::all(t, d); },
      [&](const at::Tensor& g) { return at::all(g, d + 1); }, reduced_batch(batch_size(), d, false));
}

TensorDict TensorDict::any(int64_t dim) const {
  const int64_t d = detail::wrap_batch_dim<RuntimeError>(dim, batch_dims(), "any", batch_size());
  return map_leaves_to(
      *this, "any", [&](const at::Tensor& t) { return at::any(t, d); },
      [&](const at::Tensor& g) { return at::any(g, d + 1); }, reduced_batch(batch_size(), d, false));
}

}  // namespace tensordict
