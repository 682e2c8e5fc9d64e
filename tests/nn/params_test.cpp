// TensorDictParams (a module whose parameters are a tensordict's leaves), from_modules and an
// ensemble run through to_module.
#include "support/catch_torch.h"

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <tensordict/module.h>
#include <tensordict/nn/params.h>

using namespace tensordict;

TEST_CASE("TensorDictParams trains a module through the tensordict of its parameters", "[nn][params]") {
  torch::manual_seed(0);
  torch::nn::Sequential net(torch::nn::Linear(3, 8), torch::nn::Tanh(), torch::nn::Linear(8, 1));
  nn::TensorDictParams params(from_module(*net.ptr()));
  // The same tensors, not copies, under the module's own names.
  CHECK(params.parameters().size() == 4);
  CHECK(params.named_parameters().contains("0.weight"));
  CHECK(params.named_parameters()["2.bias"].is_same(net->named_parameters()["2.bias"]));
  CHECK(params.data().get({"0", "weight"}).is_same(net->named_parameters()["0.weight"]));

  const at::Tensor x = at::randn({16, 3}), target = x.sum(-1, /*keepdim=*/true);
  torch::optim::SGD opt(params.parameters(), 0.1);
  auto loss = [&] { return (net->forward(x) - target).pow(2).mean(); };
  const float before = loss().item<float>();
  for (int i = 0; i < 50; ++i) {
    opt.zero_grad();
    loss().backward();
    opt.step();
  }
  CHECK(loss().item<float>() < before / 2);

  // Round trip: the trained values go into a second, fresh module.
  torch::nn::Sequential copy(torch::nn::Linear(3, 8), torch::nn::Tanh(), torch::nn::Linear(8, 1));
  ModuleSwap swap = to_module(params.data(), *copy.ptr());
  CHECK(at::allclose(copy->forward(x), net->forward(x)));

  // A plain tensordict: integer leaves stay buffers-like parameters without grad; '.' refused.
  TensorDict raw({{"w", at::zeros({2})}, {"n", TensorDict({{"b", at::ones({1})}}, {})}}, {});
  nn::TensorDictParams made(raw);
  CHECK(raw.get("w").requires_grad());
  CHECK(made.named_parameters().contains("n.b"));
  CHECK_THROWS_AS(nn::TensorDictParams(TensorDict({{"a.b", at::zeros({1})}}, {})), ValueError);
  CHECK_THROWS_AS(nn::TensorDictParams(TensorDict({{"w", at::zeros({2}).requires_grad_() * 2}}, {})), ValueError);
}

TEST_CASE("from_modules stacks identical modules' parameters and run_ensemble runs each member", "[nn][params]") {
  torch::manual_seed(1);
  torch::nn::Linear a(4, 2), b(4, 2), c(4, 2);
  TensorDict stacked = nn::from_modules(a, b, c);
  CHECK((stacked.batch_size() == c10::IntArrayRef{3}));
  CHECK((stacked.get("weight").sizes() == c10::IntArrayRef{3, 2, 4}));
  CHECK(at::equal(stacked.get("weight")[1], b->weight));
  CHECK(stacked.get("weight").requires_grad());
  CHECK(stacked.get("weight").is_leaf());

  const at::Tensor x = at::randn({5, 4});
  torch::nn::Linear runner(4, 2);
  const at::Tensor before = runner->weight.clone();
  std::vector<at::Tensor> outs = nn::run_ensemble(stacked, *runner.ptr(), [&] { return runner(x); });
  REQUIRE(outs.size() == 3);
  CHECK(at::allclose(outs[0], a(x)));
  CHECK(at::allclose(outs[2], c(x)));
  CHECK(at::equal(runner->weight, before));  // the runner's own values are back

  torch::nn::Linear wider(4, 3);
  CHECK_THROWS_AS(nn::from_modules(a, wider), ValueError);
  CHECK_THROWS_WITH(nn::from_modules(a, wider), Catch::Contains("'weight' of module 1"));
}
