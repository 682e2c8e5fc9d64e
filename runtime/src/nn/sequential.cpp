// TensorDictSequential: key bookkeeping follows Python v0.14's tensordict/nn/sequence.py.
#include <tensordict/nn/sequential.h>

#include <algorithm>
#include <ostream>
#include <set>

#include <tensordict/entry.h>

namespace tensordict {
namespace nn {

namespace {

bool has(const Keys& keys, const NestedKey& key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); }

// Python's _compute_in_and_out_keys: an in_key an earlier module writes is an intermediate,
// not an input; an out_key written twice is listed once, at its last writer.
std::pair<Keys, Keys> sequence_keys(const std::vector<std::shared_ptr<TensorDictModuleBase>>& modules) {
  Keys in, out;
  for (const auto& module : modules) {
    for (const NestedKey& key : module->in_keys())
      if (!has(out, key) && !has(in, key)) in.push_back(key);
    out.insert(out.end(), module->out_keys().begin(), module->out_keys().end());
  }
  Keys last;
  for (size_t i = 0; i < out.size(); ++i)
    if (std::find(out.begin() + static_cast<std::ptrdiff_t>(i) + 1, out.end(), out[i]) == out.end())
      last.push_back(out[i]);
  return {in, last};
}

}  // namespace

TensorDictSequential::TensorDictSequential(std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
                                           const Keys& selected_out_keys)
    : TensorDictModuleBase({}, {}), modules_(std::move(modules)) {
  for (size_t i = 0; i < modules_.size(); ++i) {
    TD_CHECK(modules_[i] != nullptr, ValueError, "TensorDictSequential: module ", i, " is null");
    register_module(std::to_string(i), modules_[i]);
  }
  auto [in, out] = sequence_keys(modules_);
  set_keys(std::move(in), std::move(out));
  if (!selected_out_keys.empty()) select_out_keys(selected_out_keys);
}

TensorDict TensorDictSequential::forward(TensorDict td) {
  TensorDict run = narrowed() ? td.clone(/*recurse=*/false) : td;
  for (size_t i = 0; i < modules_.size(); ++i) {
    try {
      run = modules_[i]->forward(run);
    } catch (Error& e) {
      // Which module failed, as Python's note "Failed while executing module '1'".
      e.add_context(c10::str("while running module ", i, " (", modules_[i]->label(), ") of a TensorDictSequential"));
      throw;
    }
  }
  if (!narrowed()) return run;
  // Selected outputs, plus whatever the modules replaced among the input's own keys.
  std::set<NestedKey> written(out_keys().begin(), out_keys().end());
  for (const NestedKey& key : td.keys(/*include_nested=*/true, /*leaves_only=*/true)) written.insert(key);
  for (const NestedKey& key : written) {
    const Entry entry = run.find(key);
    if (entry.defined() && entry.is_tensor()) td.set(key, entry.tensor());
  }
  return td;
}

void TensorDictSequential::pretty_print(std::ostream& stream) const {
  stream << "TensorDictSequential(";
  for (size_t i = 0; i < modules_.size(); ++i) {
    stream << (i ? ", " : "");
    modules_[i]->pretty_print(stream);
  }
  stream << ")";
}

std::shared_ptr<TensorDictSequential> TensorDictSequential::select_subsequence(Keys in_keys, Keys out_keys) const {
  if (in_keys.empty()) in_keys = this->in_keys();
  if (out_keys.empty()) out_keys = this->out_keys();
  std::vector<std::shared_ptr<TensorDictModuleBase>> chosen = modules_;
  std::vector<bool> keep(chosen.size(), true);
  // Forward: a module runs when all its inputs are available; what it writes becomes available.
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (auto seq = std::dynamic_pointer_cast<TensorDictSequential>(chosen[i])) {
      try {
        chosen[i] = seq->select_subsequence(in_keys, {});
      } catch (const ValueError&) {
        keep[i] = false;
        continue;
      }
    }
    const Keys& needs = chosen[i]->in_keys();
    if (std::all_of(needs.begin(), needs.end(), [&](const NestedKey& k) { return has(in_keys, k); })) {
      in_keys.insert(in_keys.end(), chosen[i]->out_keys().begin(), chosen[i]->out_keys().end());
    } else {
      keep[i] = false;
    }
  }
  // Backward: a module stays when it writes a key needed downstream; its inputs become needed.
  for (size_t i = chosen.size(); i-- > 0;) {
    if (!keep[i]) continue;
    const Keys& writes = chosen[i]->out_keys();
    if (std::any_of(writes.begin(), writes.end(), [&](const NestedKey& k) { return has(out_keys, k); })) {
      if (auto seq = std::dynamic_pointer_cast<TensorDictSequential>(chosen[i]))
        chosen[i] = seq->select_subsequence({}, out_keys);
      out_keys.insert(out_keys.end(), chosen[i]->in_keys().begin(), chosen[i]->in_keys().end());
    } else {
      keep[i] = false;
    }
  }
  std::vector<std::shared_ptr<TensorDictModuleBase>> kept;
  for (size_t i = 0; i < chosen.size(); ++i)
    if (keep[i]) kept.push_back(chosen[i]);
  TD_CHECK(!kept.empty(), ValueError,
           "TensorDictSequential::select_subsequence: no modules left; make sure in_keys and out_keys are coherent");
  return std::make_shared<TensorDictSequential>(std::move(kept));
}

}  // namespace nn
}  // namespace tensordict
