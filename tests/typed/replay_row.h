#pragma once
// One row of schemas/replay.yaml's Transition, shared by the typed tests over every backend.

#include <string>

#include <ATen/ATen.h>

#include "replay.td.h"

namespace typed_test {

/// One row (batch size []) whose fields hold `v`, with the note `info`; done when v > 5.
inline replay::Transition replay_row(float v, const std::string& info) {
  replay::Observation obs({{"camera", at::full({3, 8, 8}, static_cast<int64_t>(v), at::kByte)},
                           {"proprio", at::full({12}, v)},
                           {"info", info}});
  return replay::Transition({{"obs", obs},  // a typed object given directly
                             {"action", at::full({6}, v)},
                             {"reward", at::scalar_tensor(v)},
                             {"done", at::scalar_tensor(v > 5, at::kBool)}});
}

}  // namespace typed_test
