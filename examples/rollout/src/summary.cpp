#include "summary.h"

#include <iostream>

#include <ATen/ATen.h>

namespace rollout {

void print_summary(Rollout buffer, std::ostream& os) {
  os << "  batch size " << buffer.batch_size() << ", fields:";
  for (const char* name : Rollout::Traits::field_names) os << " " << name;
  os << "\n";
  os << "  obs " << buffer.obs().sizes() << ", mean reward " << buffer.reward().mean().item<double>()
     << ", episodes ended " << buffer.done().sum().item<int64_t>() << ", actions (left/coast/right) "
     << buffer.action().eq(0).sum().item<int64_t>() << "/" << buffer.action().eq(1).sum().item<int64_t>() << "/"
     << buffer.action().eq(2).sum().item<int64_t>() << "\n";
}

}  // namespace rollout
