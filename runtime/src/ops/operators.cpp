// The arithmetic and comparison operators of tensordict/ops.h, spelled over the member functions.

#include <ATen/ATen.h>

#include <tensordict/ops.h>

#include "ops/pointwise.h"

namespace tensordict {

using namespace ops;
using CmpOp = TensorDictComparison::Op;

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

}  // namespace tensordict
