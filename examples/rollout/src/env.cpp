#include "env.h"

#include <ATen/ATen.h>

namespace rollout {

ReachEnv::ReachEnv(int64_t num_envs, int64_t episode_length)
    : num_envs_(num_envs), episode_length_(episode_length) {
  position_ = at::zeros({num_envs_});
  velocity_ = at::zeros({num_envs_});
  target_ = at::zeros({num_envs_});
  steps_ = at::zeros({num_envs_}, at::kLong);
}

at::Tensor ReachEnv::reset() {
  reset_where(at::ones({num_envs_}, at::kBool));
  return observation();
}

void ReachEnv::reset_where(const at::Tensor& mask) {
  position_ = at::where(mask, at::rand({num_envs_}) * 2 - 1, position_);
  velocity_ = at::where(mask, at::zeros({num_envs_}), velocity_);
  target_ = at::where(mask, at::rand({num_envs_}) * 2 - 1, target_);
  steps_ = at::where(mask, at::zeros_like(steps_), steps_);
}

at::Tensor ReachEnv::observation() const {
  at::Tensor time_left = 1.0 - steps_.to(at::kFloat) / static_cast<double>(episode_length_);
  return at::stack({position_, velocity_, target_, time_left}, 1);
}

at::Tensor ReachEnv::step(const at::Tensor& action, at::Tensor& done) {
  at::Tensor force = (action - 1).to(at::kFloat) * 0.05;
  velocity_ = (velocity_ + force) * 0.9;
  position_ = (position_ + velocity_).clamp(-1.5, 1.5);
  steps_ = steps_ + 1;
  at::Tensor distance = (position_ - target_).abs();
  at::Tensor reward = -distance;
  at::Tensor reached = distance < 0.05;
  done = reached.logical_or(steps_ >= episode_length_);
  reward = reward + reached.to(at::kFloat);  // a bonus for arriving
  reset_where(done);
  return reward;
}

}  // namespace rollout
