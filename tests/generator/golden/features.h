// Golden input: the C++ twin of features.yaml (accessor names, defaults, named dims, frozen).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include <tensordict/schema.h>

namespace golden::features::schema {

/// A point cloud whose fields agree on the number of points N.
struct TD_TENSORCLASS Cloud {
  TD_DIM(N);
  TD_OPTIONAL td::schema::Tensor<float, N, 3> points;
  TD_OPTIONAL td::schema::Tensor<bool, N> mask = true;
  /// Stored under the key "index".
  TD_OPTIONAL TD_CPP_NAME("point_index") td::schema::Tensor<int64_t, N> index;
  TD_OPTIONAL TD_CPP_NAME("label") std::string keys = "cloud";
  TD_OPTIONAL td::schema::Tensor<float> weight = 0.5;
  TD_OPTIONAL double scale = 2;
  TD_OPTIONAL int64_t count = -3;
  TD_OPTIONAL bool valid = false;
  TD_OPTIONAL td::schema::Tensor<double, N, N> gram;
};

/// A camera frame, locked once built.
struct TD_TYPED_TENSORDICT TD_FROZEN Frame {
  TD_DIM(H);
  TD_DIM(W);
  td::schema::Tensor<uint8_t, H, W, 3> image;
  TD_OPTIONAL td::schema::Tensor<float, H, W> depth = -std::numeric_limits<float>::infinity();
};

struct TD_TYPED_TENSORDICT StereoFrame : Frame {
  td::schema::Tensor<uint8_t, H, W, 3> right;
};

}  // namespace golden::features::schema
