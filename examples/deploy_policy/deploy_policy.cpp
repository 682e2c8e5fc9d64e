// Deploying a policy trained in Python (train_policy.py, saved with torch.jit.save) from C++:
// an environment loop whose observations are a generated class (schemas/policy.yaml), actions
// written into the batch by the TorchScript policy wrapped as a TensorDictModule, and the rollout
// stored as a memory-mapped directory that Python reads back (check_rollout.py).
//
// Usage: deploy_policy POLICY.pt OUT_DIR   (writes OUT_DIR/rollout)
#include <exception>
#include <iostream>
#include <string>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <tensordict/nn/script.h>

#include "policy.td.h"

namespace td = tensordict;
namespace nn = tensordict::nn;

namespace {

// N point masses on a plane: state = (position 2, velocity 2); an action accelerates them.
struct PointMasses {
  at::Tensor state;
  explicit PointMasses(int64_t n) : state(at::randn({n, 4})) {}
  policy::Observation observe() const { return policy::Observation({{"state", state.clone()}}, {state.size(0)}); }
  at::Tensor step(const at::Tensor& action) {
    at::Tensor velocity = state.slice(1, 2, 4) + 0.1 * action;
    at::Tensor position = state.slice(1, 0, 2) + 0.1 * velocity;
    state = at::cat({position, velocity}, 1);
    return -position.pow(2).sum(-1);  // reward: closer to the origin is better
  }
};

}  // namespace

int run(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: deploy_policy POLICY.pt OUT_DIR\n";
    return 2;
  }
  const int64_t steps = 60, envs = 16;
  torch::manual_seed(0);
  torch::NoGradGuard acting;  // no autograd graph while acting

  nn::ScriptOptions options;
  options.inputs = nn::ScriptInputs::Dict;  // forward(Dict[str, Tensor]): {"obs.state": ...}
  auto policy = nn::load_script_module(argv[1], nn::Keys{{"obs", "state"}}, nn::Keys{"action", "value"}, options);

  policy::Step rollout = policy::Step::memmap_like({steps, envs}, std::string(argv[2]) + "/rollout");
  PointMasses env(envs);
  for (int64_t t = 0; t < steps; ++t) {
    // The observation now; the policy and the environment fill the other fields below.
    policy::Step step = policy::Step::from_tensordict(td::TensorDict({{"obs", env.observe()}}, {envs}), false);
    (*policy)(step);  // writes step["action"] and step["value"]
    step.set_reward(env.step(step.action()));
    rollout.index_put_({t}, step);  // row t of the memory-mapped rollout
  }
  std::cout << "deploy_policy: " << steps << " steps x " << envs << " envs, mean reward "
            << rollout.reward()[0].mean().item<float>() << " -> " << rollout.reward()[steps - 1].mean().item<float>()
            << "\n";
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a missing policy file, an existing rollout: say which
    std::cerr << "deploy_policy: " << e.what() << "\n";
    return 1;
  }
}
