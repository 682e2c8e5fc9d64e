// tensordict::nn::TensorDictModule and TensorDictSequential: keys in and out, the callables they
// wrap, the errors that name the module and the key, and Python v0.14's key rules for sequences.
#include "support/catch_torch.h"

#include <sstream>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/activation.h>
#include <torch/optim/sgd.h>

#include <tensordict/nn/module.h>
#include <tensordict/nn/sequential.h>

using namespace tensordict;
using nn::Keys;
using nn::TensorDictModule;
using nn::TensorDictSequential;

namespace {

// Python's docstring modules: each copies its one input to its one output.
std::shared_ptr<TensorDictModule> copy(const char* from, const char* to) {
  return std::make_shared<TensorDictModule>([](const std::vector<at::Tensor>& in) { return in; }, Keys{from}, Keys{to},
                                            std::string(from) + "->" + to);
}

std::vector<std::string> names(const Keys& keys) {
  std::vector<std::string> out;
  for (const NestedKey& k : keys) out.push_back(k.join("."));
  return out;
}

std::vector<std::string> labels(const TensorDictSequential& seq) {
  std::vector<std::string> out;
  for (const auto& m : seq.modules()) {
    if (auto inner = std::dynamic_pointer_cast<TensorDictSequential>(m)) {
      for (const std::string& l : labels(*inner)) out.push_back("(" + l + ")");
    } else {
      out.push_back(names(m->in_keys())[0] + "->" + names(m->out_keys())[0]);
    }
  }
  return out;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("a module over a function reads in_keys, writes out_keys in order into the input", "[nn]") {
  TensorDict td({{"a", at::ones({4, 2})}, {"obs", TensorDict({{"x", at::full({4, 3}, 2.f)}}, {4})}}, {4});
  TensorDictModule m(
      [](const std::vector<at::Tensor>& in) {
        return std::vector<at::Tensor>{in[0].sum(-1) + in[1].sum(-1), in[1] * 10, in[0]};
      },
      Keys{"a", {"obs", "x"}}, Keys{"total", {"out", "scaled"}, "_"});
  CHECK((names(m.in_keys()) == Names{"a", "obs.x"}));
  CHECK((names(m.out_keys()) == Names{"total", "out.scaled", "_"}));
  TensorDict out = m(td);
  CHECK(out.impl() == td.impl());  // the input, written in place and returned
  CHECK(at::equal(td.get("total"), at::full({4}, 8.f)));
  CHECK(at::equal(td.get({"out", "scaled"}), at::full({4, 3}, 20.f)));
  CHECK_FALSE(td.contains("_"));  // "_" discards that output
  // select_out_keys: computed, not written.
  TensorDict fresh({{"a", at::ones({4, 2})}, {"obs", TensorDict({{"x", at::ones({4, 3})}}, {4})}}, {4});
  m.select_out_keys({"total"});
  m(fresh);
  CHECK(fresh.contains("total"));
  CHECK_FALSE(fresh.contains("out"));
  CHECK_THROWS_WITH(m.select_out_keys({"nope"}), Catch::Contains("'nope' is not one of its out_keys"));
  m.reset_out_keys();
  CHECK(m.out_keys().size() == 3);
}

TEST_CASE("a module over torch::nn modules exposes their parameters to an optimizer", "[nn]") {
  torch::manual_seed(0);
  torch::nn::Linear linear(6, 2);
  auto actor = std::make_shared<TensorDictModule>(linear, Keys{{"obs", "state"}}, Keys{"action"});
  CHECK(actor->parameters().size() == 2);
  CHECK(actor->parameters()[0].is_same(linear->weight));
  TensorDict td({{"obs", TensorDict({{"state", at::randn({5, 6})}}, {5})}}, {5});
  (*actor)(td);
  CHECK(at::allclose(td.get("action"), linear(td.get({"obs", "state"}))));
  std::ostringstream repr;
  repr << *actor;
  // torch::nn's operator<< prints the wrapped module below.
  CHECK_THAT(repr.str(), Catch::StartsWith("TensorDictModule(module=torch::nn::Linear, in_keys=[('obs', 'state')], "
                                           "out_keys=['action'])"));

  // A Sequential (whose forward is a template) and a module returning a tuple.
  torch::nn::Sequential mlp(torch::nn::Linear(6, 8), torch::nn::Tanh(), torch::nn::Linear(8, 3));
  TensorDictModule net(mlp, Keys{{"obs", "state"}}, Keys{"logits"});
  net(td);
  CHECK((td.get("logits").sizes() == c10::IntArrayRef{5, 3}));
  torch::optim::SGD opt(net.parameters(), 0.1);
  auto loss = [&] { return net(td).get("logits").pow(2).mean(); };
  const float before = loss().item<float>();
  for (int i = 0; i < 20; ++i) {
    opt.zero_grad();
    loss().backward();
    opt.step();
  }
  CHECK(loss().item<float>() < before);
}

TEST_CASE("a module's errors name the module and the key", "[nn]") {
  TensorDict td({{"a", at::ones({4, 2})}, {"s", TensorDict({{"t", at::ones({4})}}, {4})}}, {4});
  TensorDictModule one([](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{in[0]}; }, Keys{"a"},
                       Keys{"b", "c"}, "twice");
  CHECK_THROWS_AS(one(td), ValueError);
  CHECK_THROWS_WITH(one(td), "TensorDictModule(twice): returned 1 tensor for 2 out_keys ['b', 'c']");
  CHECK_FALSE(td.contains("b"));  // nothing written

  TensorDictModule missing([](const std::vector<at::Tensor>& in) { return in; }, Keys{{"obs", "x"}}, Keys{"y"}, "f");
  CHECK_THROWS_AS(missing(td), KeyError);
  CHECK_THROWS_WITH(missing(td), Catch::Contains("TensorDictModule(f): in_key ('obs', 'x') not found in the input") &&
                                     Catch::Contains("('s', 't')"));
  TensorDictModule not_a_tensor([](const std::vector<at::Tensor>& in) { return in; }, Keys{"s"}, Keys{"y"}, "f");
  CHECK_THROWS_AS(not_a_tensor(td), TypeError);

  TensorDictModule wrong_batch([](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{in[0].t()}; },
                               Keys{"a"}, Keys{"at"}, "transpose");
  CHECK_THROWS_AS(wrong_batch(td), ShapeError);
  CHECK_THROWS_WITH(wrong_batch(td), "TensorDictModule(transpose): out_key 'at' got a tensor of shape torch.Size([2, "
                                     "4]), whose leading dims are not the batch size torch.Size([4])");

  TensorDictModule linear(torch::nn::Linear(3, 1), Keys{"a"}, Keys{"y"});
  CHECK_THROWS_AS(linear(td), RuntimeError);
  CHECK_THROWS_WITH(linear(td), Catch::StartsWith("TensorDictModule(torch::nn::Linear) failed on in_keys 'a' "
                                                  "torch.Size([4, 2]): "));
  TensorDictModule two_in(torch::nn::Linear(3, 1), Keys{"a", "a"}, Keys{"y"});
  CHECK_THROWS_WITH(two_in(td), Catch::Contains("does not take 2 tensors"));
}

TEST_CASE("a sequence's in_keys and out_keys follow Python's rules", "[nn]") {
  // tensordict/nn/sequence.py (v0.14), _compute_in_and_out_keys and the select_subsequence
  // docstring: a->b, b->c, c->d, a->e.
  TensorDictSequential seq({copy("a", "b"), copy("b", "c"), copy("c", "d"), copy("a", "e")});
  CHECK((names(seq.in_keys()) == Names{"a"}));  // b and c are intermediates
  CHECK((names(seq.out_keys()) == Names{"b", "c", "d", "e"}));
  CHECK(seq.parameters().empty());
  CHECK((labels(*seq.select_subsequence({"a"})) == Names{"a->b", "b->c", "c->d", "a->e"}));
  auto from_c = seq.select_subsequence({"c"});
  CHECK((labels(*from_c) == Names{"c->d"}));
  CHECK((names(from_c->in_keys()) == Names{"c"}));
  CHECK((names(from_c->out_keys()) == Names{"d"}));
  CHECK((labels(*seq.select_subsequence({}, {"c"})) == Names{"a->b", "b->c"}));
  CHECK((labels(*seq.select_subsequence({}, {"e"})) == Names{"a->e"}));
  CHECK_THROWS_AS(seq.select_subsequence({"z"}), ValueError);

  // An in_key listed once, even when read by several modules; an out_key written twice is
  // listed at its last writer.
  TensorDictSequential twice({copy("x", "y"), copy("x", "z"), copy("z", "y")});
  CHECK((names(twice.in_keys()) == Names{"x"}));
  CHECK((names(twice.out_keys()) == Names{"z", "y"}));

  // Nested sequences are narrowed too (the docstring's last example).
  auto nested = TensorDictSequential(
      {std::make_shared<TensorDictSequential>(std::vector<std::shared_ptr<nn::TensorDictModuleBase>>{copy("a", "b"),
                                                                                                     copy("b", "c")}),
       std::make_shared<TensorDictSequential>(
           std::vector<std::shared_ptr<nn::TensorDictModuleBase>>{copy("b", "d"), copy("d", "e")})});
  auto sub = nested.select_subsequence({"b", "d"}, {"e"});
  CHECK((labels(*sub) == Names{"(b->d)", "(d->e)"}));
  CHECK(sub->size() == 1);
  CHECK((names(sub->in_keys()) == Names{"b"}));
  CHECK((names(sub->out_keys()) == Names{"d", "e"}));
}

TEST_CASE("a sequence runs its modules in order, and selected out_keys keep intermediates out", "[nn]") {
  auto plus_one = std::make_shared<TensorDictModule>(
      [](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{in[0] + 1}; }, Keys{"x"}, Keys{"h"},
      "plus_one");
  torch::nn::Linear linear(3, 2);
  auto head = std::make_shared<TensorDictModule>(linear, Keys{"h"}, Keys{"y"});
  TensorDictSequential seq({plus_one, head});
  CHECK(seq.parameters().size() == 2);
  TensorDict td({{"x", at::zeros({4, 3})}}, {4});
  seq(td);
  CHECK(at::allclose(td.get("y"), linear(at::ones({4, 3}))));
  CHECK(td.contains("h"));

  TensorDictSequential only_y({plus_one, head}, {"y"});
  TensorDict fresh({{"x", at::zeros({4, 3})}}, {4});
  TensorDict out = only_y(fresh);
  CHECK(out.impl() == fresh.impl());
  CHECK(fresh.contains("y"));
  CHECK_FALSE(fresh.contains("h"));  // computed on a shallow copy, not written back

  // A failing module is named in the error.
  TensorDict bad({{"x", at::zeros({4, 5})}}, {4});
  CHECK_THROWS_WITH(seq(bad), Catch::Contains("while running module 1 (TensorDictModule(torch::nn::Linear)) of a "
                                              "TensorDictSequential"));
}
