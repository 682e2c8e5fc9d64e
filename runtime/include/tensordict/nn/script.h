#pragma once
// TorchScript modules (torch.jit.script / torch.jit.trace, saved by Python or C++) as modules over
// tensordicts: a policy trained in Python, deployed from C++.
//
//   auto policy = nn::load_script_module("policy.pt", {{"obs", "state"}}, {"action"},
//                                        {nn::ScriptInputs::Dict});
//   batch = (*policy)(batch);

#include <memory>
#include <string>

#include <tensordict/nn/module.h>

namespace torch {
namespace jit {
struct Module;
}  // namespace jit
}  // namespace torch

namespace tensordict {
namespace nn {

/// How the script's method takes the in_keys' tensors.
enum class ScriptInputs {
  /// forward(Tensor a, Tensor b, ...): one argument per in_key, in order.
  Positional,
  /// forward(Dict[str, Tensor]): one dict keyed by the in_keys, nested keys joined by `separator`.
  Dict,
};

struct ScriptOptions {
  ScriptInputs inputs = ScriptInputs::Positional;
  /// Joins the parts of a nested key into a dict key: ("obs", "state") -> "obs.state".
  std::string separator = ".";
  /// The method to call.
  std::string method = "forward";
};

/// `script` as a TensorDictModule. Its method may return a tensor, a tuple or list of tensors (one
/// per out_key, in order) or a Dict[str, Tensor] holding every out_key (joined by `separator`).
/// The script's parameters are registered (nested by submodule), so parameters() and an
/// optimizer see them. Errors name the module, the key and what the script returned.
std::shared_ptr<TensorDictModule> script_module(const torch::jit::Module& script, Keys in_keys, Keys out_keys,
                                                const ScriptOptions& options = {});

/// script_module of the file torch.jit.save wrote; StorageError naming the file when it cannot be
/// loaded.
std::shared_ptr<TensorDictModule> load_script_module(const std::string& path, Keys in_keys, Keys out_keys,
                                                     const ScriptOptions& options = {});

}  // namespace nn
}  // namespace tensordict
