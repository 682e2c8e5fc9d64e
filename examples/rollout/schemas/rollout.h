// The C++ twin of rollout.yaml: the same replay-buffer record as an annotated struct. Configure
// with -DROLLOUT_CPP_SCHEMA=ON to generate rollout.td.h from this header instead of the YAML.
#pragma once

#include <tensordict/schema.h>

#include "rollout_options.h"

namespace rollout::schema {

/// What the agent saw, did and got at each step; batch [steps, envs].
struct TD_TYPED_TENSORDICT Rollout {
  td::schema::Tensor<float, kObsSize> obs;  // position, velocity, target, time left
  td::schema::Tensor<int64_t> action;       // 0: push left, 1: coast, 2: push right
  td::schema::Tensor<float> log_prob;       // of the action, under the policy that acted
  td::schema::Tensor<float> reward;
  td::schema::Tensor<bool> done;
  ROLLOUT_EXTRA_FIELDS
};

}  // namespace rollout::schema
