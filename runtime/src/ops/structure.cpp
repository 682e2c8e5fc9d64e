// Structure of a tensordict (Python's TensorDictBase, issue 33): new_* constructors of the same
// structure, queries over the leaves (dtype, depth, contiguity, gradients) and edits of the key
// tree (popitem, create_nested, fromkeys, filters, clear, replace, auto_batch_size_).

#include <algorithm>
#include <functional>

#include <ATen/ATen.h>
#include <c10/core/DefaultDtype.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/entry.h>
#include <tensordict/ops.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/level_builder.h"
#include "core/validate.h"

namespace tensordict {

using namespace detail;

namespace {

std::vector<int64_t> joined(c10::IntArrayRef head, c10::IntArrayRef tail) {
  std::vector<int64_t> out(head.begin(), head.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

// A non-tensor value under a new batch size: one shared value keeps it; per-row values cannot
// follow a batch they were not made for.
NonTensorData non_tensor_for(const NonTensorData& data, const std::string& key, c10::IntArrayRef old_batch,
                             c10::IntArrayRef new_batch, const char* op) {
  if (data.is_uniform()) return NonTensorData(data.value());
  TD_CHECK(old_batch == new_batch, ValueError, op, ": the non-tensor entry '", key,
           "' holds one value per row of the batch ", old_batch, " and cannot take the batch size ", new_batch);
  return data;
}

// The shared recursion of new_zeros / new_ones / new_empty / new_full: `make(shape, options)`
// makes each leaf, `size` + the leaf's dims past this level's batch.
// Each leaf is made with the level's batch size leading and on its device (o.device, else the
// source's, which its leaves are on), so the level is built without set()'s checks.
TensorDict new_like(const TensorDict& td, c10::IntArrayRef size, const NewOptions& o, const char* op,
                    const std::function<at::Tensor(c10::IntArrayRef, const at::TensorOptions&)>& make) {
  LevelBuilder out(size, o.device ? o.device : td.device(), td.impl()->num_entries());
  const size_t dims = static_cast<size_t>(td.batch_dims());
  td.impl()->for_each([&](const std::string& name, const Entry& entry) {
    if (entry.is_tensor()) {
      const at::Tensor& t = entry.tensor_unchecked();
      at::TensorOptions options = t.options().dtype(o.dtype.value_or(t.scalar_type()));
      if (o.device) options = options.device(*o.device);
      at::Tensor leaf = make(joined(size, t.sizes().slice(dims)), options);
      if (o.requires_grad) leaf.requires_grad_(true);
      out.append(name, std::move(leaf));
    } else if (entry.is_tensordict()) {
      const TensorDict& child = entry.tensordict_unchecked();
      out.append(name, new_like(child, joined(size, child.batch_size().slice(dims)), o, op, make));
    } else if (entry.is_non_tensor()) {
      out.append(name, non_tensor_for(entry.non_tensor(), name, td.batch_size(), size, op));
    }
  });
  return out.finish();
}

// new_tensor: every leaf a copy of `data_of(key)` in the leaf's dtype.
TensorDict new_from(const TensorDict& td, const std::optional<TensorDict>& data_td, const at::Tensor& data,
                    const NewOptions& o) {
  const c10::IntArrayRef size = data_td ? data_td->batch_size() : data.sizes();
  const at::Device device = o.device ? *o.device : (data_td ? data_td->device().value_or(at::kCPU) : data.device());
  TensorDict out = TensorDict::empty_with(size, device);
  for (const auto& [key, entry] : td.items()) {
    const std::string& name = key.parts()[0];
    if (entry.is_tensordict()) {
      std::optional<TensorDict> nested_data;
      if (data_td) nested_data = data_td->get_tensordict(name);
      out.set(name, EntryInit(new_from(entry.tensordict_unchecked(), nested_data, data, o)));
    } else if (entry.is_tensor()) {
      const at::Tensor& source = data_td ? data_td->get(name) : data;
      const at::ScalarType dtype = o.dtype.value_or(entry.tensor_unchecked().scalar_type());
      at::Tensor leaf = source.to(device, dtype, /*non_blocking=*/false, /*copy=*/true).detach();
      if (o.requires_grad) leaf.requires_grad_(true);
      out.set(name, std::move(leaf));
    } else {
      out.set(name, EntryInit(non_tensor_for(entry.non_tensor(), name, td.batch_size(), size, "new_tensor")));
    }
  }
  return out;
}

// True when a level holds a tensor or a non-tensor value at any depth (Python's is_empty is
// the negation: nested levels alone are no content).
bool has_leaf(const TensorDict& td) {
  for (const auto& [key, entry] : td.items()) {
    if (!entry.is_tensordict() || has_leaf(entry.tensordict_unchecked())) return true;
  }
  return false;
}

std::optional<TensorDict> grad_of(const TensorDict& td) {
  // A lazy stack's reads are new stacks: the gradients are on its members' tensors.
  if (LazyStackedTensorDict::is_lazy_stack(td)) {
    LazyStackedTensorDict stack = LazyStackedTensorDict::from(td);
    std::vector<TensorDict> grads;
    for (const TensorDict& member : stack.members()) {
      std::optional<TensorDict> g = grad_of(member);
      if (!g) return std::nullopt;
      grads.push_back(std::move(*g));
    }
    return TensorDict(LazyStackedTensorDict(std::move(grads), stack.stack_dim()));
  }
  TensorDict out = TensorDict::empty_with(td.batch_size(), td.device());
  bool any = false;
  for (const auto& [key, entry] : td.items()) {
    const std::string& name = key.parts()[0];
    if (entry.is_tensor()) {
      const at::Tensor& t = entry.tensor_unchecked();
      if (!t.is_leaf() && !t.retains_grad()) continue;  // autograd keeps no .grad there
      const at::Tensor& g = t.grad();
      if (!g.defined()) continue;
      out.set(name, g);
    } else if (entry.is_tensordict()) {
      std::optional<TensorDict> child = grad_of(entry.tensordict_unchecked());
      if (!child) continue;
      out.set(name, EntryInit(*child));
    } else {
      out.set(name, EntryInit(entry.non_tensor()));
    }
    any = true;
  }
  if (!any) return std::nullopt;
  return out;
}

TensorDict expand_to(const TensorDict& td, const TensorDict& other) {
  TensorDict out = TensorDict::empty_with(other.batch_size(), td.device());
  for (const auto& [key, entry] : td.items()) {
    const std::string& name = key.parts()[0];
    const Entry target = other.get_entry(name);  // KeyError naming the key when other lacks it
    if (entry.is_tensor()) {
      TD_CHECK(target.is_tensor(), TypeError, "expand_as: '", name, "' is a tensor here and ", kind_name(target.kind()),
               " in the target");
      out.set(name, entry.tensor_unchecked().expand_as(target.tensor_unchecked()));
    } else if (entry.is_tensordict()) {
      TD_CHECK(target.is_tensordict(), TypeError, "expand_as: '", name, "' is a tensordict here and ",
               kind_name(target.kind()), " in the target");
      out.set(name, EntryInit(expand_to(entry.tensordict_unchecked(), target.tensordict_unchecked())));
    } else {
      out.set(name, EntryInit(non_tensor_for(entry.non_tensor(), name, td.batch_size(), other.batch_size(), "expand_as")));
    }
  }
  return out;
}

TensorDict without_non_tensors(const TensorDict& td) {
  TensorDict out = TensorDict::empty_with(td.batch_size(), td.device());
  for (const auto& [key, entry] : td.items()) {
    if (entry.is_tensor()) out.set(key, entry.tensor_unchecked());
    if (entry.is_tensordict()) out.set(key, EntryInit(without_non_tensors(entry.tensordict_unchecked())));
  }
  return out;
}

// The leading dims every entry of `td` shares (after its nested levels took theirs).
std::vector<int64_t> common_leading_shape(const TensorDict& td) {
  std::vector<int64_t> common;
  bool any = false;
  for (const auto& [key, entry] : td.items()) {
    c10::IntArrayRef shape;
    if (entry.is_tensor()) {
      shape = entry.tensor_unchecked().sizes();
    } else if (entry.is_tensordict()) {
      const TensorDict& child = entry.tensordict_unchecked();
      // An empty level says nothing about the batch, unless it comes first (as in Python).
      if (any && !has_leaf(child)) continue;
      shape = child.batch_size();
    } else {
      shape = entry.non_tensor().shape();
      if (shape.empty()) continue;  // one shared value fits any batch
    }
    if (!any) {
      common.assign(shape.begin(), shape.end());
      any = true;
      continue;
    }
    size_t n = 0;
    while (n < common.size() && n < shape.size() && common[n] == shape[n]) ++n;
    common.erase(common.begin() + static_cast<std::ptrdiff_t>(n), common.end());
  }
  if (!any) return td.batch_size().vec();
  return common;
}

}  // namespace

TensorDict TensorDict::new_zeros(c10::IntArrayRef size, const NewOptions& options) const {
  return new_like(*this, size, options, "new_zeros",
                  [](c10::IntArrayRef shape, const at::TensorOptions& o) { return at::zeros(shape, o); });
}

TensorDict TensorDict::new_ones(c10::IntArrayRef size, const NewOptions& options) const {
  return new_like(*this, size, options, "new_ones",
                  [](c10::IntArrayRef shape, const at::TensorOptions& o) { return at::ones(shape, o); });
}

TensorDict TensorDict::new_empty(c10::IntArrayRef size, const NewOptions& options) const {
  return new_like(*this, size, options, "new_empty",
                  [](c10::IntArrayRef shape, const at::TensorOptions& o) { return at::empty(shape, o); });
}

TensorDict TensorDict::new_full(c10::IntArrayRef size, const c10::Scalar& fill_value, const NewOptions& options) const {
  return new_like(*this, size, options, "new_full", [&](c10::IntArrayRef shape, const at::TensorOptions& o) {
    return at::full(shape, fill_value, o);
  });
}

TensorDict TensorDict::new_tensor(const at::Tensor& data, const NewOptions& options) const {
  TD_CHECK(data.defined(), ValueError, "new_tensor: the data tensor is undefined");
  return new_from(*this, std::nullopt, data, options);
}

TensorDict TensorDict::new_tensor(const TensorDict& data, const NewOptions& options) const {
  return new_from(*this, data, at::Tensor(), options);
}

std::optional<at::ScalarType> dtype(const TensorDict& td) {
  std::optional<at::ScalarType> out;
  for (const auto& [key, entry] : td.items(/*include_nested=*/true, /*leaves_only=*/true)) {
    const at::ScalarType t = entry.tensor().scalar_type();
    if (out && *out != t) return std::nullopt;
    out = t;
  }
  return out;
}

bool TensorDict::is_contiguous() const {
  for (const auto& [key, entry] : items(/*include_nested=*/true, /*leaves_only=*/true))
    if (!entry.tensor().is_contiguous()) return false;
  return true;
}

int64_t depth(const TensorDict& td) {
  int64_t out = 0;
  for (const auto& [key, entry] : td.items(/*include_nested=*/true))
    if (!entry.is_tensordict()) out = std::max<int64_t>(out, static_cast<int64_t>(key.size()) - 1);
  return out;
}

std::vector<std::string> TensorDict::sorted_keys() const {
  std::vector<std::string> out = impl_->keys();
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<TensorDict> grad(const TensorDict& td) {
  std::optional<TensorDict> out = grad_of(td);
  if (out && td.is_locked()) out->lock_();
  return out;
}

TensorDict& TensorDict::detach_() {
  // A lazy stack's reads are new stacks: its members hold the tensors.
  if (LazyStackedTensorDict::is_lazy_stack(*this)) {
    for (TensorDict member : LazyStackedTensorDict::from(*this).members()) member.detach_();
    return *this;
  }
  for (const auto& [key, entry] : items(/*include_nested=*/true, /*leaves_only=*/true)) {
    const at::Tensor& t = entry.tensor();
    if (!t.requires_grad()) continue;  // nothing to detach
    // Detaching a copy would leave the stored tensor attached: refuse rather than pretend.
    TD_CHECK(impl_->leaves_alias_storage(), NotImplementedError, type_name(), " cannot detach_ ", key.repr(),
             " in place: its reads are copies of the stored tensor");
    try {
      t.detach_();
    } catch (const c10::Error& e) {  // a view: LibTorch detaches only whole tensors in place
      TD_THROW(RuntimeError, "detach_ of ", key.repr(), ": ", e.what_without_backtrace());
    }
  }
  return *this;
}

TensorDict TensorDict::expand_as(const at::Tensor& other) const { return expand(other.sizes()); }

TensorDict TensorDict::expand_as(const TensorDict& other) const { return expand_to(*this, other); }

std::pair<std::string, Entry> TensorDict::popitem() {
  check_unlocked(*impl_);
  std::vector<std::string> names = impl_->keys();
  TD_CHECK(!names.empty(), KeyError, "popitem(): dictionary is empty");
  Entry last = pop(names.back());
  return {names.back(), std::move(last)};
}

TensorDict& TensorDict::create_nested(KeyRef key) {
  check_key(key);
  check_unlocked(*impl_);
  set(key, EntryInit(TensorDict::empty_with(batch_size(), device())));
  return *this;
}

TensorDict TensorDict::fromkeys(const std::vector<NestedKey>& keys, const c10::Scalar& value) {
  // As torch.tensor(value): int64, bool, or the default (complex) floating dtype.
  const at::ScalarType dtype = value.isBoolean()        ? at::kBool
                               : value.isIntegral(false) ? at::kLong
                               : value.isComplex()       ? c10::typeMetaToScalarType(c10::get_default_complex_dtype())
                                                         : c10::typeMetaToScalarType(c10::get_default_dtype());
  TensorDict out;
  for (const NestedKey& key : keys) out.set(key, at::scalar_tensor(value, at::TensorOptions().dtype(dtype)));
  return out;
}

TensorDict TensorDict::fromkeys(const std::vector<NestedKey>& keys, const at::Tensor& value) {
  TD_CHECK(value.defined(), ValueError, "fromkeys: the value tensor is undefined");
  TensorDict out;
  for (const NestedKey& key : keys) out.set(key, value);
  return out;
}

TensorDict TensorDict::fromkeys(const std::vector<NestedKey>& keys, const std::string& value) {
  TensorDict out;
  for (const NestedKey& key : keys) out.set_non_tensor(key, json::Value(value));
  return out;
}

TensorDict TensorDict::filter_non_tensor_data() const { return without_non_tensors(*this); }

std::vector<std::pair<NestedKey, NonTensorData>> TensorDict::non_tensor_items(bool include_nested) const {
  std::vector<std::pair<NestedKey, NonTensorData>> out;
  for (const auto& [key, entry] : items(include_nested))
    if (entry.is_non_tensor()) out.emplace_back(key, entry.non_tensor());
  return out;
}

TensorDict& TensorDict::filter_empty_() {
  // Deepest first, so a level emptied by removing its children goes too.
  std::vector<NestedKey> empty_levels;
  for (const auto& [key, entry] : items(/*include_nested=*/true))
    if (entry.is_tensordict() && !has_leaf(entry.tensordict_unchecked())) empty_levels.push_back(key);
  std::sort(empty_levels.begin(), empty_levels.end(),
            [](const NestedKey& a, const NestedKey& b) { return a.size() > b.size(); });
  for (const NestedKey& key : empty_levels)
    if (contains(key)) erase(key);
  return *this;
}

TensorDict& TensorDict::clear() {
  check_unlocked(*impl_);
  impl_->clear();
  return *this;
}

TensorDict& TensorDict::clear_device_() {
  impl_->clear_device();
  for (const auto& [key, entry] : items())
    if (entry.is_tensordict()) TensorDict(entry.tensordict_unchecked()).clear_device_();
  return *this;
}

TensorDict TensorDict::replace(const TensorDict& entries) const {
  if (entries.num_keys() == 0) return *this;
  TensorDict out = clone(/*recurse=*/false);
  out.update(entries);
  return out;
}

TensorDict& TensorDict::auto_batch_size_(std::optional<int64_t> batch_dims) {
  TD_CHECK(!batch_dims || *batch_dims >= 0, ValueError, "auto_batch_size_: batch_dims must be >= 0, got ", *batch_dims);
  for (const auto& [key, entry] : items())
    if (entry.is_tensordict()) TensorDict(entry.tensordict_unchecked()).auto_batch_size_(batch_dims);
  std::vector<int64_t> shape = common_leading_shape(*this);
  if (batch_dims && static_cast<int64_t>(shape.size()) > *batch_dims) shape.resize(static_cast<size_t>(*batch_dims));
  set_batch_size(shape);
  return *this;
}

}  // namespace tensordict
