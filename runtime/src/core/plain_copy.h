#pragma once
// Note [Plain copies]: `at::stack`, `at::cat`, `clone()`, `to()`, `copy_` and `zero_` of small
// CPU tensors cost far more in the dispatcher than in the copy. One `at::stack` of 16 [64, 16]
// floats runs about 27,000 instructions (the autograd layer, `cat`'s meta function over every
// part, its result-type pass, the output's allocation, a `view`), of which copying the bytes
// takes about a quarter; `leaf.narrow(0, 0, 8).copy_(value)` makes a view, then a
// TensorIterator. A tensordict makes one such call a leaf. For tensors LibTorch copies plainly
// (dense CPU tensors of one dtype, standard contiguous, with no autograd, names, lazy conjugate
// or negative bits, Python or other TensorImpls), the result is the one LibTorch gives (a new
// contiguous tensor of that dtype and the sizes), or the bytes it writes in place, made here with
// `memcpy`/`memset` (a `static_cast` an element between float and double); an in-place write
// bumps the version as the op would. Anything else, and copies LibTorch would split over threads
// (GRAIN_SIZE elements or more, with more than one thread, outside a parallel region), is left
// to LibTorch.

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace tensordict {
namespace detail {

/// `at::stack(parts, dim)` (`stack`) or `at::cat(parts, dim)`, `dim` already wrapped, copied as
/// Note [Plain copies] says; an undefined tensor where the parts are not all such, or their
/// sizes do not join: the caller then calls LibTorch, whose result or error stands.
at::Tensor join_by_copy(at::TensorList parts, int64_t dim, bool stack);

/// `at::stack(parts, dim)`, by join_by_copy where it applies.
at::Tensor stack_tensors(at::TensorList parts, int64_t dim);

/// `t.clone()`, copied as Note [Plain copies] says where `t` is such a tensor (its strides the
/// standard ones, which clone() keeps).
at::Tensor clone_tensor(const at::Tensor& t);

/// `t.to(dtype)`, converted here between float and double (each element's `static_cast`, the
/// conversion LibTorch's own kernel makes, IEEE round-to-nearest) where `t` is such a tensor
/// with the standard strides (which `to` keeps); every other pair of dtypes, and `t` of `dtype`
/// already (returned as it is), are LibTorch's.
at::Tensor convert_tensor(const at::Tensor& t, at::ScalarType dtype);

/// `leaf.narrow(0, start, rows).copy_(value)`, or `leaf.select(0, start).copy_(value)` where
/// `drop_dim` (then `rows` is 1), written with `memcpy` where the leaf and `value` are such
/// tensors of one dtype, `value` has the rows' shape (no broadcast) and another storage, and the
/// thread's state lets copy_ bump the leaf's version (which this does). False, nothing written,
/// otherwise: the caller then calls copy_.
bool copy_rows_into(const at::Tensor& leaf, int64_t start, int64_t rows, bool drop_dim, const at::Tensor& value);

/// `bytes.narrow(0, offset, n).view(value.dtype()).view(value.sizes()).copy_(value)` for the
/// byte tensor `bytes` (1-D, kByte) and the `n` bytes of `value`: `value`'s bytes written at
/// `offset` with `memcpy` where `value` is such a tensor and `bytes` a plain CPU one, and
/// `bytes`' version bumped as that copy_ would. False, nothing written, otherwise.
bool copy_bytes_into(const at::Tensor& bytes, int64_t offset, const at::Tensor& value);

/// `t.zero_()` with `memset` (every dtype's zero is all bits clear) where `t` is such a tensor
/// and the thread's state lets zero_ bump its version (which this does); false, nothing written,
/// otherwise.
bool zero_plain(const at::Tensor& t);

/// `dest.copy_(value)` for a `value` of dest's shape, as copy_rows_into writes rows (every row);
/// false, nothing written, where it would not (a 0-dim `dest` included).
inline bool copy_into(const at::Tensor& dest, const at::Tensor& value) {
  return dest.defined() && dest.dim() > 0 && copy_rows_into(dest, 0, dest.size(0), false, value);
}

/// `dest.copy_(value)`: copy_into where it writes, LibTorch's copy_ otherwise.
inline void copy_leaf_(const at::Tensor& dest, const at::Tensor& value) {
  if (!copy_into(dest, value)) dest.copy_(value);
}

}  // namespace detail
}  // namespace tensordict
