// TensorDictParams, from_modules and the nested registration both they and script modules use.
#include <tensordict/nn/params.h>

#include <tensordict/errors.h>
#include <tensordict/entry.h>

#include "core/format.h"
#include "nn/register_nested.h"

namespace tensordict {
namespace nn {

namespace detail {

void register_nested(torch::nn::Module& root, const std::string& dotted_name, const at::Tensor& tensor,
                     bool parameter) {
  torch::nn::Module* level = &root;
  size_t start = 0;
  for (size_t dot = dotted_name.find('.'); dot != std::string::npos; dot = dotted_name.find('.', start)) {
    const std::string part = dotted_name.substr(start, dot - start);
    std::shared_ptr<torch::nn::Module> child;
    for (const auto& item : level->named_children())
      if (item.key() == part) child = item.value();
    if (!child) child = level->register_module(part, std::make_shared<torch::nn::Module>(part));
    level = child.get();
    start = dot + 1;
  }
  const std::string leaf = dotted_name.substr(start);
  if (parameter) {
    level->register_parameter(leaf, tensor, tensor.requires_grad());
  } else {
    level->register_buffer(leaf, tensor);
  }
}

}  // namespace detail

TensorDictParams::TensorDictParams(TensorDict params, bool buffers_stay)
    : torch::nn::Module("TensorDictParams"), params_(std::move(params)) {
  for (const NestedKey& key : params_.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    const Entry entry = params_.find(key);
    if (!entry.is_tensor()) continue;
    for (const std::string& part : key.parts())
      TD_CHECK(part.find('.') == std::string::npos && !part.empty(), ValueError, "TensorDictParams: key ", key.repr(),
               " has a part with a '.', which a torch::nn parameter name cannot hold");
    at::Tensor leaf = entry.tensor();
    const bool trainable = leaf.is_floating_point() || leaf.is_complex();
    if (buffers_stay && !leaf.requires_grad()) {
      detail::register_nested(*this, key.join("."), leaf, /*parameter=*/false);
      continue;
    }
    TD_CHECK(leaf.is_leaf(), ValueError, "TensorDictParams: ", key.repr(),
             " is computed from other tensors (it has a grad_fn); pass leaves (detach() them)");
    if (trainable && !leaf.requires_grad()) leaf.set_requires_grad(true);
    detail::register_nested(*this, key.join("."), leaf, /*parameter=*/true);
  }
}

TensorDict from_modules(const std::vector<std::shared_ptr<torch::nn::Module>>& modules) {
  TD_CHECK(!modules.empty(), ValueError, "from_modules: no modules given");
  std::vector<TensorDict> each;
  each.reserve(modules.size());
  for (size_t i = 0; i < modules.size(); ++i) {
    TD_CHECK(modules[i] != nullptr, ValueError, "from_modules: module ", i, " is null");
    each.push_back(from_module(*modules[i]));
  }
  const std::vector<NestedKey> keys = each[0].keys(/*include_nested=*/true, /*leaves_only=*/true);
  for (size_t i = 1; i < each.size(); ++i) {
    TD_CHECK(each[i].keys(true, true) == keys, ValueError, "from_modules: module ", i,
             " has other parameters or buffers than module 0");
    for (const NestedKey& key : keys) {
      const at::Tensor a = each[0].get(key), b = each[i].get(key);
      TD_CHECK(a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type(), ValueError, "from_modules: ", key.repr(),
               " of module ", i, " is ", tensordict::detail::size_str(b.sizes()), " ", b.scalar_type(),
               ", of module 0 ", tensordict::detail::size_str(a.sizes()), " ", a.scalar_type());
    }
  }
  TensorDict out = TensorDict::empty_with({static_cast<int64_t>(modules.size())});
  for (const NestedKey& key : keys) {
    std::vector<at::Tensor> parts;
    for (const TensorDict& td : each) parts.push_back(td.get(key).detach());
    at::Tensor stacked = at::stack(parts);
    if (each[0].get(key).requires_grad()) stacked.set_requires_grad(true);
    out.set(key, stacked);
  }
  return out;
}

}  // namespace nn
}  // namespace tensordict
