#pragma once
// A tensor over another's storage with its own sizes, strides and offset: what as_strided makes,
// built directly. Thirty as_strided calls (the dispatcher, then the autograd view bookkeeping for
// tensors that need none) cost more than one kernel over a small packed storage; this is a fifth
// of that. Tensors autograd or inference mode track take as_strided.

#include <utility>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>

namespace tensordict {
namespace detail {

inline at::Tensor strided_view(const at::Tensor& like, c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t offset) {
  if (like.requires_grad() || like.is_inference()) return like.as_strided(sizes, strides, offset);
  // The VIEW constructor takes the key set as it is (it is `like`'s, already final): the other one
  // derives it again, reading thread-local dispatch state.
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(like.storage()), like.key_set(),
                                                   like.dtype());
  impl->set_sizes_and_strides(sizes, strides);
  impl->set_storage_offset(offset);
  return at::Tensor(std::move(impl));
}

/// Whether `strides` are the standard ones of `sizes` (row-major, contiguous), on dims of size 1
/// too: what LibTorch gives a new tensor of these sizes.
inline bool has_standard_strides(c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

}  // namespace detail
}  // namespace tensordict
