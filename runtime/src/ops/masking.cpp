// The masking family (semantics 1.10): where, masked_fill(_), masked_select, gather. Masks and
// conditions cover leading batch dims and are expanded to the right over each leaf.

#include <ATen/ATen.h>

#include <tensordict/ops.h>

#include "backends/in_memory/grouped_result.h"
#include "core/dim_names.h"
#include "core/format.h"
#include "ops/kernel.h"
#include "ops/leafwise.h"
#include "ops/shape_groups.h"

namespace tensordict {

using namespace ops;
using detail::size_str;

namespace {

// `mask` viewed with trailing singleton dims so it covers the leading dims of `leaf`.
at::Tensor right_expand(const at::Tensor& mask, const at::Tensor& leaf) {
  const int64_t extra = leaf.dim() - mask.dim();
  if (extra <= 0) return mask;
  c10::SmallVector<int64_t, 8> shape(mask.sizes().begin(), mask.sizes().end());
  shape.append(static_cast<size_t>(extra), 1);
  return mask.view(shape);
}

void check_batch_prefix(const TensorDict& td, const at::Tensor& mask, const char* op) {
  TD_CHECK(mask.defined(), ValueError, op, ": the mask is undefined");
  TD_CHECK(mask.dim() <= td.batch_dims() && mask.sizes() == td.batch_size().slice(0, mask.dim()), ShapeError, op,
           ": the mask of shape ", size_str(mask.sizes()), " must match the leading batch dims of batch size ",
           size_str(td.batch_size()), ".");
}

void check_bool(const at::Tensor& mask, const char* op) {
  TD_CHECK(mask.scalar_type() == at::kBool, TypeError, op, ": expected a bool mask, got ", mask.scalar_type());
}

// `fn(leaf)` for every leaf, rebuilt in the structure of `td` (batch size `batch`, default its own).
TensorDict per_leaf(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                    std::optional<c10::IntArrayRef> batch = std::nullopt) {
  RebuildOptions options;
  options.batch_size = batch;
  return map_each_leaf(td, op, fn, options);
}

}  // namespace

TensorDict TensorDict::where(const at::Tensor& condition, const TensorDict& other,
                             const std::optional<c10::Scalar>& pad) const {
  check_batch_prefix(*this, condition, "where");
  const BinaryDefault def = pad ? BinaryDefault(*pad) : BinaryDefault();
  const TensorDict a = readable(*this), b = readable(other);
  if (!pad && a.batch_size() == b.batch_size()) {
    // Two intact trees laid out alike (so with the same keys): the groups and the result from a's
    // shape (Note [Grouped results]); else groups found from the matched leaves, below.
    if (auto grouped = in_memory::map_intact_group_pairs(
            *a.impl(), b.impl(),
            [&](const at::Tensor& g, const at::Tensor& h, int64_t) { return at::where(group_operand(condition, g), g, h); },
            {a.batch_size()}))
      return std::move(*grouped);
  }
  MatchedLeaves m;
  try {
    match_leaves(a, b, def, m);
  } catch (const KeyError& e) {
    TD_THROW(KeyError, e.message(), " where() needs the same keys on both sides unless a pad value is given.");
  }
  std::vector<int64_t> batch = broadcast_batch(batch_size(), other.batch_size(), "where");
  const auto one = [&](size_t i) { return at::where(right_expand(condition, m.lhs[i]), m.lhs[i], m.rhs[i]); };
  // Strictly matched at one batch size, the result is shaped like `a`: leaves of one shape side
  // by side, their partners too, take one kernel a group (Note [Shape groups]).
  if (!pad && a.batch_size() == b.batch_size()) {
    if (auto grouped = map_shape_group_pairs(
            *a.impl(), m.lhs, m.rhs,
            [&](const at::Tensor& g, const at::Tensor& h, size_t) { return at::where(group_operand(condition, g), g, h); },
            one))
      return std::move(*grouped);
  }
  LeafList results = compute(m.lhs.size(), false, [] { return LeafList(); }, one, PairKeys{a, b, def}, "where");
  return rebuild_pair(a, b, def, std::move(results), batch);
}

TensorDict TensorDict::where(const at::Tensor& condition, const at::Tensor& other) const {
  check_batch_prefix(*this, condition, "where");
  TD_CHECK(other.defined(), ValueError, "where: the tensor operand is undefined");
  // As torch.where (and Python): `other` broadcasts against each leaf from the right.
  const auto one = [&](const at::Tensor& leaf) { return at::where(right_expand(condition, leaf), leaf, other); };
  if (other.requires_grad()) return ops::keep_lock(per_leaf(*this, "where", one), *this);
  // A group of leaves (Note [Shape groups]) broadcasts `other` as each leaf does while `other`
  // reaches no further left than the leaves' own dims; otherwise the group is refused (a
  // c10::Error before its kernel: map_shape_groups then goes per leaf).
  return ops::keep_lock(map_leaves_grouped(
                            *this, "where", one,
                            [&](const at::Tensor& g) {
                              TORCH_CHECK(other.dim() < g.dim(), "where: other reaches the group dim");
                              return at::where(group_operand(condition, g), g, other);
                            },
                            {}, is_locked()),
                        *this);
}

TensorDict TensorDict::where(const at::Tensor& condition, const c10::Scalar& other) const {
  check_batch_prefix(*this, condition, "where");
  return ops::keep_lock(
      map_leaves_grouped(
          *this, "where", [&](const at::Tensor& leaf) { return at::where(right_expand(condition, leaf), leaf, other); },
          [&](const at::Tensor& g) { return at::where(group_operand(condition, g), g, other); }, {}, is_locked()),
      *this);
}

TensorDict where(const at::Tensor& condition, const TensorDict& input, const TensorDict& other,
                 const std::optional<c10::Scalar>& pad) {
  return input.where(condition, other, pad);
}

TensorDict where(const at::Tensor& condition, const TensorDict& input, const c10::Scalar& other) {
  return input.where(condition, other);
}

TensorDict TensorDict::masked_fill(const at::Tensor& mask, const c10::Scalar& value) const {
  check_batch_prefix(*this, mask, "masked_fill");
  check_bool(mask, "masked_fill");
  return map_leaves_grouped(
      *this, "masked_fill", [&](const at::Tensor& leaf) { return leaf.masked_fill(right_expand(mask, leaf), value); },
      [&](const at::Tensor& g) { return g.masked_fill(group_operand(mask, g), value); });
}

TensorDict& TensorDict::masked_fill_(const at::Tensor& mask, const c10::Scalar& value) {
  check_batch_prefix(*this, mask, "masked_fill_");
  check_bool(mask, "masked_fill_");
  // One kernel a group of leaves (Notes [Grouped results] and [Shape groups]).
  const auto per_group = [&](const at::Tensor& g) { g.masked_fill_(group_operand(mask, g), value); };
  if (in_memory::write_intact_groups(*impl_, per_group, mask)) return *this;
  InPlaceTarget target(*this);
  LeafList leaves = leaves_of(target.tree());
  const auto one = [&](size_t i) { leaves[i].masked_fill_(right_expand(mask, leaves[i]), value); };
  if (!write_shape_groups(leaves, [&](const at::Tensor& g, size_t) { per_group(g); }, one, mask))
    compute_(leaves.size(), false, [] { return false; }, one, LeafKeys{*target.tree().impl()}, "masked_fill_");
  target.commit();
  return *this;
}

TensorDict TensorDict::masked_select(const at::Tensor& mask) const {
  check_batch_prefix(*this, mask, "masked_select");
  check_bool(mask, "masked_select");
  return index({mask});
}

TensorDict TensorDict::gather(int64_t dim, const at::Tensor& index) const {
  const int64_t n = batch_dims();
  TD_CHECK(n > 0, RuntimeError, "gather: the tensordict has no batch dims");
  TD_CHECK(dim >= -n && dim < n, IndexError, "gather: dim ", dim, " is not a batch dim of batch size ",
           size_str(batch_size()));
  if (dim < 0) dim += n;
  TD_CHECK(index.dim() == n, ShapeError, "gather: the index must have as many dims as the batch (", n,
           "), got shape ", size_str(index.sizes()));
  TD_CHECK(index.scalar_type() == at::kLong, TypeError, "gather: expected an int64 index, got ", index.scalar_type());
  TensorDict out = per_leaf(
      *this, "gather",
      [&](const at::Tensor& x) {
        std::vector<int64_t> shape(index.sizes().begin(), index.sizes().end());
        shape.insert(shape.end(), x.sizes().begin() + n, x.sizes().end());
        return at::gather(x, dim, right_expand(index, x).expand(shape));
      },
      index.sizes());
  if (C10_UNLIKELY(!impl_->dim_names().empty())) detail::assign_names(*out.impl(), detail::names_of(*impl_));
  return out;
}

}  // namespace tensordict
