#pragma once
// Whether two tensors are the same view of the same memory: what tests of code that makes views
// another way than LibTorch's own call (consolidate's, detach's) compare leaf by leaf.

#include <ATen/core/Tensor.h>

#include "support/catch_torch.h"

namespace testing_support {

inline void check_same_view(const at::Tensor& got, const at::Tensor& expected) {
  CHECK(got.data_ptr() == expected.data_ptr());
  CHECK(got.sizes() == expected.sizes());
  CHECK(got.strides() == expected.strides());
  CHECK(got.dtype() == expected.dtype());
  CHECK(got.storage_offset() == expected.storage_offset());
  CHECK(got.is_view() == expected.is_view());
  CHECK(got.requires_grad() == expected.requires_grad());
}

}  // namespace testing_support
