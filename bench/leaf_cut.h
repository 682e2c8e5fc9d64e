#pragma once
// What a careful user writes to use one `at::` call over a consolidated storage by hand: the flat
// result cut back into the leaves' shapes (split_with_sizes, view). bench/packed_bench.cpp and
// bench/cuda_packed.cpp time it as the "views" floor.

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

class LeafCut {
 public:
  LeafCut() = default;
  explicit LeafCut(const std::vector<at::Tensor>& leaves) {
    for (const at::Tensor& t : leaves) {
      numels_.push_back(t.numel());
      shapes_.push_back(t.sizes().vec());
    }
  }

  std::vector<at::Tensor> operator()(const at::Tensor& flat) const {
    std::vector<at::Tensor> parts = flat.split_with_sizes(numels_);
    for (size_t i = 0; i < parts.size(); ++i) parts[i] = parts[i].view(shapes_[i]);
    return parts;
  }

 private:
  std::vector<int64_t> numels_;
  std::vector<std::vector<int64_t>> shapes_;
};
