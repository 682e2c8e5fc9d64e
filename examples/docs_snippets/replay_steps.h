#pragma once
// What the replay-buffer snippets (replay_buffer*.cpp) fill their buffers with: one environment
// step of schemas/replay.yaml's Transition, as a simulator would hand it over.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

#include "replay.td.h"

namespace replay_snippets {

/// `name` in a new temporary directory, so every run starts afresh.
inline std::string fresh_path(const std::string& name) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "replay_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl + "/" + name;
}

/// Step `t` (batch size []): its reward is t, its note "walk" on odd steps and "run" on even ones.
inline replay::Transition env_step(int64_t t) {
  replay::Observation obs({{"camera", at::randint(0, 255, {3, 8, 8}, at::kByte)},
                           {"proprio", at::randn({12})},
                           {"info", t % 2 ? "walk" : "run"}});
  return replay::Transition({{"obs", obs},  // a typed object goes in directly
                             {"action", at::randn({6})},
                             {"reward", at::scalar_tensor(static_cast<float>(t))},
                             {"done", at::scalar_tensor(t % 5 == 4, at::kBool)}});
}

}  // namespace replay_snippets
