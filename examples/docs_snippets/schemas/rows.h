// A plain-data schema (docs/schema-format.md#plain-data-structs): the struct is the row type of
// the generated class, which views and copies arrays of it (docs/typed-api.md#arrays-of-plain-structs).
// No YAML twin: a YAML schema has no C++ struct.
#pragma once

#include <array>
#include <cstdint>

#include <tensordict/schema.h>

namespace rows::schema {  // the class is generated into rows::

/// One tracked object per row.
struct TD_TYPED_TENSORDICT Pose {
  double t;                                    // float64, event shape []
  float pos[3];                                // float32, [3]
  std::array<std::array<int32_t, 2>, 2> cell;  // int32, [2, 2]
  bool valid;                                  // bool, []
  TD_CPP_NAME("object_id") int64_t id;         // stored key "id", accessor object_id()
  TD_OPTIONAL float weight = 1.0f;             // optional: the initializer is its default
};

}  // namespace rows::schema
