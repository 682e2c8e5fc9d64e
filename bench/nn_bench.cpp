// tensordict::nn against the hand-written floor (issue 31): the same network called on the
// tensors by hand, with the get and set a user would write. Arg: the batch size, so the table
// shows how the fixed cost of the wrapper shrinks as the work grows.
//   Module/<op>:  TensorDictModule over a torch::nn MLP (64 in, 64 hidden, 8 out)
//   Script/<op>:  the same MLP as TorchScript, through nn::script_module
//   Sequence/<op>: a TensorDictSequential of 3 modules
// Each has a Floor/<op> twin; scripts/bench.sh prints `nn op cpp_us floor_us ratio`.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/script.h>

#include <tensordict/nn/script.h>
#include <tensordict/nn/sequential.h>

namespace td = tensordict;
namespace nn = tensordict::nn;

namespace {

torch::nn::Sequential mlp() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(64, 64), torch::nn::ReLU(), torch::nn::Linear(64, 8));
}

td::TensorDict batch(int64_t n) { return td::TensorDict({{"obs", at::randn({n, 64})}}, {n}); }

// The MLP as TorchScript, compiled here from source (no Python needed to run the benchmark).
torch::jit::Module scripted() {
  torch::manual_seed(0);
  torch::jit::Module m("Mlp");
  m.register_parameter("w1", at::randn({64, 64}) / 8, false);
  m.register_parameter("b1", at::zeros({64}), false);
  m.register_parameter("w2", at::randn({64, 8}) / 8, false);
  m.register_parameter("b2", at::zeros({8}), false);
  m.define(R"(
def forward(self, x):
    return torch.relu(x @ self.w1 + self.b1) @ self.w2 + self.b2
)");
  return m;
}

void BM_Module_Mlp(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  nn::TensorDictModule module(mlp(), nn::Keys{"obs"}, nn::Keys{"out"});
  td::TensorDict data = batch(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(module(data));
}
BENCHMARK(BM_Module_Mlp)->Arg(1)->Arg(64)->Arg(4096);

void BM_Floor_Mlp(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  torch::nn::Sequential net = mlp();
  td::TensorDict data = batch(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(data.set("out", net->forward(data.get("obs"))));
}
BENCHMARK(BM_Floor_Mlp)->Arg(1)->Arg(64)->Arg(4096);

void BM_Script_Mlp(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  auto module = nn::script_module(scripted(), nn::Keys{"obs"}, nn::Keys{"out"});
  td::TensorDict data = batch(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize((*module)(data));
}
BENCHMARK(BM_Script_Mlp)->Arg(1)->Arg(64)->Arg(4096);

void BM_Floor_Script_Mlp(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  torch::jit::Module module = scripted();
  td::TensorDict data = batch(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(data.set("out", module.forward({data.get("obs")}).toTensor()));
}
BENCHMARK(BM_Floor_Script_Mlp)->Arg(1)->Arg(64)->Arg(4096);

void BM_Sequence_Mlp3(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  torch::nn::Linear a(64, 64), b(64, 64), c(64, 8);
  nn::TensorDictSequential seq({std::make_shared<nn::TensorDictModule>(a, nn::Keys{"obs"}, nn::Keys{"h1"}),
                                std::make_shared<nn::TensorDictModule>(b, nn::Keys{"h1"}, nn::Keys{"h2"}),
                                std::make_shared<nn::TensorDictModule>(c, nn::Keys{"h2"}, nn::Keys{"out"})});
  td::TensorDict data = batch(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(seq(data));
}
BENCHMARK(BM_Sequence_Mlp3)->Arg(1)->Arg(64)->Arg(4096);

void BM_Floor_Sequence_Mlp3(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  torch::nn::Linear a(64, 64), b(64, 64), c(64, 8);
  td::TensorDict data = batch(state.range(0));
  for (auto _ : state) {
    data.set("h1", a(data.get("obs")));
    data.set("h2", b(data.get("h1")));
    benchmark::DoNotOptimize(data.set("out", c(data.get("h2"))));
  }
}
BENCHMARK(BM_Floor_Sequence_Mlp3)->Arg(1)->Arg(64)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
