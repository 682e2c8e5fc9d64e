#pragma once
// A toy batched environment: each of `num_envs` carts on a line must reach its target.
// Observation [num_envs, 4]: position, velocity, target, fraction of the episode left.

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace rollout {

class ReachEnv {
 public:
  static constexpr int64_t kObsSize = 4;
  static constexpr int64_t kNumActions = 3;

  ReachEnv(int64_t num_envs, int64_t episode_length);

  /// Starts new episodes in every environment; returns the observations.
  at::Tensor reset();
  /// Applies `action` (int64 [num_envs]); returns the reward of each env and sets `done`.
  /// Finished environments are reset, so `observation()` is always a live state.
  at::Tensor step(const at::Tensor& action, at::Tensor& done);
  at::Tensor observation() const;

 private:
  void reset_where(const at::Tensor& mask);

  int64_t num_envs_;
  int64_t episode_length_;
  at::Tensor position_, velocity_, target_, steps_;
};

}  // namespace rollout
