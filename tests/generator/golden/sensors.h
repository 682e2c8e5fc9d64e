// Golden input: the C++ twin of sensors.yaml (a tensorclass with every kind of field).
#pragma once

#include <cstdint>
#include <string>

#include <tensordict/schema.h>

namespace golden::sensors::schema {

/// One sensor reading.
struct TD_TENSORCLASS Reading {
  /// An RGB image.
  td::schema::Tensor<uint8_t, 8, 8, 3> image;
  td::schema::Tensor<float, td::schema::any_size> samples;
  td::schema::AnyTensor anything;
  std::string unit;
  TD_OPTIONAL int64_t channel;
  TD_OPTIONAL double gain;
  TD_OPTIONAL bool enabled;
};

}  // namespace golden::sensors::schema
