#pragma once
// TensorDict <-> torch::nn::Module (semantics 1.16). Kept out of the umbrella header: it pulls
// in <torch/nn/module.h>, which the core headers avoid.

#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include <tensordict/tensor_dict.h>

namespace tensordict {

/// The parameters and buffers of `module` as a tensordict with batch size []: submodule names
/// are nesting levels, leaves are the module's own tensors (not copies). Undefined parameters
/// are skipped; submodules without parameters or buffers are dropped unless `filter_empty` is
/// false. With `lock`, the result is locked.
TensorDict from_module(const torch::nn::Module& module, bool lock = false, bool filter_empty = true);

/// The guard `to_module` returns: while it lives the module computes with the tensordict's
/// values; `restore()` (or the destructor) puts the previous values back, `release()` keeps
/// the new ones for good.
class ModuleSwap {
 public:
  ModuleSwap() = default;
  ModuleSwap(ModuleSwap&& other) noexcept;
  ModuleSwap& operator=(ModuleSwap&& other) noexcept;
  ModuleSwap(const ModuleSwap&) = delete;
  ModuleSwap& operator=(const ModuleSwap&) = delete;
  ~ModuleSwap();

  /// The values the module held before the swap, in the layout `from_module` gives.
  const TensorDict& previous() const { return previous_; }
  /// Puts the previous values back (once; later calls do nothing).
  void restore();
  /// Keeps the swapped-in values; the destructor then restores nothing.
  void release() { swapped_.clear(); }

 private:
  friend ModuleSwap to_module(const TensorDict& values, torch::nn::Module& module);
  // (the module's tensor, its data before the swap)
  std::vector<std::pair<at::Tensor, at::Tensor>> swapped_;
  TensorDict previous_;
};

/// Writes the tensordict's leaves into the parameters and buffers of `module` with the same
/// names (nested keys follow submodules). The module's tensors keep their identity and
/// registration (their data is swapped, as `Tensor::set_data` does) and then share storage with
/// the tensordict's leaves. KeyError for a key the module does not have.
ModuleSwap to_module(const TensorDict& values, torch::nn::Module& module);

}  // namespace tensordict
