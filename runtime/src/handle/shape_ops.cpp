// Batch-shape operations of the TensorDict handle (semantics 1.9): every one goes through the
// backend's rearrange_batch or map_batch hook, so a lazy backend can stay lazy.

#include <ATen/ATen.h>
#include <ATen/InferSize.h>

#include <algorithm>

#include <tensordict/tensor_dict.h>

#include "core/batch_dim.h"
#include "core/dim_names.h"
#include "core/format.h"

namespace tensordict {

using detail::size_str;
using detail::wrap_batch_dim;

namespace {

// Leaf shape = new batch followed by the leaf's own dims after the old batch dims.
// On the stack: it is made once per leaf.
c10::SmallVector<int64_t, 8> with_event_dims(c10::IntArrayRef new_batch, const at::Tensor& leaf, int64_t old_dims) {
  c10::SmallVector<int64_t, 8> shape(new_batch.begin(), new_batch.end());
  c10::IntArrayRef event = leaf.sizes().slice(old_dims);
  shape.insert(shape.end(), event.begin(), event.end());
  return shape;
}

std::vector<int64_t> infer_batch(c10::IntArrayRef shape, int64_t numel, c10::IntArrayRef batch) {
  try {
    return at::infer_size(shape, numel);
  } catch (const std::exception&) {  // LibTorch 1.13 throws std::runtime_error here
    TD_THROW(ShapeError, "shape ", shape, " is invalid for a tensordict with batch size ",
             size_str(batch), " (", numel, " elements)");
  }
}

// Gives `result` the names `rule(names)` when this tensordict has any (Python's rule per op).
template <class Rule>
TensorDict named_like(const TensorDictBase& self, TensorDict result, Rule&& rule) {
  if (C10_LIKELY(self.dim_names().empty())) return result;
  detail::assign_names(*result.impl(), rule(detail::names_of(self)));
  return result;
}

TensorDict rearranged(const TensorDictBase& self, c10::IntArrayRef source) {
  return named_like(self, self.rearrange_batch(source),
                    [&](const DimNames& names) { return detail::names_after_rearrange(names, source); });
}

}  // namespace

TensorDict TensorDict::view(c10::IntArrayRef shape) const {
  std::vector<int64_t> new_batch = infer_batch(shape, numel(), batch_size());
  if (c10::IntArrayRef(new_batch) == batch_size()) return *this;
  const int64_t old_dims = batch_dims();
  return impl_->map_batch(new_batch, [&](const at::Tensor& t) {
    try {
      return t.view(with_event_dims(new_batch, t, old_dims));
    } catch (const c10::Error& e) {
      // Typically a non-contiguous batch (after permute/transpose): say what to do instead.
      TD_THROW(ShapeError, "view of the batch size ", size_str(batch_size()), " as ",
               size_str(new_batch), " is not possible for a leaf of shape ", size_str(t.sizes()),
               " with strides ", t.strides(), "; use reshape() instead: ", e.what_without_backtrace());
    }
  });
}

TensorDict TensorDict::reshape(c10::IntArrayRef shape) const {
  std::vector<int64_t> new_batch = infer_batch(shape, numel(), batch_size());
  if (c10::IntArrayRef(new_batch) == batch_size()) return *this;
  const int64_t old_dims = batch_dims();
  return impl_->map_batch(new_batch, [&](const at::Tensor& t) {
    return t.reshape(with_event_dims(new_batch, t, old_dims));
  });
}

TensorDict TensorDict::permute(c10::IntArrayRef dims) const {
  // As Python, fewer dims than the batch permute the leading dims and keep the others: dims
  // must be a permutation of [0, len(dims)).
  const int64_t n = batch_dims();
  const int64_t k = static_cast<int64_t>(dims.size());
  std::vector<int64_t> perm;
  std::vector<bool> seen(n, false);
  bool valid = k <= n;
  for (int64_t d : dims) {
    if (!valid || d < -n || d >= n) { valid = false; break; }
    int64_t w = d < 0 ? d + n : d;
    if (w >= k || seen[w]) { valid = false; break; }
    seen[w] = true;
    perm.push_back(w);
  }
  if (!valid) {
    std::string expected = "[";
    for (int64_t i = 0; i < std::min(k, n); ++i) expected += (i ? ", " : "") + std::to_string(i);
    TD_THROW(ValueError, "Cannot compute the permutation, got dims=", dims,
             " but expected a permutation of ", expected, "].");
  }
  for (int64_t d = k; d < n; ++d) perm.push_back(d);
  return rearranged(*impl_, perm);
}

TensorDict TensorDict::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t n = batch_dims();
  // Python raises ValueError here.
  dim0 = wrap_batch_dim<ValueError>(dim0, n, "transpose", batch_size());
  dim1 = wrap_batch_dim<ValueError>(dim1, n, "transpose", batch_size());
  if (dim0 == dim1) return *this;
  std::vector<int64_t> source(static_cast<size_t>(n));
  for (int64_t d = 0; d < n; ++d) source[static_cast<size_t>(d)] = d;
  std::swap(source[static_cast<size_t>(dim0)], source[static_cast<size_t>(dim1)]);
  return rearranged(*impl_, source);
}

TensorDict TensorDict::squeeze() const {
  std::vector<int64_t> source;
  for (int64_t d = 0; d < batch_dims(); ++d) {
    if (batch_size()[d] != 1) source.push_back(d);
  }
  if (static_cast<int64_t>(source.size()) == batch_dims()) return *this;
  return rearranged(*impl_, source);
}

TensorDict TensorDict::squeeze(int64_t dim) const {
  dim = wrap_batch_dim<IndexError>(dim, batch_dims(), "squeeze", batch_size());
  if (batch_size()[dim] != 1) return *this;
  std::vector<int64_t> source;
  for (int64_t d = 0; d < batch_dims(); ++d) {
    if (d != dim) source.push_back(d);
  }
  return rearranged(*impl_, source);
}

TensorDict TensorDict::unsqueeze(int64_t dim) const {
  const int64_t n = batch_dims();
  TD_CHECK(dim >= -n - 1 && dim <= n, RuntimeError,
           "unsqueezing is allowed for dims comprised between `-td.batch_dims - 1` and "
           "`td.batch_dims` only. Got dim=", dim, " with td.batch_size=", size_str(batch_size()), ".");
  if (dim < 0) dim += n + 1;
  std::vector<int64_t> source;
  for (int64_t d = 0; d < n; ++d) source.push_back(d);
  source.insert(source.begin() + dim, -1);
  return rearranged(*impl_, source);
}

TensorDict TensorDict::expand(c10::IntArrayRef shape) const {
  const int64_t n = batch_dims();
  TD_CHECK(static_cast<int64_t>(shape.size()) >= n, ShapeError, "the number of sizes provided (",
           shape.size(), ") must be greater or equal to the number of dimensions in the TensorDict (",
           n, ")");
  const int64_t lead = static_cast<int64_t>(shape.size()) - n;
  BatchSize new_batch(shape.begin(), shape.end());
  for (int64_t d = 0; d < n; ++d) {
    int64_t want = shape[lead + d], have = batch_size()[d];
    if (want == -1) {
      new_batch[lead + d] = have;
      continue;
    }
    TD_CHECK(have == want || have == 1, ShapeError, "Incompatible expanded shape: ", shape,
             " cannot expand the batch size ", size_str(batch_size()), " (dim ", d, " has size ",
             have, ").");
  }
  for (int64_t d = 0; d < lead; ++d) {
    TD_CHECK(shape[d] >= 0, ShapeError, "Incompatible expanded shape: ", shape,
             " (new leading dims cannot be -1)");
  }
  if (c10::IntArrayRef(new_batch) == batch_size()) return *this;
  return named_like(*impl_, impl_->map_batch(new_batch, [&](const at::Tensor& t) {
    return t.expand(with_event_dims(new_batch, t, n));
  }), [&](DimNames names) {  // new leading dims are unnamed
    names.insert(names.begin(), static_cast<size_t>(lead), std::nullopt);
    return names;
  });
}

TensorDict TensorDict::flatten(int64_t start_dim, int64_t end_dim) const {
  const int64_t n = batch_dims();
  if (n == 0) return unsqueeze(0);  // Python: flattening a 0-dim tensordict gives [1]
  start_dim = wrap_batch_dim<IndexError>(start_dim, n, "flatten", batch_size());
  end_dim = wrap_batch_dim<IndexError>(end_dim, n, "flatten", batch_size());
  TD_CHECK(start_dim <= end_dim, ValueError, "flatten: start_dim ", start_dim,
           " comes after end_dim ", end_dim);
  if (start_dim == end_dim) return *this;
  BatchSize new_batch(batch_size().begin(), batch_size().begin() + start_dim);
  int64_t merged = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) merged *= batch_size()[d];
  new_batch.push_back(merged);
  new_batch.append(batch_size().begin() + end_dim + 1, batch_size().end());
  return named_like(
      *impl_, impl_->map_batch(new_batch, [&](const at::Tensor& t) { return t.flatten(start_dim, end_dim); }),
      [&](DimNames names) {  // the merged dims become one unnamed dim
        names.erase(names.begin() + start_dim + 1, names.begin() + end_dim + 1);
        names[start_dim] = std::nullopt;
        return names;
      });
}

TensorDict TensorDict::unflatten(int64_t dim, c10::IntArrayRef sizes) const {
  const int64_t n = batch_dims();
  dim = wrap_batch_dim<IndexError>(dim, n, "unflatten", batch_size());
  std::vector<int64_t> inferred = infer_batch(sizes, batch_size()[dim], batch_size());
  BatchSize new_batch(batch_size().begin(), batch_size().begin() + dim);
  new_batch.append(inferred.begin(), inferred.end());
  new_batch.append(batch_size().begin() + dim + 1, batch_size().end());
  return named_like(*impl_, impl_->map_batch(new_batch, [&](const at::Tensor& t) {
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().begin() + dim);
    shape.insert(shape.end(), inferred.begin(), inferred.end());
    shape.insert(shape.end(), t.sizes().begin() + dim + 1, t.sizes().end());
    return t.view(shape);
  }), [&](DimNames names) {  // the split dim becomes unnamed dims
    names.erase(names.begin() + dim);
    names.insert(names.begin() + dim, inferred.size(), std::nullopt);
    return names;
  });
}

}  // namespace tensordict
