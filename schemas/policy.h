// A policy's input and output (docs/nn.md, tests/nn/typed_module_test.cpp): what it observes
// and what it writes back into the batch. The C++ twin of policy.yaml.
#pragma once

#include <tensordict/schema.h>

namespace policy::schema {

/// What the policy reads.
struct TD_TENSORCLASS Observation {
  td::schema::Tensor<float, 4> state;  ///< Position (2) and velocity (2) of a point mass.
};

/// What the policy writes.
struct TD_TENSORCLASS Action {
  td::schema::Tensor<float, 2> action;
  td::schema::Tensor<float> value;
};

/// One step of a rollout of the deployed policy (examples/deploy_policy).
struct TD_TYPED_TENSORDICT Step {
  Observation obs;
  td::schema::Tensor<float, 2> action;
  td::schema::Tensor<float> value;
  td::schema::Tensor<float> reward;
};

}  // namespace policy::schema
