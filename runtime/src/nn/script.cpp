// TorchScript modules wrapped as TensorDictModules: inputs positional or as one dict, outputs a
// tensor, a tuple, a list or a dict.
#include <tensordict/nn/script.h>

#include <torch/script.h>

#include <tensordict/errors.h>

#include "nn/register_nested.h"

namespace tensordict {
namespace nn {

namespace {

std::string dict_key(const NestedKey& key, const std::string& separator) { return key.join(separator); }

std::string ivalue_kind(const c10::IValue& v) { return v.tagKind(); }

at::Tensor as_tensor(const c10::IValue& v, const std::string& label, const std::string& what) {
  TD_CHECK(v.isTensor(), TypeError, label, ": ", what, " is a ", ivalue_kind(v), ", not a tensor");
  return v.toTensor();
}

// One tensor per out_key, from what the script returned.
std::vector<at::Tensor> outputs_of(const c10::IValue& result, const Keys& out_keys, const ScriptOptions& options,
                                   const std::string& label) {
  std::vector<at::Tensor> out;
  if (result.isTensor()) return {result.toTensor()};
  if (result.isTuple()) {
    const auto& items = result.toTupleRef().elements();
    for (size_t i = 0; i < items.size(); ++i) out.push_back(as_tensor(items[i], label, c10::str("output ", i)));
    return out;
  }
  if (result.isTensorList()) {
    for (const at::Tensor& t : result.toTensorVector()) out.push_back(t);
    return out;
  }
  if (result.isGenericDict()) {
    const c10::impl::GenericDict dict = result.toGenericDict();
    for (const NestedKey& key : out_keys) {
      const std::string name = dict_key(key, options.separator);
      auto it = dict.find(c10::IValue(name));
      if (it == dict.end()) {
        std::vector<std::string> present;
        for (const auto& item : dict) present.push_back(item.key().isString() ? item.key().toStringRef() : "?");
        TD_THROW(KeyError, label, ": the returned dict has no entry '", name, "' for out_key ", key.repr(),
                 "; it has ", c10::Join(", ", present));
      }
      out.push_back(as_tensor(it->value(), label, "the returned entry '" + name + "'"));
    }
    return out;
  }
  TD_THROW(TypeError, label, ": returned a ", ivalue_kind(result),
           "; expected a tensor, a tuple or list of tensors, or a Dict[str, Tensor]");
}

}  // namespace

std::shared_ptr<TensorDictModule> script_module(const torch::jit::Module& script, Keys in_keys, Keys out_keys,
                                                const ScriptOptions& options) {
  const std::string name = script.type()->name() ? script.type()->name()->name() : "ScriptModule";
  const std::string label = "TensorDictModule(" + name + ")";
  TD_CHECK(script.find_method(options.method).has_value(), ValueError, label, ": the script has no method '",
           options.method, "'");
  torch::jit::Method method = script.get_method(options.method);
  auto call = [method, in_keys, out_keys, options, label](const std::vector<at::Tensor>& in) mutable {
    std::vector<c10::IValue> args;
    if (options.inputs == ScriptInputs::Dict) {
      c10::Dict<std::string, at::Tensor> dict;
      for (size_t i = 0; i < in.size(); ++i) dict.insert(dict_key(in_keys[i], options.separator), in[i]);
      args.emplace_back(std::move(dict));
    } else {
      args.assign(in.begin(), in.end());
    }
    return outputs_of(method(std::move(args)), out_keys, options, label);
  };
  auto module = std::make_shared<TensorDictModule>(std::move(call), std::move(in_keys), std::move(out_keys), name);
  for (const auto& p : script.named_parameters(/*recurse=*/true))
    detail::register_nested(*module, "script." + p.name, p.value, /*parameter=*/true);
  for (const auto& b : script.named_buffers(/*recurse=*/true))
    detail::register_nested(*module, "script." + b.name, b.value, /*parameter=*/false);
  return module;
}

std::shared_ptr<TensorDictModule> load_script_module(const std::string& path, Keys in_keys, Keys out_keys,
                                                     const ScriptOptions& options) {
  torch::jit::Module script;
  try {
    script = torch::jit::load(path);
  } catch (const c10::Error& e) {
    TD_THROW(StorageError, path, ": cannot load a TorchScript module: ", e.what_without_backtrace());
  }
  return script_module(script, std::move(in_keys), std::move(out_keys), options);
}

}  // namespace nn
}  // namespace tensordict
