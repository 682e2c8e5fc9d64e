#pragma once
// Comparisons, value tests and all/any of contiguous CPU tensors by a plain loop
// (ops/compare_kernel.cpp). LibTorch 1.13 runs whatever writes or reads bools one strided element
// at a time (on 30k floats: `at::gt` 22 us, `at::isnan` 29, `at::isfinite` 65, `all()` of 30k
// bools 35, against 5 us for `at::add`), and `at::equal` the same way; a contiguous loop the
// compiler vectorizes does each in a few microseconds. Each function returns nothing where it does not apply (other
// devices, dtypes or layouts, or a scalar that LibTorch would promote), and the caller then uses
// the `at::` op: the results are the same either way, NaNs included.

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <tensordict/ops.h>

namespace tensordict {
namespace ops {

using CompareOp = TensorDictComparison::Op;

/// `a <op> b` as a new bool tensor, for two contiguous CPU tensors of one shape and dtype (a
/// floating, integral or bool dtype); undefined where that does not apply.
at::Tensor compare_contiguous(CompareOp op, const at::Tensor& a, const at::Tensor& b);
/// `a <op> b` for a scalar `b` that LibTorch compares in `a`'s dtype (any real scalar against a
/// floating tensor, an integer within range against an integral one); undefined otherwise.
at::Tensor compare_contiguous(CompareOp op, const at::Tensor& a, const c10::Scalar& b);
/// `(a == b).all()` under the same conditions as the tensor form; nullopt where it does not apply.
std::optional<bool> equal_contiguous(const at::Tensor& a, const at::Tensor& b);

enum class ValueTest : uint8_t { IsNan, IsFinite, IsPosInf, IsNegInf };
/// `at::isnan(a)` (...) as a new bool tensor, for a contiguous float or double CPU tensor;
/// undefined otherwise.
at::Tensor test_contiguous(ValueTest test, const at::Tensor& a);
/// `a.all()` / `a.any()` (every / some element nonzero; NaN counts as nonzero) for a contiguous
/// CPU tensor of a dtype the loops take; nullopt otherwise.
std::optional<bool> all_contiguous(const at::Tensor& a);
std::optional<bool> any_contiguous(const at::Tensor& a);

}  // namespace ops
}  // namespace tensordict
