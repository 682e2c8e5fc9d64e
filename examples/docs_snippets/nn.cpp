// docs/nn.md: the snippets, verbatim, in order, run by CTest (docs_snippet_nn). What the
// comments state is checked after each block.
#include <cstdlib>
#include <iostream>

#include <ATen/ATen.h>
#include <tensordict/module.h>
#include <tensordict/tensordict.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <tensordict/nn/params.h>
#include <tensordict/nn/sequential.h>
#include <tensordict/nn/typed_module.h>

#include "policy.td.h"

namespace td = tensordict;
namespace nn = tensordict::nn;
using nn::Keys;

namespace {
void expect(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "docs/nn.md: " << what << "\n";
    std::exit(1);
  }
}
}  // namespace

int main() {
  torch::manual_seed(0);
  // docs/nn.md#modules
  torch::nn::Sequential mlp(torch::nn::Linear(4, 64), torch::nn::Tanh(), torch::nn::Linear(64, 2));
  auto actor = std::make_shared<nn::TensorDictModule>(mlp, Keys{{"obs", "state"}}, Keys{"action"});
  td::TensorDict batch({{"obs", td::TensorDict({{"state", at::randn({32, 4})}}, {32})}}, {32});
  batch = (*actor)(batch);  // batch["action"] = mlp(batch["obs", "state"]), shape [32, 2]

  // Any callable over tensors: the in_keys' tensors in, one tensor per out_key out.
  auto advantage = std::make_shared<nn::TensorDictModule>(
      [](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{in[0].sum(-1), in[0].norm(2, -1)}; },
      Keys{"action"}, Keys{"score", "_"}, "advantage");  // "_" drops the second output
  expect(batch.get("action").sizes() == c10::IntArrayRef({32, 2}), "action shape");

  // docs/nn.md#sequences
  nn::TensorDictSequential agent({actor, advantage});
  // in_keys: [('obs', 'state')]; out_keys: ['action', 'score', '_'] (Python lists '_' too)
  torch::optim::Adam optimizer(agent.parameters(), /*lr=*/1e-2);
  for (int step = 0; step < 50; ++step) {
    batch = agent(batch);
    at::Tensor loss = (batch.get("score") - 1).pow(2).mean();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  auto scorer = agent.select_subsequence(/*in_keys=*/{"action"});  // just `advantage`
  expect(agent.in_keys() == Keys{{"obs", "state"}}, "sequence in_keys");
  expect(agent.out_keys() == Keys({"action", "score", "_"}), "sequence out_keys");
  expect(scorer->size() == 1, "select_subsequence");
  expect((agent(batch).get("score") - 1).abs().mean().item<float>() < 0.1, "trained");

  // docs/nn.md#parameters-as-a-tensordict
  nn::TensorDictParams params(td::from_module(*mlp.ptr()));  // mlp's own tensors, nested by submodule
  // params.data(): {"0": {"weight", "bias"}, "2": {"weight", "bias"}}; an optimizer of
  // params.parameters() trains mlp.
  torch::nn::Linear m1(4, 2), m2(4, 2), m3(4, 2);
  td::TensorDict ensemble = nn::from_modules(m1, m2, m3);  // weight [3, 2, 4], bias [3, 2]
  torch::nn::Linear shell(4, 2);
  std::vector<at::Tensor> outputs =
      nn::run_ensemble(ensemble, *shell.ptr(), [&] { return shell(batch.get({"obs", "state"})); });
  expect(params.data().get({"2", "bias"}).is_same(mlp->named_parameters()["2.bias"]), "params share");
  expect(ensemble.get("weight").sizes() == c10::IntArrayRef({3, 2, 4}), "from_modules");
  expect(at::allclose(outputs[1], m2(batch.get({"obs", "state"}))), "run_ensemble");

  // docs/nn.md#typed-modules
  torch::nn::Linear head(4, 2);
  auto policy = std::make_shared<nn::TypedModule<policy::Observation, policy::Action>>(
      [head](const policy::Observation& obs) mutable {
        at::Tensor action = head(obs.state());  // obs.stat() would not compile
        return policy::Action({{"action", action}, {"value", action.sum(-1)}}, {action.size(0)});
      },
      /*in_at=*/"obs");
  policy->register_module("head", head.ptr());  // its parameters, for an optimizer
  // in_keys: [('obs', 'state')], from policy::Observation; out_keys: ['action', 'value']
  batch = (*policy)(batch);
  expect(policy->out_keys() == Keys({"action", "value"}), "typed out_keys");
  expect(at::allclose(batch.get("action"), head(batch.get({"obs", "state"}))), "typed forward");
  std::cout << "nn snippets: ok\n";
  return 0;
}
