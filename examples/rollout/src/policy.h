#pragma once
// The agent: a small torch::nn policy and its optimiser. The header only shows ATen tensors, so
// the code using the generated rollout class does not compile <torch/torch.h>.

#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>

namespace rollout {

class Agent {
 public:
  Agent(int64_t obs_size, int64_t num_actions, double learning_rate);
  ~Agent();

  /// Samples one action per row of `obs` [n, obs_size]; returns int64 [n] and writes the
  /// actions' log-probabilities (float [n]) to `log_prob`. No gradient is recorded.
  at::Tensor act(const at::Tensor& obs, at::Tensor& log_prob);
  /// One REINFORCE step on a batch of (obs, action, return) records, flattened; returns the loss.
  double train_step(const at::Tensor& obs, const at::Tensor& action, const at::Tensor& returns);
  int64_t num_parameters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rollout
