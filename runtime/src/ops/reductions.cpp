// Reductions (semantics 1.13): per leaf (a tensordict), over a batch dim, over the feature dims,
// or with `reduce` one tensor over all leaves.

#include <ATen/ATen.h>

#include <tensordict/tensor_dict_impl.h>

#include "detail/format.h"
#include "ops/leafwise.h"

namespace tensordict {

using namespace ops;

namespace {

enum class Red : uint8_t { Sum, Nansum, Mean, Nanmean, Prod, Norm, Std, Var };

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
  }
  return "?";
}

at::Tensor reduce_full(Red r, const at::Tensor& t, bool unbiased) {
  switch (r) {
    case Red::Sum: return at::sum(t);
    case Red::Nansum: return at::nansum(t);
    case Red::Mean: return at::mean(t);
    case Red::Nanmean: return at::nanmean(t);
    case Red::Prod: return at::prod(t);
    case Red::Norm: return at::norm(t);
    case Red::Std: return at::std(t, unbiased);
    case Red::Var: return at::var(t, unbiased);
  }
  return at::Tensor();
}

at::Tensor reduce_dim(Red r, const at::Tensor& t, int64_t dim, bool keepdim, bool unbiased) {
  switch (r) {
    case Red::Sum: return at::sum(t, {dim}, keepdim);
    case Red::Nansum: return at::nansum(t, {dim}, keepdim);
    case Red::Mean: return at::mean(t, {dim}, keepdim);
    case Red::Nanmean: return at::nanmean(t, {dim}, keepdim);
    case Red::Prod: return at::prod(t, dim, keepdim);
    case Red::Norm: return at::norm(t, 2, {dim}, keepdim);
    case Red::Std: return at::std(t, {dim}, unbiased, keepdim);
    case Red::Var: return at::var(t, {dim}, unbiased, keepdim);
  }
  return at::Tensor();
}

int64_t batch_dim(const TensorDict& td, int64_t dim) {
  const int64_t n = td.batch_dims();
  TD_CHECK(dim >= -n && dim < n, RuntimeError,
           "dim must be greater than or equal to -tensordict.batch_dims and smaller than tensordict.batch_dims (got dim=",
           dim, " for batch size ", detail::size_str(td.batch_size()), ")");
  return dim < 0 ? dim + n : dim;
}

// The batch size once `dim` is reduced.
std::vector<int64_t> reduced_batch(const TensorDict& td, int64_t dim, bool keepdim) {
  std::vector<int64_t> batch = td.batch_size().vec();
  if (keepdim) {
    batch[dim] = 1;
  } else {
    batch.erase(batch.begin() + dim);
  }
  return batch;
}

template <typename Fn>
TensorDict per_leaf(const TensorDict& td, std::optional<int64_t> dim, bool keepdim, const char* name, Fn&& fn) {
  LeafList leaves;
  collect_leaves(*td.impl(), leaves);
  LeafList results(leaves.size());
  if (!dim) {
    for_each_index(*td.impl(), leaves.size(), name, [&](size_t i) { results[i] = fn(leaves[i], std::nullopt); });
    return ops::rebuild(*td.impl(), results, c10::IntArrayRef(), /*nested_extra_dims=*/false);
  }
  const int64_t d = batch_dim(td, *dim);
  for_each_index(*td.impl(), leaves.size(), name, [&](size_t i) { results[i] = fn(leaves[i], d); });
  std::vector<int64_t> batch = reduced_batch(td, d, keepdim);
  return ops::rebuild(*td.impl(), results, c10::IntArrayRef(batch));
}

TensorDict reduce_td(const TensorDict& td, Red r, std::optional<int64_t> dim, bool keepdim, bool unbiased) {
  return per_leaf(td, dim, keepdim, red_name(r), [&](const at::Tensor& t, std::optional<int64_t> d) {
    return d ? reduce_dim(r, t, *d, keepdim, unbiased) : reduce_full(r, t, unbiased);
  });
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
TensorDict reduce_features(const TensorDict& td, Red r, bool unbiased) {
  LeafList leaves;
  std::vector<int64_t> dims;
  collect_with_level_dims(*td.impl(), leaves, dims);
  LeafList results(leaves.size());
  for_each_index(*td.impl(), leaves.size(), red_name(r), [&](size_t i) {
    results[i] = reduce_dim(r, features_last(leaves[i], dims[i]), -1, false, unbiased);
  });
  return ops::rebuild(*td.impl(), results);
}

// One tensor over all leaves. No dim: every leaf flattened, all concatenated, reduced fully.
// A batch `dim`, or the feature dims (`feature`): every leaf's features past the root batch dims
// joined along one last dim behind the batch dims, then reduced over `dim` or over that last dim.
at::Tensor reduce_all(const TensorDict& td, Red r, std::optional<int64_t> dim, bool feature, bool unbiased) {
  LeafList leaves;
  collect_leaves(*td.impl(), leaves);
  const char* form = feature ? "(reduce, feature)" : "(reduce)";
  TD_CHECK(!leaves.empty(), ValueError, red_name(r), form, ": the tensordict has no tensor leaves");
  std::optional<int64_t> d;
  if (dim) d = batch_dim(td, *dim);
  const bool keep_batch = d || feature;
  LeafList parts;
  parts.reserve(leaves.size());
  for (const auto& t : leaves) parts.push_back(keep_batch ? features_last(t, td.batch_dims()) : t.reshape({-1}));
  try {
    at::Tensor joined = at::cat(parts, keep_batch ? -1 : 0);
    if (!keep_batch) return reduce_full(r, joined, unbiased);
    return reduce_dim(r, joined, feature ? -1 : *d, false, unbiased);
  } catch (const c10::Error& e) {
    TD_THROW(RuntimeError, red_name(r), form, ": ", e.what_without_backtrace());
  }
}

}  // namespace

#define TENSORDICT_DEFINE_REDUCTION(name, R)                                                 \
  TensorDict TensorDict::name(std::optional<int64_t> dim, bool keepdim) const {              \
    return reduce_td(*this, Red::R, dim, keepdim, true);                                     \
  }                                                                                          \
  at::Tensor TensorDict::name(Reduce, std::optional<int64_t> dim) const {                    \
    return reduce_all(*this, Red::R, dim, /*feature=*/false, true);                          \
  }                                                                                          \
  TensorDict TensorDict::name(FeatureDims) const { return reduce_features(*this, Red::R, true); } \
  at::Tensor TensorDict::name(Reduce, FeatureDims) const {                                   \
    return reduce_all(*this, Red::R, std::nullopt, /*feature=*/true, true);                  \
  }
TENSORDICT_DEFINE_REDUCTION(sum, Sum)
TENSORDICT_DEFINE_REDUCTION(nansum, Nansum)
TENSORDICT_DEFINE_REDUCTION(mean, Mean)
TENSORDICT_DEFINE_REDUCTION(nanmean, Nanmean)
TENSORDICT_DEFINE_REDUCTION(prod, Prod)
TENSORDICT_DEFINE_REDUCTION(norm, Norm)
#undef TENSORDICT_DEFINE_REDUCTION

TensorDict TensorDict::std(std::optional<int64_t> dim, bool keepdim, bool unbiased) const {
  return reduce_td(*this, Red::Std, dim, keepdim, unbiased);
}
at::Tensor TensorDict::std(Reduce, std::optional<int64_t> dim, bool unbiased) const {
  return reduce_all(*this, Red::Std, dim, /*feature=*/false, unbiased);
}
TensorDict TensorDict::var(std::optional<int64_t> dim, bool keepdim, bool unbiased) const {
  return reduce_td(*this, Red::Var, dim, keepdim, unbiased);
}
at::Tensor TensorDict::var(Reduce, std::optional<int64_t> dim, bool unbiased) const {
  return reduce_all(*this, Red::Var, dim, /*feature=*/false, unbiased);
}

TensorDict TensorDict::std(FeatureDims, bool unbiased) const { return reduce_features(*this, Red::Std, unbiased); }
at::Tensor TensorDict::std(Reduce, FeatureDims, bool unbiased) const {
  return reduce_all(*this, Red::Std, std::nullopt, /*feature=*/true, unbiased);
}
TensorDict TensorDict::var(FeatureDims, bool unbiased) const { return reduce_features(*this, Red::Var, unbiased); }
at::Tensor TensorDict::var(Reduce, FeatureDims, bool unbiased) const {
  return reduce_all(*this, Red::Var, std::nullopt, /*feature=*/true, unbiased);
}

TensorDict TensorDict::all(int64_t dim) const {
  return per_leaf(*this, dim, false, "all",
                  [](const at::Tensor& t, std::optional<int64_t> d) { return at::all(t, *d); });
}

TensorDict TensorDict::any(int64_t dim) const {
  return per_leaf(*this, dim, false, "any",
                  [](const at::Tensor& t, std::optional<int64_t> d) { return at::any(t, *d); });
}

}  // namespace tensordict
