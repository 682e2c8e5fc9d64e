// The C++ twin of game.yaml (docs/schema-format.md shows it): tdgen generates the same game.td.h
// from either.
#pragma once

#include <cstdint>
#include <string>

#include <tensordict/schema.h>

namespace game::schema {  // the classes are generated into game::

/// What every step records.
struct TD_TYPED_TENSORDICT Step {
  td::schema::Tensor<bool> done;  // a scalar per batch element: event shape []
};

/// One environment step of a batch of games.
struct TD_TYPED_TENSORDICT Transition : Step {  // extends Step
  td::schema::Tensor<float, td::schema::any_size> state;  // [-1]: one dim of any size
  td::schema::Tensor<int64_t> action;
  td::schema::Tensor<float> reward;
  TD_OPTIONAL td::schema::Tensor<float> value;
};

/// A rendered frame and the level it comes from.
struct TD_TENSORCLASS Frame {
  td::schema::Tensor<uint8_t, 64, 64, 3> pixels;
  std::string level;                // non-tensor fields: tensorclasses only
  TD_OPTIONAL int64_t score;
};

}  // namespace game::schema
