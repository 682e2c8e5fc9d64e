// TorchScript modules written by Python at test time (make_scripted_policies.py, Debian's
// python3-torch) run as TensorDictModules: positional and dict inputs, tuple and dict outputs,
// Python's outputs matched to 1e-6, and the errors that name the module and the key.
#include "support/catch_torch.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>
#include <torch/script.h>
#include <torch/optim/sgd.h>

#include <tensordict/nn/script.h>
#include <tensordict/nn/sequential.h>

#include "support/temp_dir.h"

using namespace tensordict;
using nn::Keys;
using testing_support::TempDir;

namespace {

bool python_has_torch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

// The scripts of make_scripted_policies.py in `dir`; false (with a warning) without python3-torch.
bool write_scripts(const std::string& dir) {
  if (!python_has_torch()) {
    WARN("skipped: /usr/bin/python3 has no torch (install python3-torch, scripts/install-deps.sh does)");
    return false;
  }
  const std::string command = "/usr/bin/python3 " + std::string(TENSORDICT_SOURCE_DIR) +
                              "/tests/nn/make_scripted_policies.py " + dir + " 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
  return true;
}

at::Tensor fixture(const torch::jit::Module& f, const char* name) { return f.attr(name).toTensor(); }

}  // namespace

TEST_CASE("a TorchScript module from Python runs over a tensordict as Python runs it", "[nn][script]") {
  TempDir dir;
  if (!write_scripts(dir.path())) return;
  const torch::jit::Module f = torch::jit::load(dir / "fixture.pt");

  // Positional inputs, a tuple out.
  auto positional = nn::load_script_module(dir / "positional.pt", Keys{"x", {"in", "y"}}, Keys{"p0", {"out", "p1"}});
  TensorDict td({{"x", fixture(f, "x")}, {"in", TensorDict({{"y", fixture(f, "y")}}, {5})}}, {5});
  (*positional)(td);
  CHECK(at::allclose(td.get("p0"), fixture(f, "p0"), /*rtol=*/0, /*atol=*/1e-6));
  CHECK(at::allclose(td.get({"out", "p1"}), fixture(f, "p1"), 0, 1e-6));
  // The script's parameters are the module's: an optimizer sees them.
  CHECK(positional->parameters().size() == 2);
  CHECK(positional->named_parameters().contains("script.linear.weight"));

  // One Dict[str, Tensor] in (nested keys joined by "."), a dict out.
  nn::ScriptOptions dict;
  dict.inputs = nn::ScriptInputs::Dict;
  auto policy = nn::load_script_module(dir / "dict_policy.pt", Keys{{"obs", "state"}}, Keys{"action", "value"}, dict);
  TensorDict batch({{"obs", TensorDict({{"state", fixture(f, "state")}}, {5})}}, {5});
  (*policy)(batch);
  CHECK(at::allclose(batch.get("action"), fixture(f, "action"), 0, 1e-6));
  CHECK(at::allclose(batch.get("value"), fixture(f, "value"), 0, 1e-6));
  CHECK(policy->parameters().size() == 6);

  // It plugs into a sequence like any module, and trains.
  nn::TensorDictSequential seq({policy});
  torch::optim::SGD opt(seq.parameters(), 0.05);
  auto loss = [&] { return seq(batch).get("value").pow(2).mean(); };
  const float before = loss().item<float>();
  for (int i = 0; i < 10; ++i) {
    opt.zero_grad();
    loss().backward();
    opt.step();
  }
  CHECK(loss().item<float>() < before);
}

TEST_CASE("a TorchScript module's errors name the module, the key and what it returned", "[nn][script]") {
  TempDir dir;
  if (!write_scripts(dir.path())) return;
  nn::ScriptOptions dict;
  dict.inputs = nn::ScriptInputs::Dict;
  TensorDict batch({{"obs", TensorDict({{"state", at::zeros({5, 4})}}, {5})}}, {5});
  // An out_key the returned dict lacks.
  auto missing = nn::load_script_module(dir / "dict_policy.pt", Keys{{"obs", "state"}}, Keys{"action", "q"}, dict);
  CHECK_THROWS_AS((*missing)(batch), KeyError);
  CHECK_THROWS_WITH((*missing)(batch), Catch::Contains("TensorDictModule(DictPolicy)") &&
                                           Catch::Contains("no entry 'q' for out_key 'q'") &&
                                           Catch::Contains("action, value"));
  // Fewer out_keys than the tuple returned.
  auto positional = nn::load_script_module(dir / "positional.pt", Keys{"x", "y"}, Keys{"p0"});
  TensorDict td({{"x", at::zeros({5, 4})}, {"y", at::zeros({5, 3})}}, {5});
  CHECK_THROWS_WITH((*positional)(td), Catch::Contains("returned 2 tensors for 1 out_keys ['p0']"));
  // A missing in_key, and the script's own error on a wrong shape.
  CHECK_THROWS_AS((*positional)(TensorDict({{"x", at::zeros({5, 4})}}, {5})), KeyError);
  CHECK_THROWS_WITH((*positional)(TensorDict({{"x", at::zeros({5, 7})}, {"y", at::zeros({5, 3})}}, {5})),
                    Catch::Contains("failed on in_keys 'x' torch.Size([5, 7]), 'y' torch.Size([5, 3])"));
  // A file that is not a script.
  CHECK_THROWS_AS(nn::load_script_module(dir / "nothing.pt", Keys{"x"}, Keys{"y"}), StorageError);
  CHECK_THROWS_WITH(nn::load_script_module(dir / "nothing.pt", Keys{"x"}, Keys{"y"}), Catch::Contains("nothing.pt"));
  nn::ScriptOptions other;
  other.method = "act";
  CHECK_THROWS_WITH(nn::load_script_module(dir / "positional.pt", Keys{"x"}, Keys{"y"}, other),
                    Catch::Contains("has no method 'act'"));
}
