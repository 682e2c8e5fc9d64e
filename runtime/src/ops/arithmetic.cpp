// Binary arithmetic of TensorDict (semantics 1.12): add / sub / mul / div with a tensordict, a
// tensor or a scalar, clamp_min / clamp_max with tensordict or tensor bounds, and pow / maximum /
// minimum / lerp with tensordicts (the ternary ops: ternary.cpp).
// Out-of-place results keep the lock and drop nested levels left empty (Python's math ops; v0.14
// keeps them with a tensor of one or more dims); the in-place forms are allowed on locked
// tensordicts and write copies back through the backend.

#include <ATen/ATen.h>

#include <tensordict/ops.h>

#include "backends/in_memory/grouped_result.h"
#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/level_shape.h"
#include "ops/kernel.h"
#include "ops/leafwise.h"
#include "ops/packed.h"
#include "ops/packed_runs.h"
#include "ops/shape_groups.h"

namespace tensordict {

using namespace ops;

namespace {

// Out of place, `a op b` with keys matched by `def`: foreach when it applies, else a loop.
TensorDict map_binary(const TensorDict& a_in, const TensorDict& b_in, const BinaryDefault& def, const char* op,
                      FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> loop,
                      FunctionRef<LeafList(const LeafList&, const LeafList&)> foreach) {
  std::vector<int64_t> batch = broadcast_batch(a_in.batch_size(), b_in.batch_size(), op);
  if (def.kind() == BinaryDefault::Kind::None) {
    // Two intact packed results of one layout (Note [Intact results]): one kernel over both.
    const at::Tensor fa = intact_storage_for_result(*a_in.impl());
    c10::intrusive_ptr<LevelShape> shape;  // a's, checked once for both the layout and the result
    if (const at::Tensor fb = intact_partner(fa, a_in, b_in, &shape); fb.defined()) {
      const at::Tensor out = run_over(fa, [&](const at::Tensor& x) { return loop(x, fb); });
      if (out.defined())
        return in_memory::intact_packed_like(*a_in.impl(), out, /*filter_empty=*/true, a_in.is_locked(), std::move(shape));
    }
    // Two trees over runs laid out alike (Note [Intact runs]): one kernel a run of both.
    if (!fa.defined()) {
      if (auto runs = map_intact_run_pairs(*a_in.impl(), *b_in.impl(), loop, 0, /*filter_empty=*/true, a_in.is_locked()))
        return std::move(*runs);
    }
  }
  const TensorDict a = readable(a_in), b = readable(b_in);
  if (def.kind() == BinaryDefault::Kind::None) {
    // Plain operands (CPU leaves in separate storages, the same keys): one walk, no pair lists.
    std::optional<TensorDict> out = zip_leaves(a, b, loop, /*filter_empty=*/true);
    if (out) return keep_lock(std::move(*out), a_in);
  }
  MatchedLeaves m;
  m.lhs.reserve(32);
  m.rhs.reserve(32);
  match_leaves(a, b, def, m);
  LeafList results;
  if (a.batch_size() == b.batch_size()) {
    // Two packed storages of one layout (consolidated tensordicts): one kernel over both.
    const at::Tensor fa = packed_storage_for_result(m.lhs), fb = fa.defined() ? packed_storage(m.rhs) : at::Tensor();
    if (fa.defined() && fb.defined() && same_layout(m.lhs, m.rhs)) {
      // On an error the per-leaf path below names the failing key.
      const at::Tensor out = run_over(fa, [&](const at::Tensor& x) { return loop(x, fb); });
      // Matched strictly, the result has a's structure (rebuild_pair); a fill-value default
      // may add b's keys, which rebuild_pair places.
      if (out.defined() && def.kind() == BinaryDefault::Kind::None)
        return packed_result(*a.impl(), out, m.lhs, /*filter_empty=*/true, a_in.is_locked());
      if (out.defined()) results = unpack_like(out, m.lhs);
    }
    // Mixed dtypes, padding, subsets: one kernel per run of both (Note [Packed runs]).
    if (results.empty() && def.kind() == BinaryDefault::Kind::None) {
      if (auto runs = map_run_pairs_result(*a.impl(), m.lhs, m.rhs, loop, 0, /*filter_empty=*/true, a_in.is_locked()))
        return std::move(*runs);
    }
  }
  if (results.empty())
    results = compute(
        m.lhs.size(), foreach_pays(m.lhs) && !needs_autograd(m.rhs), [&] { return foreach(m.lhs, m.rhs); },
        [&](size_t i) { return loop(m.lhs[i], m.rhs[i]); }, PairKeys{a, b, def, false}, op);
  return keep_lock(rebuild_pair(a, b, def, std::move(results), batch, /*filter_empty=*/true), a_in);
}

// In place, `a op= b`: every leaf of `a` needs its match in `b`; keys only `b` has are ignored
// (as in Python: the structure of `a` cannot grow in place).
void map_binary_(const TensorDict& a_in, const TensorDict& b_in, const char* op,
                 FunctionRef<void(const at::Tensor&, const at::Tensor&)> loop,
                 FunctionRef<bool(const LeafList&, const LeafList&)> foreach) {
  // Two intact packed results of one layout (Note [Intact results]): one kernel over both.
  if (write_over_intact(a_in, b_in, loop, op)) return;
  InPlaceTarget target(a_in);
  const TensorDict b = readable(b_in);
  MatchedLeaves m;
  m.lhs.reserve(32);
  m.rhs.reserve(32);
  m.ignore_extra_rhs = true;
  const BinaryDefault def;
  match_leaves(target.tree(), b, def, m);
  // One kernel over both packed storages or their runs; else the matched path below names the
  // failing key.
  if (write_packed(m.lhs, m.rhs, loop, PairKeys{target.tree(), b, def, true}, op)) {
    target.commit();
    return;
  }
  compute_(
      m.lhs.size(), foreach_inplace_safe(m.lhs, m.rhs), [&] { return foreach(m.lhs, m.rhs); },
      [&](size_t i) { loop(m.lhs[i], m.rhs[i]); }, PairKeys{target.tree(), b, def, true}, op);
  target.commit();
}

// clamp_min / clamp_max with tensordict or tensor bounds share the operand handling (no foreach).
enum class Arith : uint8_t { Add, Sub, Mul, Div, ClampMin, ClampMax };

template <typename Other>
at::Tensor arith(Arith op, const at::Tensor& a, const Other& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: return at::add(a, b, alpha);
    case Arith::Sub: return at::sub(a, b, alpha);
    case Arith::Mul: return at::mul(a, b);
    case Arith::Div: return at::div(a, b);
    case Arith::ClampMin: return at::clamp_min(a, b);
    case Arith::ClampMax: return at::clamp_max(a, b);
  }
  return at::Tensor();
}

template <typename Other>
void arith_(Arith op, const at::Tensor& a, const Other& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: a.add_(b, alpha); break;
    case Arith::Sub: a.sub_(b, alpha); break;
    case Arith::Mul: a.mul_(b); break;
    case Arith::Div: a.div_(b); break;
    case Arith::ClampMin: a.clamp_min_(b); break;
    case Arith::ClampMax: a.clamp_max_(b); break;
  }
}

LeafList foreach_arith(Arith op, const LeafList& a, const LeafList& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: return at::_foreach_add(a, b, alpha);
    case Arith::Sub: return at::_foreach_sub(a, b, alpha);
    case Arith::Mul: return at::_foreach_mul(a, b);
    case Arith::Div: return at::_foreach_div(a, b);
    default: return LeafList();  // the loop
  }
}

LeafList foreach_arith(Arith op, const LeafList& a, const c10::Scalar& b) {
  switch (op) {
    case Arith::Add: return at::_foreach_add(a, b);
    case Arith::Sub: return at::_foreach_sub(a, b);
    case Arith::Mul: return at::_foreach_mul(a, b);
    case Arith::Div: return at::_foreach_div(a, b);
    default: return LeafList();
  }
}

bool foreach_arith_(Arith op, const LeafList& a, const LeafList& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: at::_foreach_add_(a, b, alpha); return true;
    case Arith::Sub: at::_foreach_sub_(a, b, alpha); return true;
    case Arith::Mul: at::_foreach_mul_(a, b); return true;
    case Arith::Div: at::_foreach_div_(a, b); return true;
    default: return false;
  }
}

const char* arith_name(Arith op, bool inplace) {
  switch (op) {
    case Arith::Add: return inplace ? "add_" : "add";
    case Arith::Sub: return inplace ? "sub_" : "sub";
    case Arith::Mul: return inplace ? "mul_" : "mul";
    case Arith::Div: return inplace ? "div_" : "div";
    case Arith::ClampMin: return inplace ? "clamp_min_" : "clamp_min";
    case Arith::ClampMax: return inplace ? "clamp_max_" : "clamp_max";
  }
  return "?";
}

TensorDict arith_td(const TensorDict& a, const TensorDict& b, Arith op, const c10::Scalar& alpha,
                    const BinaryDefault& def) {
  return map_binary(
      a, b, def, arith_name(op, false), [&](const at::Tensor& x, const at::Tensor& y) { return arith(op, x, y, alpha); },
      [&](const LeafList& x, const LeafList& y) { return foreach_arith(op, x, y, alpha); });
}

void arith_td_(const TensorDict& a, const TensorDict& b, Arith op, const c10::Scalar& alpha) {
  map_binary_(
      a, b, arith_name(op, true), [&](const at::Tensor& x, const at::Tensor& y) { arith_(op, x, y, alpha); },
      [&](const LeafList& x, const LeafList& y) { return foreach_arith_(op, x, y, alpha); });
}

// `td op tensor`: the tensor is broadcast with the batch size and left-aligned to the batch dims.
TensorDict arith_tensor(const TensorDict& td, const at::Tensor& other, Arith op, const c10::Scalar& alpha) {
  const char* name = arith_name(op, false);
  AlignedTensor aligned(td, other, name);
  const TensorDict src = readable(td);
  RebuildOptions options;
  options.batch_size = c10::IntArrayRef(aligned.batch_size());
  // v0.14 maps a tensor of one or more dims over the leaves with _fast_apply, which keeps empty
  // nested levels (finding A16); a 0-dim tensor takes the scalar path, which drops them (A5).
  options.filter_empty = other.dim() == 0;
  // One kernel a group of leaves of one shape (Note [Shape groups]). Per leaf where autograd
  // records the op (an operand that needs grad), or where the operand would widen the leaves'
  // rank (a tensor broadcasting the batch size to more dims).
  const bool groups = !other.requires_grad() && aligned.batch_size().size() == td.batch_size().size();
  // A group's operand aligned once for its leaves' rank (the group's less its dim).
  const auto per_group = [&](const at::Tensor& g) { return arith(op, g, aligned.group_operand(g.dim() - 1), alpha); };
  if (groups) {
    if (auto grouped = in_memory::map_intact_groups(
            *src.impl(), [&](const at::Tensor& g, int64_t) { return per_group(g); },
            {options.batch_size.value(), /*nested_extra_dims=*/true, options.filter_empty, td.is_locked()}))
      return keep_lock(std::move(*grouped), td);  // Note [Grouped results]
  }
  LeafList leaves = leaves_of(src);
  const auto one = [&](size_t i) { return arith(op, leaves[i], aligned.operand(leaves[i]), alpha); };
  if (groups) {
    if (auto grouped = map_shape_groups(
            *src.impl(), leaves, [&](const at::Tensor& g, size_t) { return per_group(g); }, one, options))
      return keep_lock(std::move(*grouped), td);
  }
  const bool foreach = foreach_pays(leaves);
  LeafList operands;  // for the `_foreach_*` kernel only: the loop aligns each as it goes
  if (foreach) {
    operands.reserve(leaves.size());
    for (const auto& t : leaves) operands.push_back(aligned.operand(t));
  }
  LeafList results = compute(
      leaves.size(), foreach && !needs_autograd(operands), [&] { return foreach_arith(op, leaves, operands, alpha); },
      one, LeafKeys{*src.impl()}, name);
  return keep_lock(rebuild(*src.impl(), std::move(results), options), td);
}

void arith_tensor_(const TensorDict& td, const at::Tensor& other, Arith op, const c10::Scalar& alpha) {
  const char* name = arith_name(op, true);
  AlignedTensor aligned(td, other, name);
  TD_CHECK(aligned.batch_size() == td.batch_size(), ShapeError, name, ": a tensor of shape ", other.sizes(),
           " would change the batch size ", td.batch_size(), " of an in-place operation");
  // One kernel a group of leaves (Notes [Grouped results] and [Shape groups]).
  const auto per_group = [&](const at::Tensor& g) { arith_(op, g, aligned.group_operand(g.dim() - 1), alpha); };
  if (in_memory::write_intact_groups(*td.impl(), per_group, other)) return;
  InPlaceTarget target(td);
  LeafList leaves = leaves_of(target.tree());
  const auto one = [&](size_t i) { arith_(op, leaves[i], aligned.operand(leaves[i]), alpha); };
  if (!write_shape_groups(leaves, [&](const at::Tensor& g, size_t) { per_group(g); }, one, other))
    compute_(leaves.size(), false, [] { return false; }, one, LeafKeys{*target.tree().impl()}, name);
  target.commit();
}

// `td op scalar`. Float and double leaves use a 0-dim tensor of their own dtype, made once per
// call (the wrapped-scalar path LibTorch takes for a c10::Scalar allocates and promotes per
// leaf); the result is bit-identical since LibTorch casts the scalar to the leaf's dtype anyway.
TensorDict arith_scalar(const TensorDict& td, const c10::Scalar& other, Arith op, const c10::Scalar& alpha) {
  const char* name = arith_name(op, false);
  ScalarOperand scalar(other);
  const auto over_storage = [&](const at::Tensor& flat) {
    const at::Tensor& operand = scalar.for_leaf(flat);  // one dtype, as every leaf's
    return operand.defined() ? arith(op, flat, operand, alpha) : arith(op, flat, other, alpha);
  };
  // An intact packed result (Note [Intact results]) or a packed storage (a consolidated
  // tensordict): one kernel over all of it; on an error the per-leaf path below names the key.
  if (auto intact = map_intact(*td.impl(), over_storage, 0, /*filter_empty=*/true, td.is_locked()))
    return std::move(*intact);
  const TensorDict src = readable(td);
  LeafList leaves = leaves_of(src);
  const size_t n = leaves.size();
  if (auto packed = map_packed(*src.impl(), leaves, over_storage, 0, /*filter_empty=*/true, td.is_locked()))
    return std::move(*packed);
  LeafList operands(n);
  bool all_tensor_operands = true;
  for (size_t i = 0; i < n; ++i) {
    operands[i] = scalar.for_leaf(leaves[i]);
    all_tensor_operands = all_tensor_operands && operands[i].defined();
  }
  LeafList results = compute(
      n, foreach_pays(leaves) && (all_tensor_operands || alpha.equal(1)),
      [&] {
        return all_tensor_operands ? foreach_arith(op, leaves, operands, alpha) : foreach_arith(op, leaves, other);
      },
      [&](size_t i) {
        return operands[i].defined() ? arith(op, leaves[i], operands[i], alpha) : arith(op, leaves[i], other, alpha);
      },
      LeafKeys{*src.impl()}, name);
  RebuildOptions options;
  options.filter_empty = true;
  return keep_lock(rebuild(*src.impl(), std::move(results), options), td);
}

void arith_scalar_(const TensorDict& td, const c10::Scalar& other, Arith op, const c10::Scalar& alpha) {
  const char* name = arith_name(op, true);
  ScalarOperand scalar(other);
  const auto over_storage = [&](const at::Tensor& flat) {
    const at::Tensor& operand = scalar.for_leaf(flat);  // one dtype, as every leaf's
    if (operand.defined()) arith_(op, flat, operand, alpha);
    else arith_(op, flat, other, alpha);
  };
  // An intact packed result: its leaves view what this changes.
  if (write_over_intact(td, over_storage, name)) return;
  InPlaceTarget target(td);
  LeafList leaves = leaves_of(target.tree());
  LeafList operands(leaves.size());
  bool all_tensor_operands = !needs_autograd(leaves);
  for (size_t i = 0; i < leaves.size(); ++i) {
    operands[i] = scalar.for_leaf(leaves[i]);
    all_tensor_operands = all_tensor_operands && operands[i].defined();
  }
  // A packed storage (a consolidated tensordict) or its runs: one kernel over each; else the
  // per-leaf path below names the failing key.
  if (write_packed(leaves, over_storage, LeafKeys{*target.tree().impl()}, name)) {
    target.commit();
    return;
  }
  // Float/double leaves with a real scalar cannot fail: one foreach call.
  compute_(
      leaves.size(), all_tensor_operands, [&] { return foreach_arith_(op, leaves, operands, alpha); },
      [&](size_t i) {
        if (operands[i].defined()) {
          arith_(op, leaves[i], operands[i], alpha);
        } else {
          arith_(op, leaves[i], other, alpha);
        }
      },
      LeafKeys{*target.tree().impl()}, name);
  target.commit();
}

}  // namespace

#define TENSORDICT_DEFINE_ARITH(name, Op, ALPHA_PARAM, ALPHA)                                              \
  TensorDict TensorDict::name(const TensorDict& other ALPHA_PARAM, const BinaryDefault& default_) const {  \
    return arith_td(*this, other, Arith::Op, ALPHA, default_);                                              \
  }                                                                                                          \
  TensorDict TensorDict::name(const at::Tensor& other ALPHA_PARAM) const {                                   \
    return arith_tensor(*this, other, Arith::Op, ALPHA);                                                     \
  }                                                                                                          \
  TensorDict TensorDict::name(const c10::Scalar& other ALPHA_PARAM) const {                                  \
    return arith_scalar(*this, other, Arith::Op, ALPHA);                                                     \
  }                                                                                                          \
  TensorDict& TensorDict::name##_(const TensorDict& other ALPHA_PARAM) {                                     \
    arith_td_(*this, other, Arith::Op, ALPHA);                                                               \
    return *this;                                                                                            \
  }                                                                                                          \
  TensorDict& TensorDict::name##_(const at::Tensor& other ALPHA_PARAM) {                                     \
    arith_tensor_(*this, other, Arith::Op, ALPHA);                                                           \
    return *this;                                                                                            \
  }                                                                                                          \
  TensorDict& TensorDict::name##_(const c10::Scalar& other ALPHA_PARAM) {                                    \
    arith_scalar_(*this, other, Arith::Op, ALPHA);                                                           \
    return *this;                                                                                            \
  }
#define TENSORDICT_WITH_ALPHA , const c10::Scalar& alpha
#define TENSORDICT_NO_ALPHA
TENSORDICT_DEFINE_ARITH(add, Add, TENSORDICT_WITH_ALPHA, alpha)
TENSORDICT_DEFINE_ARITH(sub, Sub, TENSORDICT_WITH_ALPHA, alpha)
TENSORDICT_DEFINE_ARITH(mul, Mul, TENSORDICT_NO_ALPHA, 1)
TENSORDICT_DEFINE_ARITH(div, Div, TENSORDICT_NO_ALPHA, 1)
#undef TENSORDICT_DEFINE_ARITH
#undef TENSORDICT_WITH_ALPHA
#undef TENSORDICT_NO_ALPHA

#define TENSORDICT_DEFINE_CLAMP(name, Op)                                                            \
  TensorDict TensorDict::name(const TensorDict& bound, const BinaryDefault& default_) const {       \
    return arith_td(*this, bound, Arith::Op, 1, default_);                                           \
  }                                                                                                  \
  TensorDict TensorDict::name(const at::Tensor& bound) const { return arith_tensor(*this, bound, Arith::Op, 1); } \
  TensorDict& TensorDict::name##_(const TensorDict& bound) {                                         \
    arith_td_(*this, bound, Arith::Op, 1);                                                           \
    return *this;                                                                                    \
  }                                                                                                  \
  TensorDict& TensorDict::name##_(const at::Tensor& bound) {                                         \
    arith_tensor_(*this, bound, Arith::Op, 1);                                                       \
    return *this;                                                                                    \
  }
TENSORDICT_DEFINE_CLAMP(clamp_min, ClampMin)
TENSORDICT_DEFINE_CLAMP(clamp_max, ClampMax)
#undef TENSORDICT_DEFINE_CLAMP

// ---- pow / maximum / minimum / lerp with tensordicts ---------------------------------------------

namespace {
LeafList no_foreach2(const LeafList&, const LeafList&) { return LeafList(); }
bool no_foreach2_(const LeafList&, const LeafList&) { return false; }
}  // namespace

TensorDict TensorDict::pow(const TensorDict& exponent) const {
  return map_binary(
      *this, exponent, BinaryDefault(), "pow", [](const at::Tensor& x, const at::Tensor& y) { return at::pow(x, y); },
      no_foreach2);
}
TensorDict& TensorDict::pow_(const TensorDict& exponent) {
  map_binary_(*this, exponent, "pow_", [](const at::Tensor& x, const at::Tensor& y) { x.pow_(y); }, no_foreach2_);
  return *this;
}
TensorDict TensorDict::maximum(const TensorDict& other) const {
  return map_binary(
      *this, other, BinaryDefault(), "maximum", [](const at::Tensor& x, const at::Tensor& y) { return at::maximum(x, y); },
      [](const LeafList& x, const LeafList& y) { return at::_foreach_maximum(x, y); });
}
TensorDict& TensorDict::maximum_(const TensorDict& other) {
  map_binary_(
      *this, other, "maximum_",
      [](const at::Tensor& x, const at::Tensor& y) {
        at::Tensor out = x;
        at::maximum_out(out, x, y);
      },
      [](const LeafList& x, const LeafList& y) {
        at::_foreach_maximum_(x, y);
        return true;
      });
  return *this;
}
TensorDict TensorDict::minimum(const TensorDict& other) const {
  return map_binary(
      *this, other, BinaryDefault(), "minimum", [](const at::Tensor& x, const at::Tensor& y) { return at::minimum(x, y); },
      [](const LeafList& x, const LeafList& y) { return at::_foreach_minimum(x, y); });
}
TensorDict& TensorDict::minimum_(const TensorDict& other) {
  map_binary_(
      *this, other, "minimum_",
      [](const at::Tensor& x, const at::Tensor& y) {
        at::Tensor out = x;
        at::minimum_out(out, x, y);
      },
      [](const LeafList& x, const LeafList& y) {
        at::_foreach_minimum_(x, y);
        return true;
      });
  return *this;
}
TensorDict TensorDict::lerp(const TensorDict& end, const c10::Scalar& weight) const {
  return map_binary(
      *this, end, BinaryDefault(), "lerp",
      [&](const at::Tensor& x, const at::Tensor& y) { return at::lerp(x, y, weight); }, no_foreach2);
}
TensorDict& TensorDict::lerp_(const TensorDict& end, const c10::Scalar& weight) {
  map_binary_(*this, end, "lerp_", [&](const at::Tensor& x, const at::Tensor& y) { x.lerp_(y, weight); }, no_foreach2_);
  return *this;
}

TensorDict maximum(const TensorDict& a, const TensorDict& b) { return a.maximum(b); }
TensorDict minimum(const TensorDict& a, const TensorDict& b) { return a.minimum(b); }

}  // namespace tensordict
