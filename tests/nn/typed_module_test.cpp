// Typed modules (tensordict::nn::TypedModule): a function from one generated class to another,
// keys from the schemas, run alone, inside a TensorDictSequential, and in a training step.
#include "support/catch_torch.h"

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <tensordict/module.h>
#include <tensordict/nn/params.h>
#include <tensordict/nn/sequential.h>
#include <tensordict/nn/typed_module.h>

#include "policy.td.h"

using namespace tensordict;
using nn::Keys;
using policy::Action;
using policy::Observation;

namespace {

std::vector<std::string> names(const Keys& keys) {
  std::vector<std::string> out;
  for (const NestedKey& k : keys) out.push_back(k.join("."));
  return out;
}

std::shared_ptr<nn::TypedModule<Observation, Action>> make_policy(torch::nn::Linear net) {
  auto module = std::make_shared<nn::TypedModule<Observation, Action>>(
      [net](const Observation& obs) mutable {
        const at::Tensor action = net(obs.state());
        return Action({{"action", action}, {"value", action.sum(-1)}}, {action.size(0)});
      },
      /*in_at=*/"obs", /*out_at=*/NestedKey(), "linear policy");
  module->register_module("net", net.ptr());
  return module;
}

}  // namespace

TEST_CASE("a typed module reads its input class and writes its output class's fields", "[nn][typed]") {
  torch::manual_seed(0);
  torch::nn::Linear net(4, 2);
  auto policy = make_policy(net);
  // Keys from the schemas: Observation's fields below "obs", Action's at the root.
  CHECK((names(policy->in_keys()) == std::vector<std::string>{"obs.state"}));
  CHECK((names(policy->out_keys()) == std::vector<std::string>{"action", "value"}));
  CHECK(policy->parameters().size() == 2);

  TensorDict batch({{"obs", TensorDict({{"state", at::randn({8, 4})}}, {8})}}, {8});
  (*policy)(batch);
  CHECK(at::allclose(batch.get("action"), net(batch.get({"obs", "state"}))));
  CHECK((batch.get("value").sizes() == c10::IntArrayRef{8}));
  policy->select_out_keys({"action"});
  TensorDict fresh({{"obs", TensorDict({{"state", at::randn({8, 4})}}, {8})}}, {8});
  (*policy)(fresh);
  CHECK_FALSE(fresh.contains("value"));
  policy->reset_out_keys();

  // In a sequence with an untyped module; the typed one's outputs are the next one's inputs.
  auto loss = std::make_shared<nn::TensorDictModule>(
      [](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{(in[0] - 1).pow(2).sum(-1)}; },
      Keys{"action"}, Keys{"loss"}, "loss");
  nn::TensorDictSequential seq({policy, loss});
  CHECK((names(seq.in_keys()) == std::vector<std::string>{"obs.state"}));
  CHECK((names(seq.out_keys()) == std::vector<std::string>{"action", "value", "loss"}));
  torch::optim::SGD opt(seq.parameters(), 0.1);
  auto mean_loss = [&] { return seq(batch).get("loss").mean(); };
  const float before = mean_loss().item<float>();
  for (int i = 0; i < 30; ++i) {
    opt.zero_grad();
    mean_loss().backward();
    opt.step();
  }
  CHECK(mean_loss().item<float>() < before / 2);
}

TEST_CASE("a typed module's errors name the class, the field and the module", "[nn][typed]") {
  auto policy = make_policy(torch::nn::Linear(4, 2));
  // No "obs" level.
  CHECK_THROWS_AS((*policy)(TensorDict({{"state", at::zeros({8, 4})}}, {8})), KeyError);
  // An "obs" that is not an Observation: the field's dtype.
  TensorDict wrong({{"obs", TensorDict({{"state", at::zeros({8, 4}, at::kLong)}}, {8})}}, {8});
  CHECK_THROWS_AS((*policy)(wrong), TypeError);
  CHECK_THROWS_WITH((*policy)(wrong), Catch::Contains("Observation.state"));
  // An output the batch cannot hold (batch 8, the function returns 3 rows).
  auto short_rows = std::make_shared<nn::TypedModule<Observation, Action>>(
      [](const Observation&) { return Action({{"action", at::zeros({3, 2})}, {"value", at::zeros({3})}}, {3}); },
      "obs");
  TensorDict batch({{"obs", TensorDict({{"state", at::zeros({8, 4})}}, {8})}}, {8});
  CHECK_THROWS_WITH((*short_rows)(batch),
                    Catch::Contains("while TypedModule<Observation, Action>(typed) wrote its output 'action'"));
}

TEST_CASE("a training step over a typed batch: seq(batch), loss, backward, step", "[nn][typed]") {
  // The seeds' pattern, `batch = model(batch); loss = loss_module(batch)`, with a typed batch
  // (policy::Step is a TypedTensorDict), a TensorDictSequential and TensorDictParams.
  torch::manual_seed(3);
  torch::nn::Linear net(4, 2);
  auto actor = make_policy(net);
  auto loss_module = std::make_shared<nn::TensorDictModule>(
      [](const std::vector<at::Tensor>& in) {
        // Imitate a damped spring: action = -(position + velocity).
        const at::Tensor target = -(in[1].slice(-1, 0, 2) + in[1].slice(-1, 2, 4));
        return std::vector<at::Tensor>{(in[0] - target).pow(2).sum(-1)};
      },
      Keys{"action", {"obs", "state"}}, Keys{"loss"}, "imitation");
  nn::TensorDictSequential model({actor, loss_module});
  nn::TensorDictParams params(from_module(*net.ptr()));
  torch::optim::SGD optimizer(params.parameters(), 0.05);

  std::vector<float> losses;
  for (int step = 0; step < 40; ++step) {
    // A batch holding only the observation yet: unchecked until the model has filled it.
    policy::Step batch = policy::Step::from_tensordict(
        TensorDict({{"obs", Observation({{"state", at::randn({64, 4})}}, {64})}}, {64}), /*check=*/false);
    batch = policy::Step::from_tensordict(model(batch), /*check=*/false);  // the same object, filled
    const at::Tensor loss = batch.get("loss").mean();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<float>());
    CHECK((batch.action().sizes() == c10::IntArrayRef{64, 2}));  // the typed field the actor wrote
  }
  const float first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[37] + losses[38] + losses[39]) / 3;
  CHECK(last < first / 2);
}
