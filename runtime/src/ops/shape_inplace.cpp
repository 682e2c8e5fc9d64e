// v0.13's shape operations (issue 33): repeat, repeat_interleave and roll, and the in-place
// forms of them and of reshape, flatten, unflatten, gather and contiguous (Python's
// `inplace=True`). An in-place form computes the result and rebinds this tensordict's leaves to
// it, level by level, so the handle and its nested tensordicts keep their identity.

#include <ATen/ATen.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/tensor_dict_impl.h"
#include "core/batch_dim.h"
#include "core/dim_names.h"
#include "core/format.h"
#include "core/validate.h"
#include "ops/leafwise.h"

namespace tensordict {

using detail::size_str;

namespace {

// Rebinds `level` (an in-memory level) to the entries, batch size and names of `result`.
void rebind(TensorDictBase& level, const TensorDict& result, const char* op) {
  if (!dynamic_cast<TensorDictImpl*>(&level)) {
    TD_THROW(NotImplementedError, level.type_name(), " cannot ", op,
             " in place: its leaves live in its storage with their shapes (use the out-of-place form)");
  }
  detail::check_unlocked(level);
  level.set_batch_size(result.batch_size());
  level.set_dim_names(result.impl()->dim_names());
  result.impl()->for_each([&](const std::string& key, const Entry& entry) {
    if (entry.is_tensordict()) {
      Entry mine = level.get(key);
      if (mine.is_tensordict()) {
        rebind(*mine.tensordict_unchecked().impl(), entry.tensordict_unchecked(), op);
        return;
      }
    }
    level.insert_or_assign(key, entry);
  });
}

void check_not_lazy(const TensorDict& td, const char* op) {
  TD_CHECK(!LazyStackedTensorDict::is_lazy_stack(td), NotImplementedError, "LazyStackedTensorDict cannot ", op,
           " in place (Python raises too); use the out-of-place form");
}

}  // namespace

TensorDict& ops::rebind_leaves(TensorDict& td, const TensorDict& result, const char* op) {
  check_not_lazy(td, op);
  if (result.impl() != td.impl()) rebind(*td.impl(), result, op);
  return td;
}

namespace {
TensorDict& rebound(TensorDict& td, const TensorDict& result, const char* op) {
  return ops::rebind_leaves(td, result, op);
}
}  // namespace

TensorDict TensorDict::repeat(c10::IntArrayRef repeats) const {
  TD_CHECK(static_cast<int64_t>(repeats.size()) == batch_dims(), ValueError,
           "The number of repeat elements must match the number of batch dimensions: got repeats=", repeats,
           " for batch size ", size_str(batch_size()), ".");
  BatchSize new_batch(batch_size().begin(), batch_size().end());
  for (size_t d = 0; d < repeats.size(); ++d) {
    TD_CHECK(repeats[d] >= 0, ValueError, "repeat: repeats must be non-negative, got ", repeats);
    new_batch[d] *= repeats[d];
  }
  // Values move between rows: a backend that maps batch ops lazily (a stack's members) is read.
  TensorDict out = ops::readable(*this).impl()->map_batch(new_batch, [&](const at::Tensor& t) {
    std::vector<int64_t> times(repeats.begin(), repeats.end());
    times.resize(static_cast<size_t>(t.dim()), 1);
    return t.repeat(times);
  });
  if (C10_UNLIKELY(!impl_->dim_names().empty())) detail::assign_names(*out.impl(), detail::names_of(*impl_));
  return out;
}

TensorDict TensorDict::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  TD_CHECK(repeats >= 0, ValueError, "repeat_interleave: repeats must be non-negative, got ", repeats);
  return repeat_interleave(at::scalar_tensor(repeats, at::kLong), dim);
}

TensorDict TensorDict::repeat_interleave(const at::Tensor& repeats, std::optional<int64_t> dim) const {
  // Python: no dim flattens the batch first; a tensordict without batch dims gets one.
  if (!dim) return batch_dims() == 1 ? repeat_interleave(repeats, 0) : reshape({-1}).repeat_interleave(repeats, 0);
  const int64_t d = detail::wrap_batch_dim<IndexError>(*dim, batch_dims(), "repeat_interleave", batch_size());
  const int64_t size = batch_size()[d];
  TD_CHECK(repeats.dim() == 0 || (repeats.dim() == 1 && (repeats.size(0) == size || repeats.size(0) == 1)),
           ShapeError, "repeat_interleave: repeats must be a number or one count per row of dim ", d, " (", size,
           "), got shape ", size_str(repeats.sizes()));
  const at::Tensor counts = repeats.to(at::kLong).expand({size});
  TD_CHECK(size == 0 || counts.min().item<int64_t>() >= 0, ValueError, "repeat_interleave: repeats must be non-negative");
  BatchSize new_batch(batch_size().begin(), batch_size().end());
  new_batch[d] = counts.sum().item<int64_t>();
  const int64_t total = new_batch[d];
  TensorDict out = ops::readable(*this).impl()->map_batch(new_batch, [&](const at::Tensor& t) {
    return at::repeat_interleave(t, counts.to(t.device()), d, total);
  });
  if (C10_UNLIKELY(!impl_->dim_names().empty())) detail::assign_names(*out.impl(), detail::names_of(*impl_));
  return out;
}

TensorDict TensorDict::roll(c10::IntArrayRef shifts, c10::IntArrayRef dims) const {
  const int64_t n = batch_dims();
  TD_CHECK(n > 0, RuntimeError, "roll: the tensordict has no batch dims");
  if (dims.empty()) {
    // Over the flattened batch, as torch.roll without dims (Python flattens the feature dims too).
    TD_CHECK(shifts.size() == 1, RuntimeError, "roll: without dims, one shift is expected, got ", shifts);
    const int64_t shift = shifts[0];
    return flatten(0, n - 1).roll({shift}, {0}).view(batch_size());
  }
  TD_CHECK(shifts.size() == dims.size(), RuntimeError, "roll: shifts ", shifts, " and dims ", dims,
           " must have the same length");
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) wrapped.push_back(detail::wrap_batch_dim<IndexError>(d, n, "roll", batch_size()));
  TensorDict out =
      ops::readable(*this).impl()->map_batch(batch_size(), [&](const at::Tensor& t) { return at::roll(t, shifts, wrapped); });
  if (C10_UNLIKELY(!impl_->dim_names().empty())) detail::assign_names(*out.impl(), detail::names_of(*impl_));
  return out;
}

TensorDict& TensorDict::reshape_(c10::IntArrayRef shape) { return rebound(*this, reshape(shape), "reshape"); }
TensorDict& TensorDict::flatten_(int64_t start_dim, int64_t end_dim) {
  return rebound(*this, flatten(start_dim, end_dim), "flatten");
}
TensorDict& TensorDict::unflatten_(int64_t dim, c10::IntArrayRef sizes) {
  return rebound(*this, unflatten(dim, sizes), "unflatten");
}
TensorDict& TensorDict::contiguous_() {
  check_not_lazy(*this, "contiguous");
  if (is_contiguous()) return *this;
  return rebound(*this, contiguous(), "contiguous");
}
TensorDict& TensorDict::gather_(int64_t dim, const at::Tensor& index) {
  return rebound(*this, gather(dim, index), "gather");
}
TensorDict& TensorDict::repeat_(c10::IntArrayRef repeats) { return rebound(*this, repeat(repeats), "repeat"); }
TensorDict& TensorDict::repeat_interleave_(int64_t repeats, int64_t dim) {
  return rebound(*this, repeat_interleave(repeats, dim), "repeat_interleave");
}
TensorDict& TensorDict::repeat_interleave_(const at::Tensor& repeats, int64_t dim) {
  return rebound(*this, repeat_interleave(repeats, dim), "repeat_interleave");
}
TensorDict& TensorDict::roll_(c10::IntArrayRef shifts, c10::IntArrayRef dims) {
  // Values move, shapes do not: written into the existing leaves, so every backend can do it.
  return update_(roll(shifts, dims));
}

}  // namespace tensordict
