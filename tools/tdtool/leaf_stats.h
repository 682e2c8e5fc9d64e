#pragma once
// Sum, min and max of a real-valued tensor in one pass over its bytes (tdtool info --stats).

#include <ATen/core/Tensor.h>

struct LeafStats {
  double sum = 0;
  double min = 0;
  double max = 0;
};

/// `t` must be non-empty and real (bool counts as 0/1). The sum accumulates in double.
LeafStats leaf_stats(const at::Tensor& t);
