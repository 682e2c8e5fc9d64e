// TensorDictModuleBase and TensorDictModule: keys in, callable, keys out.
#include <tensordict/nn/module.h>

#include <algorithm>
#include <ostream>

#include <c10/util/Exception.h>

#include <tensordict/entry.h>

#include "core/format.h"

namespace tensordict {
namespace nn {

namespace {

std::string keys_repr(const Keys& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", " : "") + keys[i].repr();
  return out + "]";
}

bool discarded(const NestedKey& key) { return key.size() == 1 && key.parts()[0] == "_"; }

}  // namespace

TensorDictModuleBase::TensorDictModuleBase(Keys in_keys, Keys out_keys) {
  set_keys(std::move(in_keys), std::move(out_keys));
}

void TensorDictModuleBase::set_keys(Keys in_keys, Keys out_keys) {
  in_keys_ = std::move(in_keys);
  all_out_keys_ = std::move(out_keys);
  out_keys_ = all_out_keys_;
}

void TensorDictModuleBase::select_out_keys(const Keys& keys) {
  for (const NestedKey& key : keys)
    TD_CHECK(std::find(all_out_keys_.begin(), all_out_keys_.end(), key) != all_out_keys_.end(), ValueError, label(),
             ": select_out_keys: ", key.repr(), " is not one of its out_keys ", keys_repr(all_out_keys_));
  out_keys_ = keys;
}

TensorDictModule::TensorDictModule(TensorFunction function, Keys in_keys, Keys out_keys, std::string name, int)
    : TensorDictModuleBase(std::move(in_keys), std::move(out_keys)), function_(std::move(function)),
      name_(std::move(name)) {
  TD_CHECK(function_ != nullptr, ValueError, label(), ": no callable given");
  for (const NestedKey& key : this->in_keys())
    TD_CHECK(!key.empty() && !discarded(key), ValueError, label(), ": ", key.repr(), " cannot be an in_key");
  for (const NestedKey& key : all_out_keys())
    TD_CHECK(!key.empty(), ValueError, label(), ": an empty out_key");
}

std::vector<at::Tensor> TensorDictModule::read_inputs(const TensorDict& td) const {
  std::vector<at::Tensor> inputs;
  inputs.reserve(in_keys().size());
  for (const NestedKey& key : in_keys()) {
    const Entry entry = td.find(key);
    if (!entry.defined()) {
      std::vector<std::string> present;
      for (const NestedKey& k : td.keys(/*include_nested=*/true, /*leaves_only=*/true)) present.push_back(k.repr());
      TD_THROW(KeyError, label(), ": in_key ", key.repr(), " not found in the input, whose keys are ",
               tensordict::detail::keys_str(present));
    }
    TD_CHECK(entry.is_tensor(), TypeError, label(), ": in_key ", key.repr(), " holds ", kind_name(entry.kind()),
             ", not a tensor");
    inputs.push_back(entry.tensor());
  }
  return inputs;
}

void TensorDictModule::write_outputs(TensorDict& td, const std::vector<at::Tensor>& outputs) const {
  const Keys& all = all_out_keys();
  TD_CHECK(outputs.size() == all.size(), ValueError, label(), ": returned ", outputs.size(), " tensor",
           outputs.size() == 1 ? "" : "s", " for ", all.size(), " out_keys ", keys_repr(all));
  const c10::IntArrayRef batch = td.batch_size();
  for (size_t i = 0; i < all.size(); ++i) {
    if (discarded(all[i])) continue;
    if (narrowed() && std::find(out_keys().begin(), out_keys().end(), all[i]) == out_keys().end()) continue;
    const at::Tensor& out = outputs[i];
    TD_CHECK(out.defined(), ValueError, label(), ": out_key ", all[i].repr(), " got an undefined tensor");
    TD_CHECK(out.dim() >= static_cast<int64_t>(batch.size()) && out.sizes().slice(0, batch.size()) == batch,
             ShapeError, label(), ": out_key ", all[i].repr(), " got a tensor of shape ", tensordict::detail::size_str(out.sizes()),
             ", whose leading dims are not the batch size ", tensordict::detail::size_str(batch));
    td.set(all[i], out);
  }
}

void TensorDictModule::throw_failed(const std::vector<at::Tensor>& inputs, const std::string& why) const {
  // LibTorch's message says what failed, not where: name the module and what it was given.
  std::string given;
  for (size_t i = 0; i < inputs.size(); ++i)
    given += (i ? ", " : "") + in_keys()[i].repr() + " " + tensordict::detail::size_str(inputs[i].sizes());
  TD_THROW(RuntimeError, label(), " failed on in_keys ", given.empty() ? "[]" : given, ": ", why);
}

TensorDict TensorDictModule::forward(TensorDict td) {
  const std::vector<at::Tensor> inputs = read_inputs(td);
  std::vector<at::Tensor> outputs;
  try {
    outputs = function_(inputs);
  } catch (const Error&) {
    throw;  // ours already names what failed
  } catch (const c10::Error& e) {
    throw_failed(inputs, e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw_failed(inputs, e.what());  // TorchScript's interpreter errors, a callable's own
  }
  write_outputs(td, outputs);
  return td;
}

void TensorDictModule::pretty_print(std::ostream& stream) const {
  stream << "TensorDictModule(module=" << name_ << ", in_keys=" << keys_repr(in_keys())
         << ", out_keys=" << keys_repr(out_keys()) << ")";
}

}  // namespace nn
}  // namespace tensordict
