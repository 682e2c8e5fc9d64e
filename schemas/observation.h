// What an RL agent observes at one step. Included by rl_transition.h. The C++ twin of
// observation.yaml: tdgen generates the same observation.td.h from either.
#pragma once

#include <cstdint>
#include <string>

#include <tensordict/schema.h>

namespace rl::schema {

/// One observation.
struct TD_TENSORCLASS Observation {
  /// Camera image, height x width x RGB.
  td::schema::Tensor<uint8_t, 84, 84, 3> pixels;
  td::schema::Tensor<float, td::schema::any_size> state;
  TD_OPTIONAL std::string label;
};

}  // namespace rl::schema
