// examples/rollout/src/summary.cpp as a user would change it after adding the field
// `advantage: {dtype: float32, shape: [], optional: true}` to schemas/rollout.yaml: the
// installed-package test (installed_package_test.sh) swaps it in and rebuilds.
#include "summary.h"

#include <cmath>
#include <iostream>

#include <ATen/ATen.h>

namespace rollout {

void print_summary(Rollout buffer, std::ostream& os) {
  os << "  batch size " << buffer.batch_size() << ", fields:";
  for (const char* name : Rollout::Traits::field_names) os << " " << name;
  os << "\n";
  // The new optional field: absent until set, then typed like any other.
  if (!buffer.has_advantage()) buffer.set_advantage(buffer.reward() - buffer.reward().mean());
  const double mean = buffer.advantage().mean().item<double>();
  os << "  advantage " << buffer.advantage().sizes() << ", centred " << std::boolalpha << (std::abs(mean) < 1e-5)
     << "\n";
}

}  // namespace rollout
