#pragma once
// What ops_bench's two files share: the floor's container of bench/ops.md's fixtures (named
// groups of named tensors, what a user writing the ops by hand keeps instead of a tensordict)
// and the registration of fixture B's I/O ops (ops_bench_io.cpp) by main (ops_bench.cpp).

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ops_bench {

constexpr int kGroups = 3;   // "g0".."g2"
constexpr int kLeaves = 10;  // "x0".."x9" in each group

struct Group {
  std::string name;
  std::vector<std::pair<std::string, at::Tensor>> leaves;
};
using Groups = std::vector<Group>;

/// Registers fixture B's I/O ops (ops_bench_io.cpp); fixture B is built on first use.
void register_io_ops();

}  // namespace ops_bench
