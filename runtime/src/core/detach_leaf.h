#pragma once
// What `t.detach()` returns, built without the dispatcher: a TensorImpl over the same storage
// with the same sizes, strides, offset, dtype, key set and names, sharing t's version counter,
// with no autograd meta (so no grad, grad_fn or forward tangent). A tensordict's detach() makes
// one per leaf; through the autograd and ADInplaceOrView layers each costs about ten times more.

#include <typeinfo>

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace tensordict {
namespace detail {

/// Whether this thread's dispatch state lets detach() be built directly here: not while
/// ADInplaceOrView is excluded (LibTorch's own detach then gives the result a new version counter)
/// or a Python mode takes ops.
inline bool detach_direct_allowed() {
  return !c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::ADInplaceOrView) &&
         !c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Python);
}

/// t.detach(), directly for a plain strided tensor (a c10::TensorImpl itself, not an inference
/// tensor); any other goes through the dispatcher.
inline at::Tensor detach_leaf(const at::Tensor& t) {
  if (!t.defined()) return t.detach();
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  // A Python subclass takes its own detach.
  const c10::DispatchKeySet keys = impl->key_set();
  if (typeid(*impl) != typeid(c10::TensorImpl) || t.is_inference() || !detach_direct_allowed() ||
      keys.has(c10::DispatchKey::Python) || keys.has(c10::DispatchKey::PythonTLSSnapshot))
    return t.detach();
  if (t.has_names() || impl->is_wrapped_number()) {
    // What autograd's detach does after the kernel: the same call, the same arguments (the copy
    // gets no autograd meta; names and the wrapped-number flag are copied).
    return at::Tensor(impl->shallow_copy_and_detach(impl->version_counter(), /*allow_tensor_metadata_change=*/false));
  }
  // The same TensorImpl, built as a made leaf is (core/strided_view.h): a third of the copy's
  // cost, which also copies metadata a plain tensor does not have.
  auto out = c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(t.storage()), keys, t.dtype());
  out->set_sizes_and_strides(t.sizes(), t.strides());
  out->set_storage_offset(t.storage_offset());
  out->set_version_counter(impl->version_counter());
  return at::Tensor(std::move(out));
}

}  // namespace detail
}  // namespace tensordict
