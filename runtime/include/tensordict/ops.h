#pragma once
// Free functions and operators over tensordicts: arithmetic operators, comparisons, where,
// maximum / minimum. The member forms live in tensor_dict.h; these follow LibTorch's spelling
// (`at::where(cond, a, b)`, `a + b`, `a == b`).

#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>

#include <tensordict/tensor_dict.h>

namespace tensordict {

// ---- Queries over the leaves (Python's properties dtype, depth and grad) ----------------------
// Free functions: as members they would take the names from schemas' fields (a depth image).

/// The dtype every tensor leaf shares; nullopt when they differ or there is none.
std::optional<at::ScalarType> dtype(const TensorDict& td);
/// The deepest level holding a leaf: 0 when no nested tensordict holds one.
int64_t depth(const TensorDict& td);
/// The leaves' gradients (leaves without one left out, non-tensor data kept; locked when `td`
/// is); nullopt when nothing is left (Python's None).
std::optional<TensorDict> grad(const TensorDict& td);

// ---- Arithmetic operators ------------------------------------------------------------------

TensorDict operator+(const TensorDict& a, const TensorDict& b);
TensorDict operator+(const TensorDict& a, const at::Tensor& b);
TensorDict operator+(const TensorDict& a, const c10::Scalar& b);
TensorDict operator+(const c10::Scalar& a, const TensorDict& b);
TensorDict operator-(const TensorDict& a, const TensorDict& b);
TensorDict operator-(const TensorDict& a, const at::Tensor& b);
TensorDict operator-(const TensorDict& a, const c10::Scalar& b);
/// `s - td`: every leaf subtracted from `s`.
TensorDict operator-(const c10::Scalar& a, const TensorDict& b);
TensorDict operator-(const TensorDict& a);
TensorDict operator*(const TensorDict& a, const TensorDict& b);
TensorDict operator*(const TensorDict& a, const at::Tensor& b);
TensorDict operator*(const TensorDict& a, const c10::Scalar& b);
TensorDict operator*(const c10::Scalar& a, const TensorDict& b);
TensorDict operator/(const TensorDict& a, const TensorDict& b);
TensorDict operator/(const TensorDict& a, const at::Tensor& b);
TensorDict operator/(const TensorDict& a, const c10::Scalar& b);
/// `s / td` = `td.reciprocal() * s`, as Python computes it.
TensorDict operator/(const c10::Scalar& a, const TensorDict& b);
TensorDict& operator+=(TensorDict& a, const TensorDict& b);
TensorDict& operator+=(TensorDict& a, const at::Tensor& b);
TensorDict& operator+=(TensorDict& a, const c10::Scalar& b);
TensorDict& operator-=(TensorDict& a, const TensorDict& b);
TensorDict& operator-=(TensorDict& a, const at::Tensor& b);
TensorDict& operator-=(TensorDict& a, const c10::Scalar& b);
TensorDict& operator*=(TensorDict& a, const TensorDict& b);
TensorDict& operator*=(TensorDict& a, const at::Tensor& b);
TensorDict& operator*=(TensorDict& a, const c10::Scalar& b);
TensorDict& operator/=(TensorDict& a, const TensorDict& b);
TensorDict& operator/=(TensorDict& a, const at::Tensor& b);
TensorDict& operator/=(TensorDict& a, const c10::Scalar& b);

// ---- Comparisons ------------------------------------------------------------------------------

/// The result of `a == b` (and the other comparison operators): converts to the tensordict of
/// bools Python returns, and answers `all()` / `any()` directly. `(a == b).all()` compares each
/// pair of leaves with at::equal when shapes and dtypes match (same NaN semantics), without
/// building the intermediate tensordict.
class TensorDictComparison {
 public:
  enum class Op : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };

  TensorDictComparison(Op op, TensorDict lhs, TensorDict rhs) : op_(op), lhs_(std::move(lhs)), rhs_td_(std::move(rhs)) {}
  TensorDictComparison(Op op, TensorDict lhs, at::Tensor rhs) : op_(op), lhs_(std::move(lhs)), rhs_tensor_(std::move(rhs)) {}
  TensorDictComparison(Op op, TensorDict lhs, c10::Scalar rhs) : op_(op), lhs_(std::move(lhs)), rhs_scalar_(rhs) {}

  /// The tensordict of bools.
  TensorDict to_tensordict() const;
  operator TensorDict() const { return to_tensordict(); }
  /// True when the comparison holds for every element of every leaf (for at least one).
  bool all() const;
  bool any() const;
  /// With a batch dim: the tensordict of bools reduced there.
  TensorDict all(int64_t dim) const { return to_tensordict().all(dim); }
  TensorDict any(int64_t dim) const { return to_tensordict().any(dim); }

 private:
  Op op_;
  TensorDict lhs_;
  std::optional<TensorDict> rhs_td_;
  at::Tensor rhs_tensor_;
  std::optional<c10::Scalar> rhs_scalar_;
};

#define TENSORDICT_DECLARE_COMPARISON(op)                                     \
  TensorDictComparison operator op(const TensorDict& a, const TensorDict& b); \
  TensorDictComparison operator op(const TensorDict& a, const at::Tensor& b); \
  TensorDictComparison operator op(const TensorDict& a, const c10::Scalar& b);
TENSORDICT_DECLARE_COMPARISON(==)
TENSORDICT_DECLARE_COMPARISON(!=)
TENSORDICT_DECLARE_COMPARISON(<)
TENSORDICT_DECLARE_COMPARISON(<=)
TENSORDICT_DECLARE_COMPARISON(>)
TENSORDICT_DECLARE_COMPARISON(>=)
#undef TENSORDICT_DECLARE_COMPARISON

// ---- Free functions ------------------------------------------------------------------------------

/// `condition ? input : other` leaf by leaf; `condition` covers leading batch dims and is
/// expanded to the right. A key missing from `other` is a KeyError unless `pad` is given.
TensorDict where(const at::Tensor& condition, const TensorDict& input, const TensorDict& other,
                 const std::optional<c10::Scalar>& pad = std::nullopt);
TensorDict where(const at::Tensor& condition, const TensorDict& input, const c10::Scalar& other);
/// Elementwise maximum / minimum of two tensordicts with the same keys.
TensorDict maximum(const TensorDict& a, const TensorDict& b);
TensorDict minimum(const TensorDict& a, const TensorDict& b);

}  // namespace tensordict
