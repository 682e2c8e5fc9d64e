#pragma once
// What the tests of Note [Plain copies] share: tensors of every dtype and of shapes with empty and
// size-one dims, a dual level, and a small tree of float, int64 and bool leaves.

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/forward_grad.h>

#include <tensordict/tensor_dict.h>

namespace plain_copy_fixtures {

inline at::Tensor random_of(c10::IntArrayRef sizes, at::ScalarType dtype) {
  if (dtype == at::kBool) return at::randint(0, 2, sizes).to(at::kBool);
  if (at::isIntegralType(dtype, /*includeBool=*/false)) return at::randint(-100, 100, sizes).to(dtype);
  if (at::isComplexType(dtype)) return at::randn(sizes, at::TensorOptions().dtype(dtype));
  return at::randn(sizes).to(dtype);
}

inline const std::vector<at::ScalarType> kDtypes{at::kFloat, at::kDouble, at::kLong,        at::kChar,
                                                 at::kBool,  at::kHalf,   at::kComplexFloat};

// Shapes with empty and size-one dims, and the 4-D and 5-D ones whose strides a memory format
// could read otherwise.
inline const std::vector<std::vector<int64_t>> kShapes{
    {},           {3},          {4, 5},       {2, 3, 4},    {0, 3},       {3, 0},       {5, 1},       {1, 1},
    {2, 1, 3, 1}, {3, 1, 1, 1}, {1, 1, 1, 1}, {2, 3, 1, 1}, {1, 3, 4, 5}, {2, 3, 4, 5}, {2, 1, 2, 2, 1},
    {2, 3, 4, 5, 6}, {1, 2, 1, 1, 1}};

// A forward-AD dual level, open while it lives.
struct DualLevel {
  const uint64_t index = torch::autograd::ForwardADLevel::get_next_idx();
  ~DualLevel() { torch::autograd::ForwardADLevel::release_idx(index); }
};

inline tensordict::TensorDict tree(double shift) {
  tensordict::TensorDict td({}, {4});
  td.set("a", at::randn({4, 3}) + shift);
  td.set({"n", "b"}, at::randint(0, 9, {4, 2, 2}));
  td.set({"n", "c"}, at::rand({4}) > 0.5);
  return td;
}

}  // namespace plain_copy_fixtures
