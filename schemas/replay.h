// A typed replay buffer's row (docs/replay-buffer.md): a transition whose observation carries a
// camera image, proprioception and an optional per-row note. The C++ twin of replay.yaml.
#pragma once

#include <cstdint>
#include <string>

#include <tensordict/schema.h>

namespace replay::schema {

/// What the robot senses at one step.
struct TD_TENSORCLASS Observation {
  td::schema::Tensor<uint8_t, 3, 8, 8> camera;  ///< RGB image, channels first.
  td::schema::Tensor<float, 12> proprio;        ///< Joint positions and velocities.
  TD_OPTIONAL std::string info;                 ///< A note per row (the episode's task, say).
};

/// One environment step as the buffer stores it.
struct TD_TYPED_TENSORDICT Transition {
  Observation obs;
  td::schema::Tensor<float, 6> action;
  td::schema::Tensor<float> reward;
  td::schema::Tensor<bool> done;
};

}  // namespace replay::schema
