#pragma once
// Comparisons of contiguous CPU tensors by a plain loop (ops/compare_kernel.cpp). LibTorch 1.13
// compares into bools one strided element at a time (`at::gt` of 30k floats: 23 us, against
// 5 us for `at::add`), and `at::equal` the same way; a contiguous loop the compiler vectorizes
// does either in a few microseconds. Each function returns nothing where it does not apply (other
// devices, dtypes or layouts, or a scalar that LibTorch would promote), and the caller then uses
// the `at::` op: the results are the same either way, NaNs included.

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

}  // namespace ops
}  // namespace tensordict
