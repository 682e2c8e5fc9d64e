#include "policy.h"

// The parts of the C++ frontend this file uses, not <torch/torch.h> (a third of the compile).
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

namespace rollout {

namespace {

struct PolicyNetImpl : torch::nn::Module {
  PolicyNetImpl(int64_t obs_size, int64_t num_actions)
      : hidden(register_module("hidden", torch::nn::Linear(obs_size, 32))),
        logits(register_module("logits", torch::nn::Linear(32, num_actions))) {}

  torch::Tensor forward(const torch::Tensor& obs) { return logits(torch::tanh(hidden(obs))); }

  torch::nn::Linear hidden;
  torch::nn::Linear logits;
};
TORCH_MODULE(PolicyNet);

}  // namespace

struct Agent::Impl {
  Impl(int64_t obs_size, int64_t num_actions, double learning_rate)
      : net(obs_size, num_actions), optimizer(net->parameters(), torch::optim::AdamOptions(learning_rate)) {}

  PolicyNet net;
  torch::optim::Adam optimizer;
};

Agent::Agent(int64_t obs_size, int64_t num_actions, double learning_rate)
    : impl_(std::make_unique<Impl>(obs_size, num_actions, learning_rate)) {}

Agent::~Agent() = default;

at::Tensor Agent::act(const at::Tensor& obs, at::Tensor& log_prob) {
  torch::NoGradGuard no_grad;
  torch::Tensor log_probs = torch::log_softmax(impl_->net->forward(obs), /*dim=*/-1);
  torch::Tensor action = torch::multinomial(log_probs.exp(), /*num_samples=*/1).squeeze(-1);
  log_prob = log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1);
  return action;
}

double Agent::train_step(const at::Tensor& obs, const at::Tensor& action, const at::Tensor& returns) {
  torch::Tensor advantage = (returns - returns.mean()) / (returns.std() + 1e-6);
  torch::Tensor log_probs = torch::log_softmax(impl_->net->forward(obs), /*dim=*/-1);
  torch::Tensor taken = log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1);
  torch::Tensor loss = -(taken * advantage).mean();
  impl_->optimizer.zero_grad();
  loss.backward();
  impl_->optimizer.step();
  return loss.item<double>();
}

int64_t Agent::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : impl_->net->parameters()) n += p.numel();
  return n;
}

}  // namespace rollout
