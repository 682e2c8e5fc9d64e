// An RL transition: what a replay buffer stores per environment step. The C++ twin of
// rl_transition.yaml.
#pragma once

#include "observation.h"

namespace rl::schema {

/// What every environment step records.
struct TD_TYPED_TENSORDICT Step {
  td::schema::Tensor<bool> done;
  td::schema::Tensor<int64_t> step_count;
};

/// A step with the observation, the action taken and the reward received.
/// Usable wherever a Step is expected.
struct TD_TYPED_TENSORDICT Transition : Step {
  Observation obs;
  td::schema::Tensor<float, 4> action;
  td::schema::Tensor<float> reward;
  TD_OPTIONAL td::schema::Tensor<bool, td::schema::any_shape> mask;
};

}  // namespace rl::schema
