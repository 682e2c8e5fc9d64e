#include "core/plain_copy.h"

#include <cstring>
#include <typeinfo>

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>  // GRAIN_SIZE
#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/SmallVector.h>

#include "core/forward_ad.h"
#include "core/strided_view.h"

namespace tensordict {
namespace detail {

namespace {

// Keys a tensor copied here must not have: lazy conjugate or negative bits, or a Python tensor's.
constexpr c10::DispatchKeySet kNotPlain({c10::DispatchKey::Conjugate, c10::DispatchKey::Negative,
                                         c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot});

// A tensor LibTorch copies plainly: a CPU tensor of the TensorImpl class itself (no quantized,
// sparse, functional or Python one), standard contiguous, of `dtype`, with no grad, names or
// lazy bits.
inline bool plain_tensor(const c10::TensorImpl* impl, const at::Tensor& t, caffe2::TypeMeta dtype) {
  return typeid(*impl) == typeid(c10::TensorImpl) && impl->dtype() == dtype && impl->device_type() == c10::kCPU &&
         impl->layout() == c10::kStrided && impl->is_contiguous() && (impl->key_set() & kNotPlain).empty() &&
         !impl->has_named_tensor_meta() && !t.requires_grad();
}

// Whether LibTorch would copy `numel` elements on one thread (below GRAIN_SIZE, one thread, or
// already in a parallel region): a copy it splits over threads is left to it.
inline bool one_thread_copy(int64_t numel) {
  return numel < at::internal::GRAIN_SIZE || at::get_num_threads() == 1 || at::in_parallel_region();
}

// Whether this thread's state lets a copy be made here: no Python mode takes ops (one read of
// the thread's dispatch keys, inline), no forward tangent could be dropped.
inline bool plain_copy_allowed(const c10::impl::LocalDispatchKeySet& keys = c10::impl::tls_local_dispatch_key_set()) {
  return !keys.included_.has(c10::DispatchKey::Python) && !forward_ad_open();
}

// Whether `t` may be written in place here as an in-place op would write it: the copy allowed,
// ADInplaceOrView in effect (the op would bump the version, as this then does), and no
// inference tensor outside inference mode (the op raises there).
inline bool writable_in_place(const at::Tensor& t) {
  const c10::impl::LocalDispatchKeySet keys = c10::impl::tls_local_dispatch_key_set();
  return plain_copy_allowed(keys) && !keys.excluded_.has(c10::DispatchKey::ADInplaceOrView) &&
         !(t.is_inference() && !c10::InferenceMode::is_enabled());
}

// Whether `t` is copied whole here as clone() or to() would make it: such a tensor, with the
// standard strides (which both keep), copied on one thread.
inline bool copied_whole(const c10::TensorImpl* impl, const at::Tensor& t) {
  return plain_tensor(impl, t, impl->dtype()) && has_standard_strides(impl->sizes(), impl->strides()) &&
         one_thread_copy(impl->numel());
}

// Blocks of eight with restrict pointers: GCC vectorizes them at -O2 (its cheap cost model
// leaves a plain loop of unknown length scalar).
template <typename From, typename To>
void convert_elements(const From* __restrict from, To* __restrict to, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) to[i + k] = static_cast<To>(from[i + k]);
  }
  for (; i < n; ++i) to[i] = static_cast<To>(from[i]);
}

// Where a part's bytes start, and how many of them a row of the result takes.
struct Source {
  const char* data;
  size_t block;
};

}  // namespace

at::Tensor join_by_copy(at::TensorList parts, int64_t dim, bool stack) {
  if (parts.empty() || !parts[0].defined()) return {};
  const at::Tensor& first = parts[0];
  const c10::IntArrayRef shape = first.sizes();
  const auto dims = static_cast<int64_t>(shape.size());
  if (dim < 0 || dim > dims || (!stack && dim == dims)) return {};
  if (!plain_copy_allowed()) return {};
  const caffe2::TypeMeta dtype = first.dtype();
  // Each part is `outer` rows (the elements before `dim`) of its own block of bytes (from `dim`
  // on); the result holds, row by row, each part's block in turn.
  // `inner`: the bytes of a part's row (stack), or of one index at `dim` in a row (cat).
  int64_t outer = 1, inner = static_cast<int64_t>(dtype.itemsize());
  for (int64_t d = 0; d < dims; ++d) {
    if (d < dim) outer *= shape[d];
    else if (stack || d > dim) inner *= shape[d];
  }
  int64_t joined = 0;  // the result's size at `dim`
  c10::SmallVector<Source, 16> sources;
  sources.reserve(parts.size());
  for (const at::Tensor& t : parts) {
    if (!t.defined()) return {};
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    if (!plain_tensor(impl, t, dtype)) return {};
    const c10::IntArrayRef s = impl->sizes();
    if (static_cast<int64_t>(s.size()) != dims) return {};
    for (int64_t d = 0; d < dims; ++d) {
      if (s[d] != shape[d] && (stack || d != dim)) return {};
    }
    const int64_t count = stack ? 1 : s[dim];
    joined += count;
    const int64_t block = stack ? inner : count * inner;
    if (block != 0 && outer != 0)
      sources.push_back(Source{static_cast<const char*>(t.data_ptr()), static_cast<size_t>(block)});
  }
  // LibTorch's result is contiguous: cat takes the memory format its first input suggests when
  // that is Contiguous, which a standard-contiguous tensor always suggests (LibTorch reads every
  // ambiguous case, size-one dims included, as contiguous).
  c10::SmallVector<int64_t, 6> sizes(shape.begin(), shape.end());
  if (stack) sizes.insert(sizes.begin() + dim, joined);
  else sizes[dim] = joined;
  const int64_t numel = c10::multiply_integers(sizes);
  if (!one_thread_copy(numel)) return {};
  at::Tensor out = at::empty(sizes, first.options());
  char* dst = static_cast<char*>(out.data_ptr());
  for (int64_t o = 0; o < outer; ++o) {
    for (Source& src : sources) {
      std::memcpy(dst, src.data, src.block);
      dst += src.block;
      src.data += src.block;
    }
  }
  return out;
}

at::Tensor stack_tensors(at::TensorList parts, int64_t dim) {
  const int64_t wrapped = dim < 0 && !parts.empty() && parts[0].defined() ? dim + parts[0].dim() + 1 : dim;
  at::Tensor joined = join_by_copy(parts, wrapped, /*stack=*/true);
  return joined.defined() ? joined : at::stack(parts, dim);
}

at::Tensor clone_tensor(const at::Tensor& t) {
  if (!t.defined() || !plain_copy_allowed()) return t.clone();
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (!copied_whole(impl, t)) return t.clone();
  const int64_t numel = impl->numel();
  at::Tensor out = at::empty(impl->sizes(), t.options());
  if (numel != 0) std::memcpy(out.data_ptr(), t.data_ptr(), static_cast<size_t>(numel) * impl->dtype().itemsize());
  return out;
}

at::Tensor convert_tensor(const at::Tensor& t, at::ScalarType dtype) {
  if (!t.defined() || t.scalar_type() == dtype || !plain_copy_allowed()) return t.to(dtype);
  const at::ScalarType from = t.scalar_type();
  const bool pair = (from == at::kFloat && dtype == at::kDouble) || (from == at::kDouble && dtype == at::kFloat);
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (!pair || !copied_whole(impl, t)) return t.to(dtype);
  const int64_t numel = impl->numel();
  at::Tensor out = at::empty(impl->sizes(), t.options().dtype(dtype));
  if (numel == 0) return out;
  if (from == at::kFloat) convert_elements(static_cast<const float*>(t.data_ptr()), static_cast<double*>(out.data_ptr()), numel);
  else convert_elements(static_cast<const double*>(t.data_ptr()), static_cast<float*>(out.data_ptr()), numel);
  return out;
}

bool copy_rows_into(const at::Tensor& leaf, int64_t start, int64_t rows, bool drop_dim, const at::Tensor& value) {
  if (!leaf.defined() || !value.defined() || !writable_in_place(leaf)) return false;
  const c10::TensorImpl* dest = leaf.unsafeGetTensorImpl();
  const c10::TensorImpl* src = value.unsafeGetTensorImpl();
  if (!plain_tensor(dest, leaf, dest->dtype()) || !plain_tensor(src, value, dest->dtype())) return false;
  const c10::IntArrayRef shape = dest->sizes(), given = src->sizes();
  if (shape.empty() || start < 0 || rows < 0 || start + rows > shape[0] || (drop_dim && rows != 1)) return false;
  // The rows' shape exactly: copy_'s broadcast is left to it.
  const size_t skip = drop_dim ? 1 : 0;
  if (given.size() + skip != shape.size() || (!drop_dim && given[0] != rows)) return false;
  for (size_t d = 1; d < shape.size(); ++d) {
    if (given[d - skip] != shape[d]) return false;
  }
  const int64_t numel = src->numel();
  if (!one_thread_copy(numel)) return false;
  // copy_ handles a source that overlaps its destination.
  if (numel != 0 && value.is_alias_of(leaf)) return false;
  if (numel != 0) {
    const auto element = static_cast<int64_t>(dest->dtype().itemsize());
    std::memcpy(static_cast<char*>(leaf.data_ptr()) + start * (numel / rows) * element, value.data_ptr(),
                static_cast<size_t>(numel * element));
  }
  const_cast<c10::TensorImpl*>(dest)->bump_version();  // as copy_ on a view of the leaf does
  return true;
}

bool copy_bytes_into(const at::Tensor& bytes, int64_t offset, const at::Tensor& value) {
  if (!bytes.defined() || !value.defined() || !writable_in_place(bytes)) return false;
  const c10::TensorImpl* dest = bytes.unsafeGetTensorImpl();
  const c10::TensorImpl* src = value.unsafeGetTensorImpl();
  if (!plain_tensor(dest, bytes, caffe2::TypeMeta::Make<uint8_t>()) || dest->dim() != 1 ||
      !plain_tensor(src, value, src->dtype()))
    return false;
  const int64_t numel = src->numel(), nbytes = numel * static_cast<int64_t>(src->dtype().itemsize());
  if (offset < 0 || offset + nbytes > dest->numel()) return false;
  if (!one_thread_copy(numel)) return false;
  if (nbytes != 0 && value.is_alias_of(bytes)) return false;
  if (nbytes != 0) std::memcpy(static_cast<char*>(bytes.data_ptr()) + offset, value.data_ptr(), static_cast<size_t>(nbytes));
  const_cast<c10::TensorImpl*>(dest)->bump_version();  // as copy_ on a view of `bytes` does
  return true;
}

bool zero_plain(const at::Tensor& t) {
  if (!t.defined() || !writable_in_place(t)) return false;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (!plain_tensor(impl, t, impl->dtype())) return false;
  const int64_t numel = impl->numel();
  if (!one_thread_copy(numel)) return false;
  if (numel != 0) std::memset(t.data_ptr(), 0, static_cast<size_t>(numel) * impl->dtype().itemsize());
  const_cast<c10::TensorImpl*>(impl)->bump_version();  // as zero_ does
  return true;
}

}  // namespace detail
}  // namespace tensordict
