// Pointwise math, arithmetic and comparisons of TensorDict (semantics 1.12). Out-of-place forms
// run one `_foreach_*` call over all leaves where LibTorch has one and rebuild the structure;
// in-place forms write into the leaves and are allowed on locked tensordicts.

#include <ATen/ATen.h>

#include <tensordict/ops.h>
#include <tensordict/tensor_dict_impl.h>

#include "ops/leafwise.h"

namespace tensordict {

using namespace ops;

namespace {

LeafList leaves_of(const TensorDict& td) {
  LeafList leaves;
  leaves.reserve(32);
  collect_leaves(*td.impl(), leaves);
  return leaves;
}

// Out of place: `foreach(leaves)` when it applies, else `loop(leaf)` per leaf (which names the
// failing key). `foreach` returns an empty list when it does not apply.
template <typename Loop, typename Foreach>
TensorDict map_unary(const TensorDict& td, const char* op, Loop&& loop, Foreach&& foreach) {
  LeafList leaves = leaves_of(td);
  LeafList results;
  if (!leaves.empty() && !needs_autograd(leaves)) {
    try {
      results = foreach(leaves);
    } catch (const c10::Error&) {
      results.clear();
    }
  }
  if (results.size() != leaves.size()) {
    results.assign(leaves.size(), at::Tensor());
    for_each_index(*td.impl(), leaves.size(), op, [&](size_t i) { results[i] = loop(leaves[i]); });
  }
  return keep_lock(rebuild(*td.impl(), results), td);
}

bool all_floating(const LeafList& leaves) {
  for (const auto& t : leaves) {
    if (!at::isFloatingType(t.scalar_type())) return false;
  }
  return true;
}

// In place: the foreach kernel for floating leaves (which in-place unary math cannot fail on),
// a loop naming the failing key otherwise.
template <typename Loop, typename Foreach>
void map_unary_(TensorDict& td, const char* op, Loop&& loop, Foreach&& foreach) {
  LeafList leaves = leaves_of(td);
  if (leaves.empty()) return;
  if (all_floating(leaves) && !needs_autograd(leaves) && foreach(leaves)) return;
  for_each_index(*td.impl(), leaves.size(), op, [&](size_t i) { loop(leaves[i]); });
}

}  // namespace

// ---- Unary ops ---------------------------------------------------------------------------------

#define TENSORDICT_UNARY_WITH_FOREACH(name)                                                   \
  TensorDict TensorDict::name() const {                                                       \
    return map_unary(                                                                          \
        *this, #name, [](const at::Tensor& t) { return t.name(); },                            \
        [](const LeafList& l) { return at::_foreach_##name(l); });                            \
  }                                                                                            \
  TensorDict& TensorDict::name##_() {                                                          \
    map_unary_(                                                                                \
        *this, #name "_", [](const at::Tensor& t) { t.name##_(); },                            \
        [](const LeafList& l) {                                                                \
          at::_foreach_##name##_(l);                                                           \
          return true;                                                                         \
        });                                                                                    \
    return *this;                                                                              \
  }

#define TENSORDICT_UNARY_LOOP(name)                                                           \
  TensorDict TensorDict::name() const {                                                       \
    return map_unary(                                                                          \
        *this, #name, [](const at::Tensor& t) { return t.name(); },                            \
        [](const LeafList&) { return LeafList(); });                                          \
  }                                                                                            \
  TensorDict& TensorDict::name##_() {                                                          \
    map_unary_(                                                                                \
        *this, #name "_", [](const at::Tensor& t) { t.name##_(); },                            \
        [](const LeafList&) { return false; });                                                \
    return *this;                                                                              \
  }

TENSORDICT_UNARY_WITH_FOREACH(abs)
TENSORDICT_UNARY_WITH_FOREACH(acos)
TENSORDICT_UNARY_WITH_FOREACH(asin)
TENSORDICT_UNARY_WITH_FOREACH(atan)
TENSORDICT_UNARY_WITH_FOREACH(ceil)
TENSORDICT_UNARY_WITH_FOREACH(cos)
TENSORDICT_UNARY_WITH_FOREACH(cosh)
TENSORDICT_UNARY_WITH_FOREACH(erf)
TENSORDICT_UNARY_WITH_FOREACH(erfc)
TENSORDICT_UNARY_WITH_FOREACH(exp)
TENSORDICT_UNARY_WITH_FOREACH(expm1)
TENSORDICT_UNARY_WITH_FOREACH(floor)
TENSORDICT_UNARY_WITH_FOREACH(frac)
TENSORDICT_UNARY_WITH_FOREACH(lgamma)
TENSORDICT_UNARY_WITH_FOREACH(log)
TENSORDICT_UNARY_WITH_FOREACH(log10)
TENSORDICT_UNARY_WITH_FOREACH(log1p)
TENSORDICT_UNARY_WITH_FOREACH(log2)
TENSORDICT_UNARY_WITH_FOREACH(neg)
TENSORDICT_UNARY_WITH_FOREACH(reciprocal)
TENSORDICT_UNARY_WITH_FOREACH(round)
TENSORDICT_UNARY_WITH_FOREACH(sigmoid)
TENSORDICT_UNARY_LOOP(sign)
TENSORDICT_UNARY_WITH_FOREACH(sin)
TENSORDICT_UNARY_WITH_FOREACH(sinh)
TENSORDICT_UNARY_WITH_FOREACH(sqrt)
TENSORDICT_UNARY_WITH_FOREACH(tan)
TENSORDICT_UNARY_WITH_FOREACH(tanh)
TENSORDICT_UNARY_WITH_FOREACH(trunc)

#undef TENSORDICT_UNARY_WITH_FOREACH
#undef TENSORDICT_UNARY_LOOP

namespace {
LeafList no_foreach(const LeafList&) { return LeafList(); }
bool no_foreach_(const LeafList&) { return false; }
}  // namespace

namespace {
// LibTorch 1.13 spells optionals c10::optional.
c10::optional<c10::Scalar> to_c10(const std::optional<c10::Scalar>& v) {
  return v ? c10::optional<c10::Scalar>(*v) : c10::nullopt;
}
}  // namespace

TensorDict TensorDict::clamp(const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max) const {
  TD_CHECK(min.has_value() || max.has_value(), ValueError, "clamp: at least one of min and max must be given");
  const auto lo = to_c10(min), hi = to_c10(max);
  return map_unary(*this, "clamp", [&](const at::Tensor& t) { return at::clamp(t, lo, hi); }, no_foreach);
}
TensorDict& TensorDict::clamp_(const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max) {
  TD_CHECK(min.has_value() || max.has_value(), ValueError, "clamp_: at least one of min and max must be given");
  const auto lo = to_c10(min), hi = to_c10(max);
  map_unary_(*this, "clamp_", [&](const at::Tensor& t) { t.clamp_(lo, hi); }, no_foreach_);
  return *this;
}
TensorDict TensorDict::clamp_min(const c10::Scalar& min) const {
  return map_unary(*this, "clamp_min", [&](const at::Tensor& t) { return at::clamp_min(t, min); }, no_foreach);
}
TensorDict& TensorDict::clamp_min_(const c10::Scalar& min) {
  map_unary_(*this, "clamp_min_", [&](const at::Tensor& t) { t.clamp_min_(min); }, no_foreach_);
  return *this;
}
TensorDict TensorDict::clamp_max(const c10::Scalar& max) const {
  return map_unary(*this, "clamp_max", [&](const at::Tensor& t) { return at::clamp_max(t, max); }, no_foreach);
}
TensorDict& TensorDict::clamp_max_(const c10::Scalar& max) {
  map_unary_(*this, "clamp_max_", [&](const at::Tensor& t) { t.clamp_max_(max); }, no_foreach_);
  return *this;
}
TensorDict TensorDict::pow(const c10::Scalar& exponent) const {
  return map_unary(*this, "pow", [&](const at::Tensor& t) { return at::pow(t, exponent); }, no_foreach);
}
TensorDict& TensorDict::pow_(const c10::Scalar& exponent) {
  map_unary_(*this, "pow_", [&](const at::Tensor& t) { t.pow_(exponent); }, no_foreach_);
  return *this;
}

// ---- Binary ops with a tensordict ----------------------------------------------------------------

namespace {

// Out of place, `a op b` with keys matched by `def`: foreach when given, else a loop.
template <typename Loop, typename Foreach>
TensorDict map_binary(const TensorDict& a, const TensorDict& b, const BinaryDefault& def, const char* op,
                      Loop&& loop, Foreach&& foreach) {
  std::vector<int64_t> batch = broadcast_batch(a.batch_size(), b.batch_size(), op);
  MatchedLeaves m;
  m.lhs.reserve(32);
  m.rhs.reserve(32);
  match_leaves(a, b, def, m);
  LeafList results;
  if (!m.lhs.empty() && !needs_autograd(m.lhs) && !needs_autograd(m.rhs)) {
    try {
      results = foreach(m.lhs, m.rhs);
    } catch (const c10::Error&) {
      results.clear();
    }
  }
  if (results.size() != m.lhs.size()) {
    results.assign(m.lhs.size(), at::Tensor());
    size_t i = 0;
    try {
      for (; i < m.lhs.size(); ++i) results[i] = loop(m.lhs[i], m.rhs[i]);
    } catch (const c10::Error& e) {
      std::vector<NestedKey> keys;
      MatchedLeaves again;
      again.keys = &keys;
      match_leaves(a, b, def, again);
      rethrow_leaf_error(op, keys[i], e);
    }
  }
  return keep_lock(rebuild_pair(a, b, def, results, batch), a);
}

bool foreach_inplace_safe(const LeafList& self, const LeafList& other) {
  if (needs_autograd(self) || needs_autograd(other)) return false;
  for (size_t i = 0; i < self.size(); ++i) {
    const at::Tensor& x = self[i];
    const at::Tensor& y = other[i];
    if (x.scalar_type() != y.scalar_type() || !at::isFloatingType(x.scalar_type()) || x.sizes() != y.sizes() ||
        x.device() != y.device()) {
      return false;
    }
  }
  return true;
}

// In place, `a op= b` over the common structure (keys must match).
template <typename Loop, typename Foreach>
void map_binary_(TensorDict& a, const TensorDict& b, const char* op, Loop&& loop, Foreach&& foreach) {
  MatchedLeaves m;
  m.lhs.reserve(32);
  m.rhs.reserve(32);
  match_leaves(a, b, BinaryDefault(), m);
  if (m.lhs.empty()) return;
  if (foreach_inplace_safe(m.lhs, m.rhs) && foreach(m.lhs, m.rhs)) return;
  size_t i = 0;
  try {
    for (; i < m.lhs.size(); ++i) loop(m.lhs[i], m.rhs[i]);
  } catch (const c10::Error& e) {
    std::vector<NestedKey> keys;
    MatchedLeaves again;
    again.keys = &keys;
    match_leaves(a, b, BinaryDefault(), again);
    rethrow_leaf_error(op, keys[i], e);
  }
}

enum class Arith : uint8_t { Add, Sub, Mul, Div };

at::Tensor arith(Arith op, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: return at::add(a, b, alpha);
    case Arith::Sub: return at::sub(a, b, alpha);
    case Arith::Mul: return at::mul(a, b);
    case Arith::Div: return at::div(a, b);
  }
  return at::Tensor();
}

at::Tensor arith(Arith op, const at::Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: return at::add(a, b, alpha);
    case Arith::Sub: return at::sub(a, b, alpha);
    case Arith::Mul: return at::mul(a, b);
    case Arith::Div: return at::div(a, b);
  }
  return at::Tensor();
}

void arith_(Arith op, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: a.add_(b, alpha); break;
    case Arith::Sub: a.sub_(b, alpha); break;
    case Arith::Mul: a.mul_(b); break;
    case Arith::Div: a.div_(b); break;
  }
}

void arith_(Arith op, const at::Tensor& a, const c10::Scalar& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: a.add_(b, alpha); break;
    case Arith::Sub: a.sub_(b, alpha); break;
    case Arith::Mul: a.mul_(b); break;
    case Arith::Div: a.div_(b); break;
  }
}

LeafList foreach_arith(Arith op, const LeafList& a, const LeafList& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: return at::_foreach_add(a, b, alpha);
    case Arith::Sub: return at::_foreach_sub(a, b, alpha);
    case Arith::Mul: return at::_foreach_mul(a, b);
    case Arith::Div: return at::_foreach_div(a, b);
  }
  return LeafList();
}

bool foreach_arith_(Arith op, const LeafList& a, const LeafList& b, const c10::Scalar& alpha) {
  switch (op) {
    case Arith::Add: at::_foreach_add_(a, b, alpha); return true;
    case Arith::Sub: at::_foreach_sub_(a, b, alpha); return true;
    case Arith::Mul: at::_foreach_mul_(a, b); return true;
    case Arith::Div: at::_foreach_div_(a, b); return true;
  }
  return false;
}

const char* arith_name(Arith op, bool inplace) {
  switch (op) {
    case Arith::Add: return inplace ? "add_" : "add";
    case Arith::Sub: return inplace ? "sub_" : "sub";
    case Arith::Mul: return inplace ? "mul_" : "mul";
    case Arith::Div: return inplace ? "div_" : "div";
  }
  return "?";
}

TensorDict arith_td(const TensorDict& a, const TensorDict& b, Arith op, const c10::Scalar& alpha,
                    const BinaryDefault& def) {
  return map_binary(
      a, b, def, arith_name(op, false),
      [&](const at::Tensor& x, const at::Tensor& y) { return arith(op, x, y, alpha); },
      [&](const LeafList& x, const LeafList& y) { return foreach_arith(op, x, y, alpha); });
}

void arith_td_(TensorDict& a, const TensorDict& b, Arith op, const c10::Scalar& alpha) {
  map_binary_(
      a, b, arith_name(op, true), [&](const at::Tensor& x, const at::Tensor& y) { arith_(op, x, y, alpha); },
      [&](const LeafList& x, const LeafList& y) { return foreach_arith_(op, x, y, alpha); });
}

// `td op tensor`: the tensor is broadcast with the batch size and left-aligned to the batch dims.
TensorDict arith_tensor(const TensorDict& td, const at::Tensor& other, Arith op, const c10::Scalar& alpha) {
  const char* name = arith_name(op, false);
  AlignedTensor aligned(td, other, name);
  LeafList leaves = leaves_of(td);
  LeafList operands;
  operands.reserve(leaves.size());
  for (const auto& t : leaves) operands.push_back(aligned.operand(t));
  LeafList results;
  if (!leaves.empty() && !needs_autograd(leaves) && !needs_autograd(operands)) {
    try {
      results = foreach_arith(op, leaves, operands, alpha);
    } catch (const c10::Error&) {
      results.clear();
    }
  }
  if (results.size() != leaves.size()) {
    results.assign(leaves.size(), at::Tensor());
    for_each_index(*td.impl(), leaves.size(), name,
                   [&](size_t i) { results[i] = arith(op, leaves[i], operands[i], alpha); });
  }
  return keep_lock(rebuild(*td.impl(), results, c10::IntArrayRef(aligned.batch_size())), td);
}

void arith_tensor_(TensorDict& td, const at::Tensor& other, Arith op, const c10::Scalar& alpha) {
  const char* name = arith_name(op, true);
  AlignedTensor aligned(td, other, name);
  TD_CHECK(aligned.batch_size() == td.batch_size(), ShapeError, name, ": a tensor of shape ",
           other.sizes(), " would change the batch size ", td.batch_size(), " of an in-place operation");
  LeafList leaves = leaves_of(td);
  for_each_index(*td.impl(), leaves.size(), name,
                 [&](size_t i) { arith_(op, leaves[i], aligned.operand(leaves[i]), alpha); });
}

// `td op scalar`. Float and double leaves use a 0-dim tensor of their own dtype, made once per
// call (the wrapped-scalar path LibTorch takes for a c10::Scalar allocates and promotes per
// leaf); the result is bit-identical since LibTorch casts the scalar to the leaf's dtype anyway.
TensorDict arith_scalar(const TensorDict& td, const c10::Scalar& other, Arith op, const c10::Scalar& alpha) {
  const char* name = arith_name(op, false);
  LeafList leaves = leaves_of(td);
  const size_t n = leaves.size();
  ScalarOperand scalar(other);
  LeafList operands(n);
  bool all_tensor_operands = true;
  for (size_t i = 0; i < n; ++i) {
    operands[i] = scalar.for_leaf(leaves[i]);
    all_tensor_operands = all_tensor_operands && operands[i].defined();
  }
  LeafList results;
  if (n > 0 && !needs_autograd(leaves)) {
    try {
      if (all_tensor_operands) {
        results = foreach_arith(op, leaves, operands, alpha);
      } else if (alpha.equal(1)) {
        switch (op) {
          case Arith::Add: results = at::_foreach_add(leaves, other); break;
          case Arith::Sub: results = at::_foreach_sub(leaves, other); break;
          case Arith::Mul: results = at::_foreach_mul(leaves, other); break;
          case Arith::Div: results = at::_foreach_div(leaves, other); break;
        }
      }
    } catch (const c10::Error&) {
      results.clear();
    }
  }
  if (results.size() != n) {
    results.assign(n, at::Tensor());
    for_each_index(*td.impl(), n, name, [&](size_t i) {
      results[i] = operands[i].defined() ? arith(op, leaves[i], operands[i], alpha)
                                         : arith(op, leaves[i], other, alpha);
    });
  }
  return keep_lock(rebuild(*td.impl(), results), td);
}

void arith_scalar_(TensorDict& td, const c10::Scalar& other, Arith op, const c10::Scalar& alpha) {
  const char* name = arith_name(op, true);
  LeafList leaves = leaves_of(td);
  if (leaves.empty()) return;
  ScalarOperand scalar(other);
  LeafList operands(leaves.size());
  bool all_tensor_operands = !needs_autograd(leaves);
  for (size_t i = 0; i < leaves.size(); ++i) {
    operands[i] = scalar.for_leaf(leaves[i]);
    all_tensor_operands = all_tensor_operands && operands[i].defined();
  }
  // Float/double leaves with a real scalar cannot fail: one foreach call.
  if (all_tensor_operands && foreach_arith_(op, leaves, operands, alpha)) return;
  for_each_index(*td.impl(), leaves.size(), name, [&](size_t i) {
    if (operands[i].defined()) {
      arith_(op, leaves[i], operands[i], alpha);
    } else {
      arith_(op, leaves[i], other, alpha);
    }
  });
}

}  // namespace

TensorDict TensorDict::add(const TensorDict& other, const c10::Scalar& alpha, const BinaryDefault& default_) const {
  return arith_td(*this, other, Arith::Add, alpha, default_);
}
TensorDict TensorDict::add(const at::Tensor& other, const c10::Scalar& alpha) const {
  return arith_tensor(*this, other, Arith::Add, alpha);
}
TensorDict TensorDict::add(const c10::Scalar& other, const c10::Scalar& alpha) const {
  return arith_scalar(*this, other, Arith::Add, alpha);
}
TensorDict TensorDict::sub(const TensorDict& other, const c10::Scalar& alpha, const BinaryDefault& default_) const {
  return arith_td(*this, other, Arith::Sub, alpha, default_);
}
TensorDict TensorDict::sub(const at::Tensor& other, const c10::Scalar& alpha) const {
  return arith_tensor(*this, other, Arith::Sub, alpha);
}
TensorDict TensorDict::sub(const c10::Scalar& other, const c10::Scalar& alpha) const {
  return arith_scalar(*this, other, Arith::Sub, alpha);
}
TensorDict TensorDict::mul(const TensorDict& other, const BinaryDefault& default_) const {
  return arith_td(*this, other, Arith::Mul, 1, default_);
}
TensorDict TensorDict::mul(const at::Tensor& other) const { return arith_tensor(*this, other, Arith::Mul, 1); }
TensorDict TensorDict::mul(const c10::Scalar& other) const { return arith_scalar(*this, other, Arith::Mul, 1); }
TensorDict TensorDict::div(const TensorDict& other, const BinaryDefault& default_) const {
  return arith_td(*this, other, Arith::Div, 1, default_);
}
TensorDict TensorDict::div(const at::Tensor& other) const { return arith_tensor(*this, other, Arith::Div, 1); }
TensorDict TensorDict::div(const c10::Scalar& other) const { return arith_scalar(*this, other, Arith::Div, 1); }

TensorDict& TensorDict::add_(const TensorDict& other, const c10::Scalar& alpha) {
  arith_td_(*this, other, Arith::Add, alpha);
  return *this;
}
TensorDict& TensorDict::add_(const at::Tensor& other, const c10::Scalar& alpha) {
  arith_tensor_(*this, other, Arith::Add, alpha);
  return *this;
}
TensorDict& TensorDict::add_(const c10::Scalar& other, const c10::Scalar& alpha) {
  arith_scalar_(*this, other, Arith::Add, alpha);
  return *this;
}
TensorDict& TensorDict::sub_(const TensorDict& other, const c10::Scalar& alpha) {
  arith_td_(*this, other, Arith::Sub, alpha);
  return *this;
}
TensorDict& TensorDict::sub_(const at::Tensor& other, const c10::Scalar& alpha) {
  arith_tensor_(*this, other, Arith::Sub, alpha);
  return *this;
}
TensorDict& TensorDict::sub_(const c10::Scalar& other, const c10::Scalar& alpha) {
  arith_scalar_(*this, other, Arith::Sub, alpha);
  return *this;
}
TensorDict& TensorDict::mul_(const TensorDict& other) {
  arith_td_(*this, other, Arith::Mul, 1);
  return *this;
}
TensorDict& TensorDict::mul_(const at::Tensor& other) {
  arith_tensor_(*this, other, Arith::Mul, 1);
  return *this;
}
TensorDict& TensorDict::mul_(const c10::Scalar& other) {
  arith_scalar_(*this, other, Arith::Mul, 1);
  return *this;
}
TensorDict& TensorDict::div_(const TensorDict& other) {
  arith_td_(*this, other, Arith::Div, 1);
  return *this;
}
TensorDict& TensorDict::div_(const at::Tensor& other) {
  arith_tensor_(*this, other, Arith::Div, 1);
  return *this;
}
TensorDict& TensorDict::div_(const c10::Scalar& other) {
  arith_scalar_(*this, other, Arith::Div, 1);
  return *this;
}

// ---- pow / maximum / minimum / lerp / addcmul / addcdiv with tensordicts -----------------------

TensorDict TensorDict::pow(const TensorDict& exponent) const {
  return map_binary(
      *this, exponent, BinaryDefault(), "pow", [](const at::Tensor& x, const at::Tensor& y) { return at::pow(x, y); },
      [](const LeafList&, const LeafList&) { return LeafList(); });
}
TensorDict& TensorDict::pow_(const TensorDict& exponent) {
  map_binary_(
      *this, exponent, "pow_", [](const at::Tensor& x, const at::Tensor& y) { x.pow_(y); },
      [](const LeafList&, const LeafList&) { return false; });
  return *this;
}
TensorDict TensorDict::maximum(const TensorDict& other) const {
  return map_binary(
      *this, other, BinaryDefault(), "maximum",
      [](const at::Tensor& x, const at::Tensor& y) { return at::maximum(x, y); },
      [](const LeafList& x, const LeafList& y) { return at::_foreach_maximum(x, y); });
}
TensorDict& TensorDict::maximum_(const TensorDict& other) {
  map_binary_(
      *this, other, "maximum_", [](const at::Tensor& x, const at::Tensor& y) { at::maximum_out(const_cast<at::Tensor&>(x), x, y); },
      [](const LeafList& x, const LeafList& y) {
        at::_foreach_maximum_(x, y);
        return true;
      });
  return *this;
}
TensorDict TensorDict::minimum(const TensorDict& other) const {
  return map_binary(
      *this, other, BinaryDefault(), "minimum",
      [](const at::Tensor& x, const at::Tensor& y) { return at::minimum(x, y); },
      [](const LeafList& x, const LeafList& y) { return at::_foreach_minimum(x, y); });
}
TensorDict& TensorDict::minimum_(const TensorDict& other) {
  map_binary_(
      *this, other, "minimum_", [](const at::Tensor& x, const at::Tensor& y) { at::minimum_out(const_cast<at::Tensor&>(x), x, y); },
      [](const LeafList& x, const LeafList& y) {
        at::_foreach_minimum_(x, y);
        return true;
      });
  return *this;
}
TensorDict TensorDict::lerp(const TensorDict& end, const c10::Scalar& weight) const {
  return map_binary(
      *this, end, BinaryDefault(), "lerp",
      [&](const at::Tensor& x, const at::Tensor& y) { return at::lerp(x, y, weight); },
      [](const LeafList&, const LeafList&) { return LeafList(); });
}
TensorDict& TensorDict::lerp_(const TensorDict& end, const c10::Scalar& weight) {
  map_binary_(
      *this, end, "lerp_", [&](const at::Tensor& x, const at::Tensor& y) { x.lerp_(y, weight); },
      [](const LeafList&, const LeafList&) { return false; });
  return *this;
}
TensorDict TensorDict::lerp(const TensorDict& end, const TensorDict& weight) const {
  // Matched twice: (self, end) then (self, weight); both must have self's keys.
  MatchedLeaves ends, weights;
  match_leaves(*this, end, BinaryDefault(), ends);
  match_leaves(*this, weight, BinaryDefault(), weights);
  LeafList results(ends.lhs.size());
  for_each_index(*impl(), results.size(), "lerp",
                 [&](size_t i) { results[i] = at::lerp(ends.lhs[i], ends.rhs[i], weights.rhs[i]); });
  return keep_lock(ops::rebuild(*impl(), results), *this);
}

namespace {
TensorDict addc(const TensorDict& self, const TensorDict& t1, const TensorDict& t2, const c10::Scalar& value,
                bool mul, TensorDict* inplace) {
  MatchedLeaves m1, m2;
  match_leaves(self, t1, BinaryDefault(), m1);
  match_leaves(self, t2, BinaryDefault(), m2);
  const char* name = mul ? (inplace ? "addcmul_" : "addcmul") : (inplace ? "addcdiv_" : "addcdiv");
  const size_t n = m1.lhs.size();
  if (inplace) {
    if (n > 0 && foreach_inplace_safe(m1.lhs, m1.rhs) && foreach_inplace_safe(m1.lhs, m2.rhs)) {
      if (mul) at::_foreach_addcmul_(m1.lhs, m1.rhs, m2.rhs, value);
      else at::_foreach_addcdiv_(m1.lhs, m1.rhs, m2.rhs, value);
      return *inplace;
    }
    for_each_index(*self.impl(), n, name, [&](size_t i) {
      if (mul) m1.lhs[i].addcmul_(m1.rhs[i], m2.rhs[i], value);
      else m1.lhs[i].addcdiv_(m1.rhs[i], m2.rhs[i], value);
    });
    return *inplace;
  }
  LeafList results;
  if (n > 0 && !needs_autograd(m1.lhs) && !needs_autograd(m1.rhs) && !needs_autograd(m2.rhs)) {
    try {
      results = mul ? at::_foreach_addcmul(m1.lhs, m1.rhs, m2.rhs, value)
                    : at::_foreach_addcdiv(m1.lhs, m1.rhs, m2.rhs, value);
    } catch (const c10::Error&) {
      results.clear();
    }
  }
  if (results.size() != n) {
    results.assign(n, at::Tensor());
    for_each_index(*self.impl(), n, name, [&](size_t i) {
      results[i] = mul ? at::addcmul(m1.lhs[i], m1.rhs[i], m2.rhs[i], value)
                       : at::addcdiv(m1.lhs[i], m1.rhs[i], m2.rhs[i], value);
    });
  }
  return keep_lock(ops::rebuild(*self.impl(), results), self);
}
}  // namespace

TensorDict TensorDict::addcmul(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value) const {
  return addc(*this, tensor1, tensor2, value, true, nullptr);
}
TensorDict& TensorDict::addcmul_(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value) {
  addc(*this, tensor1, tensor2, value, true, this);
  return *this;
}
TensorDict TensorDict::addcdiv(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value) const {
  return addc(*this, tensor1, tensor2, value, false, nullptr);
}
TensorDict& TensorDict::addcdiv_(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value) {
  addc(*this, tensor1, tensor2, value, false, this);
  return *this;
}

// ---- Comparisons -------------------------------------------------------------------------------

namespace {

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

// Comparison results are never locked.
TensorDict unlocked(TensorDict td) { return td.is_locked() ? td.clone(/*recurse=*/false) : td; }

TensorDict compare_td(const TensorDict& a, const TensorDict& b, CmpOp op) {
  return unlocked(map_binary(
      a, b, BinaryDefault(), cmp_name(op), [&](const at::Tensor& x, const at::Tensor& y) { return compare(op, x, y); },
      [](const LeafList&, const LeafList&) { return LeafList(); }));
}

TensorDict compare_tensor(const TensorDict& td, const at::Tensor& other, CmpOp op) {
  AlignedTensor aligned(td, other, cmp_name(op));
  LeafList leaves = leaves_of(td);
  LeafList results(leaves.size());
  for_each_index(*td.impl(), leaves.size(), cmp_name(op),
                 [&](size_t i) { results[i] = compare(op, leaves[i], aligned.operand(leaves[i])); });
  return ops::rebuild(*td.impl(), results, c10::IntArrayRef(aligned.batch_size()));
}

TensorDict compare_scalar(const TensorDict& td, const c10::Scalar& other, CmpOp op) {
  LeafList leaves = leaves_of(td);
  LeafList results(leaves.size());
  ScalarOperand scalar(other);
  for_each_index(*td.impl(), leaves.size(), cmp_name(op), [&](size_t i) {
    const at::Tensor& z = scalar.for_leaf(leaves[i]);
    results[i] = z.defined() ? compare(op, leaves[i], z) : compare(op, leaves[i], other);
  });
  return ops::rebuild(*td.impl(), results);
}

bool leaf_all(const at::Tensor& t) { return t.numel() == 0 || t.all().item<bool>(); }
bool leaf_any(const at::Tensor& t) { return t.numel() > 0 && t.any().item<bool>(); }

// at::equal gives the answer of (x == y).all() without the bool tensor when shapes, dtypes and
// devices match and the two are not the same memory (at::equal may short-cut aliases to true,
// which (x == y).all() is not for NaNs).
bool leaves_equal(const at::Tensor& x, const at::Tensor& y) {
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
    MatchedLeaves m;
    m.lhs.reserve(32);
    m.rhs.reserve(32);
    match_leaves(lhs_, *rhs_td_, BinaryDefault(), m);
    for (size_t i = 0; i < m.lhs.size(); ++i) {
      bool equal;
      try {
        equal = leaves_equal(m.lhs[i], m.rhs[i]);
      } catch (const c10::Error&) {
        return to_tensordict().all();  // names the failing key
      }
      if (!equal) return false;
    }
    return true;
  }
  return to_tensordict().all();
}

bool TensorDictComparison::any() const {
  if (op_ == Op::Ne && rhs_td_) return !TensorDictComparison(Op::Eq, lhs_, *rhs_td_).all();
  return to_tensordict().any();
}

bool TensorDict::all() const {
  LeafList leaves = leaves_of(*this);
  for (const auto& t : leaves) {
    if (!leaf_all(t)) return false;
  }
  return true;
}

bool TensorDict::any() const {
  LeafList leaves = leaves_of(*this);
  for (const auto& t : leaves) {
    if (leaf_any(t)) return true;
  }
  return false;
}

TensorDict TensorDict::isnan() const {
  return unlocked(map_unary(*this, "isnan", [](const at::Tensor& t) { return at::isnan(t); }, no_foreach));
}
TensorDict TensorDict::isfinite() const {
  return unlocked(map_unary(*this, "isfinite", [](const at::Tensor& t) { return at::isfinite(t); }, no_foreach));
}
TensorDict TensorDict::isposinf() const {
  return unlocked(map_unary(*this, "isposinf", [](const at::Tensor& t) { return at::isposinf(t); }, no_foreach));
}
TensorDict TensorDict::isneginf() const {
  return unlocked(map_unary(*this, "isneginf", [](const at::Tensor& t) { return at::isneginf(t); }, no_foreach));
}
TensorDict TensorDict::isreal() const {
  return unlocked(map_unary(*this, "isreal", [](const at::Tensor& t) { return at::isreal(t); }, no_foreach));
}

// ---- Operators ---------------------------------------------------------------------------------

TensorDict operator+(const TensorDict& a, const TensorDict& b) { return a.add(b); }
TensorDict operator+(const TensorDict& a, const at::Tensor& b) { return a.add(b); }
TensorDict operator+(const TensorDict& a, const c10::Scalar& b) { return a.add(b); }
TensorDict operator+(const c10::Scalar& a, const TensorDict& b) { return b.add(a); }
TensorDict operator-(const TensorDict& a, const TensorDict& b) { return a.sub(b); }
TensorDict operator-(const TensorDict& a, const at::Tensor& b) { return a.sub(b); }
TensorDict operator-(const TensorDict& a, const c10::Scalar& b) { return a.sub(b); }
TensorDict operator-(const c10::Scalar& a, const TensorDict& b) {
  return map_unary(b, "rsub", [&](const at::Tensor& t) { return at::rsub(t, a); }, no_foreach);
}
TensorDict operator-(const TensorDict& a) { return a.neg(); }
TensorDict operator*(const TensorDict& a, const TensorDict& b) { return a.mul(b); }
TensorDict operator*(const TensorDict& a, const at::Tensor& b) { return a.mul(b); }
TensorDict operator*(const TensorDict& a, const c10::Scalar& b) { return a.mul(b); }
TensorDict operator*(const c10::Scalar& a, const TensorDict& b) { return b.mul(a); }
TensorDict operator/(const TensorDict& a, const TensorDict& b) { return a.div(b); }
TensorDict operator/(const TensorDict& a, const at::Tensor& b) { return a.div(b); }
TensorDict operator/(const TensorDict& a, const c10::Scalar& b) { return a.div(b); }
TensorDict operator/(const c10::Scalar& a, const TensorDict& b) { return b.reciprocal().mul(a); }
TensorDict& operator+=(TensorDict& a, const TensorDict& b) { return a.add_(b); }
TensorDict& operator+=(TensorDict& a, const at::Tensor& b) { return a.add_(b); }
TensorDict& operator+=(TensorDict& a, const c10::Scalar& b) { return a.add_(b); }
TensorDict& operator-=(TensorDict& a, const TensorDict& b) { return a.sub_(b); }
TensorDict& operator-=(TensorDict& a, const at::Tensor& b) { return a.sub_(b); }
TensorDict& operator-=(TensorDict& a, const c10::Scalar& b) { return a.sub_(b); }
TensorDict& operator*=(TensorDict& a, const TensorDict& b) { return a.mul_(b); }
TensorDict& operator*=(TensorDict& a, const at::Tensor& b) { return a.mul_(b); }
TensorDict& operator*=(TensorDict& a, const c10::Scalar& b) { return a.mul_(b); }
TensorDict& operator/=(TensorDict& a, const TensorDict& b) { return a.div_(b); }
TensorDict& operator/=(TensorDict& a, const at::Tensor& b) { return a.div_(b); }
TensorDict& operator/=(TensorDict& a, const c10::Scalar& b) { return a.div_(b); }

#define TENSORDICT_DEFINE_COMPARISON_OPERATOR(op, Op)                                        \
  TensorDictComparison operator op(const TensorDict& a, const TensorDict& b) {               \
    return TensorDictComparison(CmpOp::Op, a, b);                                            \
  }                                                                                          \
  TensorDictComparison operator op(const TensorDict& a, const at::Tensor& b) {               \
    return TensorDictComparison(CmpOp::Op, a, b);                                            \
  }                                                                                          \
  TensorDictComparison operator op(const TensorDict& a, const c10::Scalar& b) {              \
    return TensorDictComparison(CmpOp::Op, a, b);                                            \
  }
TENSORDICT_DEFINE_COMPARISON_OPERATOR(==, Eq)
TENSORDICT_DEFINE_COMPARISON_OPERATOR(!=, Ne)
TENSORDICT_DEFINE_COMPARISON_OPERATOR(<, Lt)
TENSORDICT_DEFINE_COMPARISON_OPERATOR(<=, Le)
TENSORDICT_DEFINE_COMPARISON_OPERATOR(>, Gt)
TENSORDICT_DEFINE_COMPARISON_OPERATOR(>=, Ge)
#undef TENSORDICT_DEFINE_COMPARISON_OPERATOR

TensorDict maximum(const TensorDict& a, const TensorDict& b) { return a.maximum(b); }
TensorDict minimum(const TensorDict& a, const TensorDict& b) { return a.minimum(b); }

}  // namespace tensordict
