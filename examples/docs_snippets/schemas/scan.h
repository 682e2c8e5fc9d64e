// The C++ twin of scan.yaml (docs/schema-format.md#beyond-pythons-schemas).
#pragma once

#include <cstdint>
#include <string>

#include <tensordict/schema.h>

namespace scan::schema {

/// A lidar scan whose fields agree on the number of points N.
struct TD_TENSORCLASS Scan {
  TD_DIM(N);  // a named dim: every field written with N has the same size there
  td::schema::Tensor<float, N, 3> points;
  TD_CPP_NAME("point_index") td::schema::Tensor<int64_t, N> index;  // stored key "index"
  TD_OPTIONAL td::schema::Tensor<bool, N> valid = true;             // fill value when not given
  TD_OPTIONAL std::string source = "lidar";
};

struct TD_TYPED_TENSORDICT TD_FROZEN Calibration {  // locked once constructed
  td::schema::Tensor<double, 4, 4> matrix;
};

}  // namespace scan::schema
