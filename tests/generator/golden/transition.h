// Golden input: the C++ twin of transition.yaml (typed_tensordict inheritance, a nested class
// from an included schema, optional fields).
#pragma once

#include "sensors.h"

namespace golden::schema {

/// Declared after Transition, emitted before it.
struct TD_TYPED_TENSORDICT Step {
  td::schema::Tensor<double> reward;
};

struct TD_TYPED_TENSORDICT Transition : Step {
  sensors::schema::Reading obs;
  td::schema::Tensor<float, 4> action;
  TD_OPTIONAL td::schema::Tensor<bool, td::schema::any_shape> mask;
};

}  // namespace golden::schema
