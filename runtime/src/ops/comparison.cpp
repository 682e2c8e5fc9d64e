// Comparisons of TensorDict (semantics 1.12): tensordicts of bools against a tensordict, a tensor
// or a scalar, all()/any(), and the elementwise tests (isnan, ...). Results are never locked.

#include <ATen/ATen.h>

#include <tensordict/ops.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/intact_runs.h"
#include "backends/in_memory/level_shape.h"
#include "ops/compare_kernel.h"
#include "ops/kernel.h"
#include "ops/leafwise.h"
#include "ops/packed.h"
#include "ops/packed_runs.h"

namespace tensordict {

using namespace ops;

namespace {

TensorDict elementwise_test(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> test) {
  return map_elementwise(td, op, test, {}, sizeof(bool));
}

using CmpOp = TensorDictComparison::Op;

const char* cmp_name(CmpOp op) {
  switch (op) {
    case CmpOp::Eq: return "eq";
    case CmpOp::Ne: return "ne";
    case CmpOp::Lt: return "lt";
    case CmpOp::Le: return "le";
    case CmpOp::Gt: return "gt";
    case CmpOp::Ge: return "ge";
  }
  return "?";
}

template <typename Other>
at::Tensor compare(CmpOp op, const at::Tensor& a, const Other& b) {
  if (at::Tensor fast = compare_contiguous(op, a, b); fast.defined()) return fast;
  switch (op) {
    case CmpOp::Eq: return at::eq(a, b);
    case CmpOp::Ne: return at::ne(a, b);
    case CmpOp::Lt: return at::lt(a, b);
    case CmpOp::Le: return at::le(a, b);
    case CmpOp::Gt: return at::gt(a, b);
    case CmpOp::Ge: return at::ge(a, b);
  }
  return at::Tensor();
}

TensorDict compare_td(const TensorDict& a_in, const TensorDict& b_in, CmpOp op) {
  std::vector<int64_t> batch = broadcast_batch(a_in.batch_size(), b_in.batch_size(), cmp_name(op));
  {
    // Two intact packed results of one layout (Note [Intact results]): one comparison of both.
    const at::Tensor fa = intact_storage_for_result(*a_in.impl(), sizeof(bool));
    c10::intrusive_ptr<LevelShape> shape;  // a's, checked once for both the layout and the result
    if (const at::Tensor fb = intact_partner(fa, a_in, b_in, &shape); fb.defined()) {
      const at::Tensor out = run_over(fa, [&](const at::Tensor& x) { return compare(op, x, fb); });
      if (out.defined())
        return in_memory::intact_packed_like(*a_in.impl(), out, /*filter_empty=*/false, false, std::move(shape));
    }
    // Two trees over runs laid out alike (Note [Intact runs]): one comparison a run of both.
    if (!fa.defined()) {
      const auto fn = [&](const at::Tensor& x, const at::Tensor& y) { return compare(op, x, y); };
      if (auto runs = map_intact_run_pairs(*a_in.impl(), *b_in.impl(), fn, sizeof(bool), false, false))
        return std::move(*runs);
    }
  }
  const TensorDict a = readable(a_in), b = readable(b_in);
  // Plain operands (CPU leaves in separate storages, the same keys): one walk, no pair lists.
  const auto fn = [&](const at::Tensor& x, const at::Tensor& y) { return compare(op, x, y); };
  if (std::optional<TensorDict> out = zip_leaves(a, b, fn, /*filter_empty=*/false)) return std::move(*out);
  MatchedLeaves m;
  match_leaves(a, b, BinaryDefault(), m);
  const BinaryDefault def;
  if (a.batch_size() == b.batch_size()) {
    // Two packed storages of one layout (consolidated tensordicts): one comparison of both, its
    // bools packed like the operands. An error falls to the per-leaf path, which names the key.
    const at::Tensor fa = packed_storage_for_result(m.lhs, sizeof(bool));
    const at::Tensor fb = fa.defined() ? packed_storage(m.rhs) : at::Tensor();
    if (fb.defined() && same_layout(m.lhs, m.rhs)) {
      const at::Tensor out = run_over(fa, [&](const at::Tensor& x) { return compare(op, x, fb); });
      // Strictly matched at one batch size: the result has a's structure (as rebuild_pair).
      if (out.defined()) return packed_result(*a.impl(), out, m.lhs);
    }
    // Mixed dtypes, padding, subsets: one comparison per run of both (Note [Packed runs]).
    if (auto runs = map_run_pairs_result(*a.impl(), m.lhs, m.rhs, fn, sizeof(bool), false, false)) return std::move(*runs);
  }
  LeafList results = compute(
      m.lhs.size(), false, [] { return LeafList(); }, [&](size_t i) { return compare(op, m.lhs[i], m.rhs[i]); },
      PairKeys{a, b, def}, cmp_name(op));
  return rebuild_pair(a, b, def, std::move(results), batch);
}

TensorDict compare_tensor(const TensorDict& td, const at::Tensor& other, CmpOp op) {
  AlignedTensor aligned(td, other, cmp_name(op));
  RebuildOptions options;
  options.batch_size = c10::IntArrayRef(aligned.batch_size());
  return map_each_leaf(
      td, cmp_name(op), [&](const at::Tensor& leaf) { return compare(op, leaf, aligned.operand(leaf)); }, options);
}

TensorDict compare_scalar(const TensorDict& td, const c10::Scalar& other, CmpOp op) {
  ScalarOperand scalar(other);
  return map_elementwise(
      td, cmp_name(op),
      [&](const at::Tensor& leaf) {
        const at::Tensor& z = scalar.for_leaf(leaf);
        return z.defined() ? compare(op, leaf, z) : compare(op, leaf, other);
      },
      {}, sizeof(bool));
}

bool leaf_all(const at::Tensor& t) {
  if (const std::optional<bool> all = all_contiguous(t)) return *all;
  return t.numel() == 0 || t.all().item<bool>();
}
bool leaf_any(const at::Tensor& t) {
  if (const std::optional<bool> any = any_contiguous(t)) return *any;
  return t.numel() > 0 && t.any().item<bool>();
}

// all()/any() of every leaf: one loop over the packed storage when the leaves tile one (the
// bools of a comparison of consolidated tensordicts), else leaf by leaf.
template <typename LeafTest>
bool over_leaves(const TensorDict& td, bool stop_at, LeafTest leaf_test) {
  // `leaf_test` over tensors holding every leaf's elements: stops at the first that gives stop_at.
  const auto over = [&](c10::ArrayRef<at::Tensor> parts) {
    for (const auto& t : parts) {
      if (leaf_test(t) == stop_at) return stop_at;
    }
    return !stop_at;
  };
  // An intact packed result (Note [Intact results]): its storage is every leaf's elements.
  if (const at::Tensor flat = in_memory::intact_packed_storage(*td.impl()); flat.defined()) return leaf_test(flat);
  // Intact runs without padding (Note [Intact runs]): one test a run.
  if (const auto runs = in_memory::intact_runs(*td.impl()); runs && runs->exact) return over(runs->storages);
  LeafList leaves = leaves_of(readable(td));
  if (const at::Tensor flat = packed_storage(leaves); flat.defined()) return leaf_test(flat);
  // Runs of leaves (Note [Packed runs]), never over padding: one test per run.
  if (const std::optional<PackedRuns> runs = packed_runs(leaves, Padding::Skip)) return over(runs->flats);
  return over(leaves);
}

TensorDict value_test(const TensorDict& td, ValueTest test, const char* op, at::Tensor (*fallback)(const at::Tensor&)) {
  return elementwise_test(td, op, [&](const at::Tensor& t) {
    at::Tensor fast = test_contiguous(test, t);
    return fast.defined() ? fast : fallback(t);
  });
}

// at::equal gives the answer of (x == y).all() without the bool tensor when shapes, dtypes and
// devices match and the two are not the same memory (at::equal may short-cut aliases to true,
// which (x == y).all() is not for NaNs).
bool leaves_equal(const at::Tensor& x, const at::Tensor& y) {
  if (const std::optional<bool> equal = equal_contiguous(x, y)) return *equal;  // contiguous CPU: a loop
  const bool fast = x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() && x.device() == y.device() &&
                    !(x.data_ptr() == y.data_ptr() && x.strides() == y.strides());
  if (fast) return at::equal(x, y);
  return leaf_all(at::eq(x, y));
}

}  // namespace

#define TENSORDICT_DEFINE_COMPARISON(name, Op)                                                   \
  TensorDict TensorDict::name(const TensorDict& other) const { return compare_td(*this, other, CmpOp::Op); } \
  TensorDict TensorDict::name(const at::Tensor& other) const { return compare_tensor(*this, other, CmpOp::Op); } \
  TensorDict TensorDict::name(const c10::Scalar& other) const { return compare_scalar(*this, other, CmpOp::Op); }
TENSORDICT_DEFINE_COMPARISON(eq, Eq)
TENSORDICT_DEFINE_COMPARISON(ne, Ne)
TENSORDICT_DEFINE_COMPARISON(lt, Lt)
TENSORDICT_DEFINE_COMPARISON(le, Le)
TENSORDICT_DEFINE_COMPARISON(gt, Gt)
TENSORDICT_DEFINE_COMPARISON(ge, Ge)
#undef TENSORDICT_DEFINE_COMPARISON

TensorDict TensorDictComparison::to_tensordict() const {
  if (rhs_td_) return compare_td(lhs_, *rhs_td_, op_);
  if (rhs_scalar_) return compare_scalar(lhs_, *rhs_scalar_, op_);
  return compare_tensor(lhs_, rhs_tensor_, op_);
}

bool TensorDictComparison::all() const {
  if (op_ == Op::Eq && rhs_td_) {
    broadcast_batch(lhs_.batch_size(), rhs_td_->batch_size(), "eq");
    // Two intact packed results of one layout (Note [Intact results]): one comparison.
    const at::Tensor fa = in_memory::intact_packed_storage(*lhs_.impl());
    if (const at::Tensor fb = intact_partner(fa, lhs_, *rhs_td_); fb.defined()) {
      try {
        return leaves_equal(fa, fb);
      } catch (const c10::Error&) {
      }
    }
    // Pairs holding every leaf's elements of both: equal when each pair is. An error names the
    // failing key through the per-leaf path.
    const auto all_equal = [&](c10::ArrayRef<at::Tensor> x, c10::ArrayRef<at::Tensor> y) {
      try {
        for (size_t i = 0; i < x.size(); ++i) {
          if (!leaves_equal(x[i], y[i])) return false;
        }
        return true;
      } catch (const c10::Error&) {
        return to_tensordict().all();
      }
    };
    // Two trees over runs laid out alike, without padding (Note [Intact runs]): one test a run.
    if (!fa.defined()) {
      if (const auto ra = in_memory::intact_runs(*lhs_.impl()); ra && ra->exact) {
        const auto rb = in_memory::intact_runs(*rhs_td_->impl());
        if (rb && rb->exact && in_memory::runs_laid_out_alike(*lhs_.impl(), *ra, *rhs_td_->impl(), *rb))
          return all_equal(ra->storages, rb->storages);
      }
    }
    MatchedLeaves m;
    m.lhs.reserve(32);
    m.rhs.reserve(32);
    match_leaves(readable(lhs_), readable(*rhs_td_), BinaryDefault(), m);
    if (lhs_.batch_size() == rhs_td_->batch_size()) {
      // Two packed storages of one layout (consolidated tensordicts: one run each), or runs of
      // both laid out alike (Note [Packed runs]), never over padding: one test per run.
      if (const std::optional<PackedRuns> runs = packed_runs(m.lhs, Padding::Skip)) {
        if (const auto partner = partner_flats(*runs, m.lhs, m.rhs)) return all_equal(runs->flats, *partner);
      }
    }
    return all_equal(m.lhs, m.rhs);
  }
  return to_tensordict().all();
}

bool TensorDictComparison::any() const {
  if (op_ == Op::Ne && rhs_td_) return !TensorDictComparison(Op::Eq, lhs_, *rhs_td_).all();
  return to_tensordict().any();
}

bool TensorDict::all() const { return over_leaves(*this, false, leaf_all); }
bool TensorDict::any() const { return over_leaves(*this, true, leaf_any); }

TensorDict TensorDict::isnan() const {
  return value_test(*this, ValueTest::IsNan, "isnan", [](const at::Tensor& t) { return at::isnan(t); });
}
TensorDict TensorDict::isfinite() const {
  return value_test(*this, ValueTest::IsFinite, "isfinite", [](const at::Tensor& t) { return at::isfinite(t); });
}
TensorDict TensorDict::isposinf() const {
  return value_test(*this, ValueTest::IsPosInf, "isposinf", [](const at::Tensor& t) { return at::isposinf(t); });
}
TensorDict TensorDict::isneginf() const {
  return value_test(*this, ValueTest::IsNegInf, "isneginf", [](const at::Tensor& t) { return at::isneginf(t); });
}
TensorDict TensorDict::isreal() const {
  return elementwise_test(*this, "isreal", [](const at::Tensor& t) { return at::isreal(t); });
}

}  // namespace tensordict
