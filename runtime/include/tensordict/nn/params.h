#pragma once
// Parameters as a tensordict (Python's TensorDictParams and from_modules): a module whose
// parameters are the leaves of a tensordict, so an optimizer trains the tensordict itself.
//
//   nn::TensorDictParams params(from_module(*net));  // the net's own tensors, nested by submodule
//   torch::optim::SGD opt(params.parameters(), 0.1);  // trains net's weights through the tensordict

#include <memory>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <tensordict/module.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace nn {

class TensorDictParams : public torch::nn::Module {
 public:
  /// Registers every tensor leaf of `params` itself (no copy) as a parameter under its nested
  /// key joined by "." (or as a buffer when it does not require grad and `buffers_stay` is
  /// set): named_parameters() lists "layer.weight" for ("layer", "weight"). Floating-point
  /// leaves are made to require grad unless `buffers_stay` keeps their flag. ValueError naming a
  /// key part that holds a "." (a torch::nn name cannot).
  explicit TensorDictParams(TensorDict params, bool buffers_stay = false);

  /// The tensordict whose leaves are this module's parameters (the same tensors).
  const TensorDict& data() const { return params_; }

 private:
  TensorDict params_;
};

/// The parameters and buffers of identical modules stacked along a new first batch dim (Python's
/// TensorDict.from_modules): batch size [modules.size()], one leaf per name, each a new tensor
/// that requires grad when the modules' did. ValueError when the modules differ in their names,
/// shapes or dtypes (naming the key and the module).
TensorDict from_modules(const std::vector<std::shared_ptr<torch::nn::Module>>& modules);

template <class... M>
TensorDict from_modules(const torch::nn::ModuleHolder<M>&... modules) {
  return from_modules(std::vector<std::shared_ptr<torch::nn::Module>>{modules.ptr()...});
}

/// Runs an ensemble: for each member i of `stacked` (from_modules' result), swaps its values into
/// `module` (to_module) and calls `call()`, then puts the module's values back; returns the
/// results stacked along a new dim 0. A loop, as LibTorch has no vmap; the members' values are
/// read under no_grad semantics of to_module (train members through their own modules).
template <class F>
auto run_ensemble(const TensorDict& stacked, torch::nn::Module& module, F&& call) {
  std::vector<decltype(call())> results;
  const int64_t n = stacked.batch_size().empty() ? 0 : stacked.batch_size()[0];
  results.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    ModuleSwap swap = to_module(stacked.index({i}), module);
    results.push_back(call());
  }
  return results;
}

}  // namespace nn
}  // namespace tensordict
