// Copies, device and dtype conversions, in-place fills.

#include <ATen/ATen.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/tensor_dict_impl.h>

#include "detail/validate.h"

namespace tensordict {

namespace {
TensorDict keep_lock(TensorDict out, const TensorDict& src) {
  if (src.is_locked()) out.lock_();
  return out;
}
}  // namespace

TensorDict TensorDict::to(at::Device device, bool non_blocking) const {
  if (this->device() == device) return *this;
  return keep_lock(impl_->map_leaves([&](const at::Tensor& t) { return t.to(device, non_blocking); },
                                     device),
                   *this);
}

TensorDict TensorDict::to(at::ScalarType dtype) const {
  return keep_lock(impl_->map_leaves([&](const at::Tensor& t) { return t.to(dtype); }, device()),
                   *this);
}

TensorDict TensorDict::to(at::Device device, at::ScalarType dtype, bool non_blocking) const {
  return keep_lock(
      impl_->map_leaves([&](const at::Tensor& t) { return t.to(device, dtype, non_blocking); }, device),
      *this);
}

TensorDict TensorDict::cpu() const { return to(at::Device(at::kCPU)); }

TensorDict TensorDict::clone(bool recurse) const {
  if (recurse) return impl_->map_leaves([](const at::Tensor& t) { return t.clone(); }, device());
  return impl_->map_leaves([](const at::Tensor& t) { return t; }, device());
}

TensorDict TensorDict::detach() const {
  return keep_lock(impl_->map_leaves([](const at::Tensor& t) { return t.detach(); }, device()), *this);
}

TensorDict TensorDict::contiguous() const {
  return impl_->map_leaves([](const at::Tensor& t) { return t.contiguous(); }, device());
}

namespace {
TensorDict empty_structure(const TensorDictBase& td, bool recurse) {
  auto out = c10::make_intrusive<TensorDictImpl>(td.batch_size(), td.device());
  if (recurse) {
    td.for_each([&](const std::string& key, const Entry& entry) {
      if (entry.is_tensordict()) {
        out->append_unchecked(key, empty_structure(*entry.tensordict_unchecked().impl(), true));
      }
    });
  }
  return TensorDict(std::move(out));
}

void for_each_leaf(const TensorDictBase& td, const std::function<void(const at::Tensor&)>& fn) {
  td.for_each([&](const std::string&, const Entry& entry) {
    if (entry.is_tensor()) fn(entry.tensor_unchecked());
    else if (entry.is_tensordict()) for_each_leaf(*entry.tensordict_unchecked().impl(), fn);
  });
}
}  // namespace

TensorDict TensorDict::empty(bool recurse) const { return empty_structure(*impl_, recurse); }

TensorDict TensorDict::empty_like() const {
  return impl_->map_leaves([](const at::Tensor& t) { return at::empty_like(t); }, device());
}

TensorDict& TensorDict::zero_() {
  for_each_leaf(*impl_, [](const at::Tensor& t) { t.zero_(); });
  return *this;
}

TensorDict& TensorDict::fill_(KeyRef key, const c10::Scalar& value) {
  get(key).fill_(value);
  return *this;
}

TensorDict& TensorDict::fill_(const c10::Scalar& value) {
  for_each_leaf(*impl_, [&](const at::Tensor& t) { t.fill_(value); });
  return *this;
}

}  // namespace tensordict
