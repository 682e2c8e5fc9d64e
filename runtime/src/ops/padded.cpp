// to_padded_tensor (Python's TensorDictBase.to_padded_tensor): ragged data padded into dense
// leaves. Ragged data here is a lazy stack whose members differ in size (batch dims of -1, or
// leaves that differ) or a nested-tensor leaf (what densify(Nested) makes).

#include <algorithm>

#include <ATen/ATen.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/entry.h>
#include <tensordict/op_options.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

namespace {
bool has_ragged_dim(c10::IntArrayRef batch) {
  return std::any_of(batch.begin(), batch.end(), [](int64_t s) { return s < 0; });
}

// True where a member's leaf has data: its ones padded with false, stacked like get_padded.
at::Tensor padding_mask(const LazyStackedTensorDict& ls, const NestedKey& key) {
  std::vector<at::Tensor> leaves = ls.get_as_list(key);
  std::vector<int64_t> max_shape(leaves.front().sizes().begin(), leaves.front().sizes().end());
  for (const at::Tensor& t : leaves) {
    for (int64_t d = 0; d < t.dim(); ++d) max_shape[d] = std::max(max_shape[d], t.size(d));
  }
  std::vector<at::Tensor> masks;
  for (const at::Tensor& t : leaves) {
    std::vector<int64_t> pad;  // constant_pad_nd takes (left, right) pairs from the last dim
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      pad.push_back(0);
      pad.push_back(max_shape[d] - t.size(d));
    }
    masks.push_back(at::constant_pad_nd(at::ones(t.sizes(), t.options().dtype(at::kBool)), pad, 0));
  }
  return at::stack(masks, ls.stack_dim());
}
}  // namespace

TensorDict TensorDict::to_padded_tensor(double padding, const std::optional<NestedKey>& mask_key) const {
  const bool ragged = has_ragged_dim(batch_size());
  TD_CHECK(!mask_key || ragged, RuntimeError,
           "mask_key should only be provided if the heterogenous dimension is part of the batch-size.");
  if (!LazyStackedTensorDict::is_lazy_stack(*this)) {
    // Nested-tensor leaves become padded tensors; every other leaf is kept as it is. A ragged
    // batch (densify's nested layout) takes the padded sizes.
    auto pad = [&](const at::Tensor& t) { return t.is_nested() ? at::nested_to_padded_tensor(t, padding) : t; };
    if (!ragged) return apply(pad);
    ApplyOptions unbatched;
    unbatched.batch_size = std::vector<int64_t>{};
    TensorDict out = apply(pad, unbatched);
    out.auto_batch_size_(batch_dims());
    return out;
  }
  const LazyStackedTensorDict ls = LazyStackedTensorDict::from(*this);
  TensorDict out = TensorDict::empty_with({}, device());
  std::optional<NestedKey> first_ragged;
  for (const NestedKey& key : keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    at::Tensor padded = ls.get_padded(key, padding);
    if (!first_ragged) {
      std::vector<at::Tensor> leaves = ls.get_as_list(key);
      const bool differs = std::any_of(leaves.begin(), leaves.end(),
                                       [&](const at::Tensor& t) { return t.sizes() != leaves.front().sizes(); });
      if (differs) first_ragged = key;
    }
    out.set(key, padded);
  }
  if (!ragged) {
    out.set_batch_size(batch_size());
    return out;
  }
  out.auto_batch_size_(batch_dims());
  if (mask_key && first_ragged) {
    at::Tensor mask = padding_mask(ls, *first_ragged);
    if (mask.dim() > out.batch_dims()) mask = mask.flatten(out.batch_dims(), -1).select(-1, -1);
    out.set(*mask_key, mask);
  }
  return out;
}

}  // namespace tensordict
