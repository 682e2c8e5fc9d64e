// Autograd helpers: requires_grad_ and zero_grad. They change the leaf tensors themselves, so
// they need leaves that alias their storage: a backend whose reads are copies refuses them
// rather than setting flags on copies nobody keeps.

#include <ATen/ATen.h>

#include <tensordict/tensor_dict.h>

#include "ops/kernel.h"
#include "ops/leafwise.h"

namespace tensordict {

using namespace ops;

namespace {

LeafList stored_leaves(const TensorDict& td, const char* op) {
  const TensorDict tree = readable(td);
  if (!tree.is_same(td)) {
    // Some level's reads are copies: find it to name it.
    std::function<void(const TensorDictBase&)> check = [&](const TensorDictBase& level) {
      TD_CHECK(level.leaves_alias_storage(), NotImplementedError, level.type_name(), " cannot ", op,
               ": its leaves are read as copies, so autograd flags set on them would be lost");
      level.for_each([&](const std::string&, const Entry& e) {
        if (e.is_tensordict()) check(*e.tensordict_unchecked().impl());
      });
    };
    check(*td.impl());
  }
  return leaves_of(tree);
}

}  // namespace

TensorDict& TensorDict::requires_grad_(bool requires_grad) {
  LeafList leaves = stored_leaves(*this, "requires_grad_");
  compute_(
      leaves.size(), false, [] { return false; }, [&](size_t i) { leaves[i].requires_grad_(requires_grad); },
      LeafKeys{*impl_}, "requires_grad_");
  return *this;
}

TensorDict& TensorDict::zero_grad(bool set_to_none) {
  for (auto& t : stored_leaves(*this, "zero_grad")) {
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

}  // namespace tensordict
