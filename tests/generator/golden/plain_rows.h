// Golden input without a YAML twin: plain-data structs (docs/schema-format.md), whose generated
// classes have Row, struct_layout, from_struct_array and to_struct_array. The golden output is
// generated with -I tests/generator, so the header includes "golden/plain_rows.h".
#pragma once

#include <array>
#include <cstdint>

#include <tensordict/schema.h>

namespace golden::plain::schema {

/// One row per tracked object.
struct TD_TYPED_TENSORDICT Track {
  double stamp;
  float pos[3];                                ///< Position.
  std::array<std::array<int32_t, 2>, 2> cell;  ///< A 2x2 block.
  TD_CPP_NAME("track_id") int64_t id;
  TD_OPTIONAL bool valid = true;
  uint8_t flags = 1;  // required: the initializer is the struct's, not a schema default
};

struct TD_TENSORCLASS TD_FROZEN Tap {
  int8_t taps[2][4];
  int16_t code;
};

}  // namespace golden::plain::schema
