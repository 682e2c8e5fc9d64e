// State dicts (semantics 1.16), autograd helpers, pinning and is_empty.

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <tensordict/tensor_dict_impl.h>

#include "detail/format.h"
#include "detail/validate.h"
#include "ops/leafwise.h"

namespace tensordict {

using namespace ops;

namespace {

void state_level(const TensorDictBase& td, const std::string& prefix, std::string_view sep, bool keep_vars,
                 StateDict& out) {
  out.batch_sizes.emplace_back(prefix, td.batch_size().vec());
  td.for_each([&](const std::string& key, const Entry& e) {
    std::string name = prefix.empty() ? key : prefix + std::string(sep) + key;
    if (e.is_tensor()) {
      out.tensors.emplace_back(std::move(name), keep_vars ? e.tensor_unchecked() : e.tensor_unchecked().detach());
    } else if (e.is_tensordict()) {
      state_level(*e.tensordict_unchecked().impl(), name, sep, keep_vars, out);
    }
  });
}

std::vector<std::string> split_key(const std::string& key, const std::string& sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t pos = sep.empty() ? std::string::npos : key.find(sep, start);
    if (pos == std::string::npos) {
      parts.push_back(key.substr(start));
      return parts;
    }
    parts.push_back(key.substr(start, pos - start));
    start = pos + sep.size();
  }
}

std::string list_str(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  return out + "]";
}

const std::vector<int64_t>* batch_of(const StateDict& sd, const std::string& level) {
  for (const auto& [k, v] : sd.batch_sizes) {
    if (k == level) return &v;
  }
  return nullptr;
}

}  // namespace

StateDict TensorDict::state_dict(std::string_view separator, bool keep_vars) const {
  StateDict out;
  out.separator = std::string(separator);
  out.device = device();
  state_level(*impl_, std::string(), separator, keep_vars, out);
  return out;
}

TensorDict& TensorDict::load_state_dict(const StateDict& sd, bool strict, bool assign) {
  if (sd.device && device() && *sd.device != *device()) {
    TD_THROW(RuntimeError, "Loading data from another device is not yet supported.");
  }
  StateDict mine = state_dict(sd.separator, /*keep_vars=*/true);
  std::vector<std::string> expected, got;
  for (const auto& kv : mine.tensors) expected.push_back(kv.first);
  for (const auto& kv : sd.tensors) got.push_back(kv.first);
  if (strict || !assign) {
    std::vector<std::string> a = expected, b = got;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (strict && a != b) {
      TD_THROW(RuntimeError, "Cannot load state-dict because the key sets don't match: got keys ", list_str(got),
               " and the tensordict has keys ", list_str(expected), ".");
    }
  }
  if (assign) {
    detail::check_unlocked(*impl_);
    // A fresh structure with the state dict's batch sizes, then swapped in entry by entry.
    const std::vector<int64_t>* root_batch = batch_of(sd, "");
    TensorDict fresh = empty_with(root_batch ? c10::IntArrayRef(*root_batch) : batch_size(), device());
    for (const auto& [key, value] : sd.tensors) {
      std::vector<std::string> parts = split_key(key, sd.separator);
      TensorDict level = fresh;
      std::string path;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        path = path.empty() ? parts[i] : path + sd.separator + parts[i];
        Entry child = level.find(parts[i]);
        if (!child.defined()) {
          const std::vector<int64_t>* b = batch_of(sd, path);
          level.set(parts[i], EntryInit(empty_with(b ? c10::IntArrayRef(*b) : level.batch_size(), device())));
          child = level.find(parts[i]);
        }
        level = child.tensordict();
      }
      level.set(parts.back(), value);
    }
    std::vector<std::string> old_keys = impl_->keys();
    for (const auto& k : old_keys) impl_->erase(k);
    impl_->set_batch_size(fresh.batch_size());
    fresh.impl()->for_each([&](const std::string& k, const Entry& e) { impl_->insert_or_assign(k, e); });
    return *this;
  }
  for (const auto& [key, value] : sd.tensors) {
    NestedKey path(split_key(key, sd.separator));
    if (!contains(path)) {
      TD_CHECK(!strict, KeyError, "load_state_dict: key ", path.repr(), " not found in the tensordict");
      continue;
    }
    set_(path, value);
  }
  return *this;
}

TensorDict& TensorDict::requires_grad_(bool requires_grad) {
  LeafList leaves;
  collect_leaves(*impl_, leaves);
  for_each_index(*impl_, leaves.size(), "requires_grad_", [&](size_t i) { leaves[i].requires_grad_(requires_grad); });
  return *this;
}

TensorDict& TensorDict::zero_grad(bool set_to_none) {
  LeafList leaves;
  collect_leaves(*impl_, leaves);
  for (auto& t : leaves) {
    at::Tensor& grad = t.mutable_grad();
    if (!grad.defined()) continue;
    if (set_to_none) {
      grad.reset();
    } else {
      grad.detach_();
      grad.zero_();
    }
  }
  return *this;
}

TensorDict TensorDict::pin_memory() const {
  // Pinned (page-locked) memory only speeds up copies to CUDA devices, and LibTorch has no
  // pinned allocator without CUDA: there the leaves are returned as they are.
  if (!at::hasCUDA()) return clone(/*recurse=*/false);
  return keep_lock(impl_->map_leaves([](const at::Tensor& t) { return t.is_cpu() ? t.pin_memory() : t; }, device()),
                   *this);
}

bool TensorDict::is_empty() const {
  bool empty = true;
  std::function<void(const TensorDictBase&)> visit = [&](const TensorDictBase& td) {
    td.for_each([&](const std::string&, const Entry& e) {
      if (e.is_tensor()) empty = false;
      else if (e.is_tensordict() && empty) visit(*e.tensordict_unchecked().impl());
    });
  };
  visit(*impl_);
  return empty;
}

}  // namespace tensordict
