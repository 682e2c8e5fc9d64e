// State dicts (semantics 1.16): flat, with the batch size of every level; loading in place or by
// assignment.

#include <algorithm>

#include <ATen/ATen.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "core/detach_leaf.h"
#include "core/format.h"
#include "core/validate.h"
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
      out.tensors.emplace_back(std::move(name), keep_vars ? e.tensor_unchecked() : detail::detach_leaf(e.tensor_unchecked()));
    } else if (e.is_tensordict()) {
      state_level(*e.tensordict_unchecked().impl(), name, sep, keep_vars, out);
    }
  });
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
  state_level(*ops::readable(*this).impl(), std::string(), separator, keep_vars, out);
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
      const std::vector<std::string> parts = NestedKey::split(key, sd.separator).parts();
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
    const NestedKey path = NestedKey::split(key, sd.separator);
    if (!contains(path)) {
      TD_CHECK(!strict, KeyError, "load_state_dict: key ", path.repr(), " not found in the tensordict");
      continue;
    }
    set_(path, value);
  }
  return *this;
}

}  // namespace tensordict
