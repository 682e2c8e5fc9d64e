// from_module / to_module for torch::nn::Module (semantics 1.16).

#include <tensordict/module.h>

#include <ATen/ATen.h>

#include <tensordict/entry.h>

namespace tensordict {

TensorDict from_module(const torch::nn::Module& module, bool lock, bool filter_empty) {
  TensorDict out;
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (item.value().defined()) out.set(item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (item.value().defined()) out.set(item.key(), item.value());
  }
  for (const auto& child : module.named_children()) {
    TensorDict sub = from_module(*child.value(), /*lock=*/false, filter_empty);
    if (filter_empty && sub.is_empty()) continue;
    out.set(child.key(), EntryInit(sub));
  }
  if (lock) out.lock_();
  return out;
}

ModuleSwap::ModuleSwap(ModuleSwap&& other) noexcept
    : swapped_(std::move(other.swapped_)), previous_(std::move(other.previous_)) {
  other.swapped_.clear();
}

ModuleSwap& ModuleSwap::operator=(ModuleSwap&& other) noexcept {
  if (this != &other) {
    restore();
    swapped_ = std::move(other.swapped_);
    previous_ = std::move(other.previous_);
    other.swapped_.clear();
  }
  return *this;
}

ModuleSwap::~ModuleSwap() { restore(); }

void ModuleSwap::restore() {
  // Reverse order, so a tensor swapped twice ends with its first value.
  for (auto it = swapped_.rbegin(); it != swapped_.rend(); ++it) it->first.set_data(it->second);
  swapped_.clear();
}

namespace {

void swap_level(const TensorDict& values, torch::nn::Module& module, const NestedKey& prefix,
                std::vector<std::pair<at::Tensor, at::Tensor>>& swapped, TensorDict& previous) {
  auto params = module.named_parameters(/*recurse=*/false);
  auto buffers = module.named_buffers(/*recurse=*/false);
  auto children = module.named_children();
  for (const auto& [key, entry] : values.items()) {
    const std::string& name = key[0];
    const NestedKey full = prefix.child(name);
    if (entry.is_tensordict()) {
      auto* child = children.find(name);
      TD_CHECK(child != nullptr, KeyError, "to_module: the module has no submodule named ", full.repr());
      TensorDict sub;
      swap_level(entry.tensordict_unchecked(), **child, full, swapped, sub);
      previous.set(name, EntryInit(sub));
      continue;
    }
    if (!entry.is_tensor()) continue;
    at::Tensor* target = params.find(name);
    if (target == nullptr) target = buffers.find(name);
    TD_CHECK(target != nullptr, KeyError, "to_module: the module has no parameter or buffer named ", full.repr());
    const at::Tensor& value = entry.tensor_unchecked();
    at::Tensor old = target->variable_data();
    try {
      target->set_data(value);
    } catch (const c10::Error& e) {
      TD_THROW(TypeError, "to_module: cannot swap ", full.repr(), " (module tensor ", target->sizes(), " ",
               target->scalar_type(), ", value ", value.sizes(), " ", value.scalar_type(), "): ",
               e.what_without_backtrace());
    }
    swapped.emplace_back(*target, old);
    previous.set(name, old);
  }
}

}  // namespace

ModuleSwap to_module(const TensorDict& values, torch::nn::Module& module) {
  ModuleSwap guard;
  try {
    swap_level(values, module, NestedKey(), guard.swapped_, guard.previous_);
  } catch (...) {
    guard.restore();  // leave the module as it was
    throw;
  }
  return guard;
}

}  // namespace tensordict
