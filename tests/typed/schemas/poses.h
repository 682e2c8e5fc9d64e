// Plain-data schema structs (docs/schema-format.md, "Plain-data structs"): every field is a
// number, a bool or a fixed-size array of them, so the generated classes read and write arrays of
// these structs (T::from_struct_array, to_struct_array). The structs are ordinary C++: the test
// fills std::vectors of them.
#pragma once

#include <array>
#include <cstdint>

#include <tensordict/schema.h>

namespace poses::schema {

/// A tracked object's pose, one row per object.
struct TD_TYPED_TENSORDICT Pose {
  double t;                                    ///< Timestamp.
  float pos[3];                                ///< Position: event shape [3].
  std::array<std::array<int32_t, 2>, 2> cell;  ///< A 2x2 block of grid cells.
  bool valid;
  TD_CPP_NAME("object_id") int64_t id;  // stored key "id", accessor object_id()
  TD_OPTIONAL float weight = 0.5f;      // optional: its initializer is the default
  uint8_t flags = 3;                    // required: the initializer only initializes rows
};

/// A tensorclass of plain rows, locked once built.
struct TD_TENSORCLASS TD_FROZEN Sample {
  int16_t code;
  int8_t taps[2][4];
};

}  // namespace poses::schema
