// The LazyStackedTensorDict handle: construction, member access, ragged reads (as a list,
// padded, nested), append/insert/extend and densify.

#include <tensordict/backends/lazy_stack.h>

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/ops/_nested_tensor_from_tensor_list.h>

#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "backends/in_memory/level_builder.h"
#include "backends/lazy_stack/lazy_stack_impl.h"
#include "core/format.h"
#include "core/plain_copy.h"
#include "core/validate.h"

namespace tensordict {

using detail::size_str;
using lazy::LazyStackImpl;

namespace {

LazyStackImpl& stack_of(const TensorDict& td) { return static_cast<LazyStackImpl&>(*td.impl()); }

int64_t wrap_stack_dim(int64_t dim, const std::vector<TensorDict>& tds) {
  TD_CHECK(!tds.empty(), ValueError, "items cannot be empty");
  const int64_t dims = tds.front().batch_dims();
  return dim < 0 ? dim + dims + 1 : dim;
}

std::vector<at::Tensor> leaves_at(const LazyStackImpl& s, KeyRef key) {
  std::vector<at::Tensor> out;
  out.reserve(s.members().size());
  for (const TensorDict& m : s.members()) out.push_back(m.get(key));
  return out;
}

// Pads `t` with `value` to `shape` (same rank), on the right or on the left of every dim.
at::Tensor pad_to(const at::Tensor& t, c10::IntArrayRef shape, double value, PaddingSide side) {
  std::vector<int64_t> pad;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t missing = shape[d] - t.size(d);
    pad.push_back(side == PaddingSide::Left ? missing : 0);
    pad.push_back(side == PaddingSide::Left ? 0 : missing);
  }
  return at::constant_pad_nd(t, pad, value);
}

at::Tensor padded(const std::vector<at::Tensor>& leaves, int64_t stack_dim, double value, PaddingSide side,
                  const std::string& what) {
  std::vector<int64_t> shape(leaves.front().sizes().begin(), leaves.front().sizes().end());
  for (const at::Tensor& t : leaves) {
    TD_CHECK(t.dim() == static_cast<int64_t>(shape.size()), ShapeError, "cannot pad ", what,
             ": the members' leaves have different ranks (", size_str(leaves.front().sizes()), " and ",
             size_str(t.sizes()), ")");
    for (size_t d = 0; d < shape.size(); ++d) shape[d] = std::max(shape[d], t.size(static_cast<int64_t>(d)));
  }
  std::vector<at::Tensor> out;
  out.reserve(leaves.size());
  for (const at::Tensor& t : leaves) out.push_back(pad_to(t, shape, value, side));
  return detail::stack_tensors(out, stack_dim);
}

at::Tensor nested(const std::vector<at::Tensor>& leaves, int64_t stack_dim, const std::string& what) {
  TD_CHECK(stack_dim == 0, ValueError, "a nested tensor of ", what, " needs stack_dim 0, the lazy stack has stack_dim ",
           stack_dim, "; use get_padded or get_as_list");
  return at::_nested_tensor_from_tensor_list(leaves, c10::nullopt, c10::nullopt, c10::nullopt, c10::nullopt);
}

}  // namespace

// ---- Construction -------------------------------------------------------------------------------

LazyStackedTensorDict::LazyStackedTensorDict(std::vector<TensorDict> members, int64_t stack_dim, bool strict_shape)
    : TensorDict(lazy::make_stack(members, wrap_stack_dim(stack_dim, members), strict_shape)) {}

LazyStackedTensorDict LazyStackedTensorDict::empty(c10::IntArrayRef member_batch_size, int64_t stack_dim,
                                                   std::optional<at::Device> device) {
  if (stack_dim < 0) stack_dim += static_cast<int64_t>(member_batch_size.size()) + 1;
  return LazyStackedTensorDict(lazy::make_empty(member_batch_size, stack_dim, device));
}

bool LazyStackedTensorDict::is_lazy_stack(const TensorDict& td) { return lazy::as_stack(td) != nullptr; }

LazyStackedTensorDict LazyStackedTensorDict::from(const TensorDict& td) {
  TD_CHECK(is_lazy_stack(td), TypeError, "expected a LazyStackedTensorDict, got a ", td.type_name());
  return LazyStackedTensorDict(td);
}

LazyStackedTensorDict lazy_stack(const std::vector<TensorDict>& tds, int64_t dim) {
  return LazyStackedTensorDict(tds, dim);
}

namespace {

// Same keys, kinds and leaf shapes at every level (what a dense stack needs).
bool same_structure(const TensorDict& a, const TensorDict& b) {
  if (a.batch_size() != b.batch_size()) return false;
  std::vector<std::string> keys = a.impl()->keys();
  if (keys != b.impl()->keys()) {
    std::vector<std::string> other = b.impl()->keys();
    std::sort(keys.begin(), keys.end());
    std::sort(other.begin(), other.end());
    if (keys != other) return false;
  }
  for (const std::string& key : keys) {
    const EntryKind kind = a.impl()->kind(key);
    if (kind != b.impl()->kind(key)) return false;
    if (kind == EntryKind::Tensor && a.impl()->leaf_meta(key).shape != b.impl()->leaf_meta(key).shape) return false;
    if (kind == EntryKind::TensorDict &&
        !same_structure(a.impl()->get(key).tensordict_unchecked(), b.impl()->get(key).tensordict_unchecked())) {
      return false;
    }
  }
  return true;
}

}  // namespace

TensorDict maybe_dense_stack(const std::vector<TensorDict>& tds, int64_t dim) {
  TD_CHECK(!tds.empty(), ValueError, "items cannot be empty");
  for (size_t i = 1; i < tds.size(); ++i) {
    if (!same_structure(tds.front(), tds[i])) return lazy_stack(tds, dim);
  }
  return stack(tds, dim);
}

// ---- Members ------------------------------------------------------------------------------------

int64_t LazyStackedTensorDict::stack_dim() const { return stack_of(*this).stack_dim(); }
c10::ArrayRef<TensorDict> LazyStackedTensorDict::members() const { return stack_of(*this).members(); }
int64_t LazyStackedTensorDict::num_members() const { return stack_of(*this).count(); }

TensorDict LazyStackedTensorDict::member(int64_t i) const {
  const int64_t n = num_members();
  TD_CHECK(i >= -n && i < n, IndexError, "member ", i, " is out of range for a lazy stack of ", n, " members");
  return members()[static_cast<size_t>(i < 0 ? i + n : i)];
}

bool LazyStackedTensorDict::has_member(const TensorDict& td) const {
  const auto& ms = members();
  return std::any_of(ms.begin(), ms.end(), [&](const TensorDict& m) { return m.is_same(td); });
}

std::vector<std::string> LazyStackedTensorDict::exclusive_keys() const { return stack_of(*this).exclusive_keys(); }

// ---- Ragged reads -------------------------------------------------------------------------------

std::vector<at::Tensor> LazyStackedTensorDict::get_as_list(KeyRef key) const { return leaves_at(stack_of(*this), key); }

at::Tensor LazyStackedTensorDict::get_padded(KeyRef key, double padding_value, PaddingSide side) const {
  TD_CHECK(num_members() > 0, ValueError, "get_padded of ", key.repr(), ": the lazy stack has no members");
  return padded(get_as_list(key), stack_dim(), padding_value, side, key.repr());
}

at::Tensor LazyStackedTensorDict::get_nested(KeyRef key) const {
  TD_CHECK(num_members() > 0, ValueError, "get_nested of ", key.repr(), ": the lazy stack has no members");
  return nested(get_as_list(key), stack_dim(), key.repr());
}

// ---- Growing ------------------------------------------------------------------------------------

LazyStackedTensorDict& LazyStackedTensorDict::insert(int64_t index, const TensorDict& td) {
  LazyStackImpl& s = stack_of(*this);
  detail::check_unlocked(s);
  const int64_t n = s.count();
  TD_CHECK(index >= -n - 1 && index <= n, IndexError, "insert position ", index, " is out of range for a lazy stack of ",
           n, " members");
  if (index < 0) index += n + 1;
  BatchSize expected = s.member_batch();
  bool fits = td.batch_dims() == static_cast<int64_t>(expected.size());
  for (size_t d = 0; fits && d < expected.size(); ++d) fits = expected[d] == -1 || expected[d] == td.batch_size()[d];
  TD_CHECK(fits, ValueError, "Batch sizes in tensordicts differs: stack has batch_size=", size_str(s.batch_size()),
           " (members ", size_str(expected), "), new_value has batch_size=", size_str(td.batch_size()));
  if (n > 0 || s.device().has_value()) {
    TD_CHECK(td.device() == s.device(), ValueError, "Devices differ: stack has device=",
             s.device() ? s.device()->str() : "None", ", new_value has device=", td.device() ? td.device()->str() : "None");
  }
  s.insert_member(index, td);
  return *this;
}

LazyStackedTensorDict& LazyStackedTensorDict::append(const TensorDict& td) { return insert(num_members(), td); }

LazyStackedTensorDict& LazyStackedTensorDict::extend(const std::vector<TensorDict>& tds) {
  for (const TensorDict& td : tds) append(td);
  return *this;
}

LazyStackedTensorDict& LazyStackedTensorDict::update(const TensorDict& source, bool clone, bool inplace,
                                                     const std::optional<std::vector<NestedKey>>& keys_to_update) {
  const LazyStackImpl* src = lazy::as_stack(source);
  if (src == nullptr || src->stack_dim() != stack_dim() || src->count() <= num_members()) {
    TensorDict::update(source, clone, inplace, keys_to_update);
    return *this;
  }
  detail::check_unlocked(stack_of(*this));
  const int64_t n = num_members();
  for (int64_t i = 0; i < n; ++i) member(i).update(src->members()[i], clone, inplace, keys_to_update);
  for (int64_t i = n; i < src->count(); ++i) {
    const TensorDict& extra = src->members()[i];
    append(clone ? extra.clone() : extra);
  }
  return *this;
}

// ---- densify --------------------------------------------------------------------------------------

namespace {

TensorDict densify_members(c10::ArrayRef<TensorDict> members, c10::IntArrayRef batch, int64_t stack_dim,
                           std::optional<at::Device> device, DensifyLayout layout, const NestedKey& prefix) {
  std::vector<std::string> keys;  // every key of any member, first seen first
  for (const TensorDict& m : members) {
    for (std::string& key : m.impl()->keys()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(std::move(key));
    }
  }
  LevelBuilder out(batch, device, keys.size());
  for (const std::string& key : keys) {
    const NestedKey full = prefix.child(key);
    std::vector<Entry> entries;
    EntryKind kind = EntryKind::Undefined;
    for (const TensorDict& m : members) {
      entries.push_back(m.impl()->get(key));
      if (kind == EntryKind::Undefined) kind = entries.back().kind();
      TD_CHECK(!entries.back().defined() || entries.back().kind() == kind, TypeError, "densify: members hold ",
               kind_name(kind), " and ", kind_name(entries.back().kind()), " at ", full.repr());
    }
    if (kind == EntryKind::TensorDict) {
      std::vector<TensorDict> children;
      for (size_t i = 0; i < members.size(); ++i) {
        children.push_back(entries[i].defined() ? entries[i].tensordict_unchecked()
                                                : TensorDict::empty_with(members[i].batch_size(), device));
      }
      BatchSize child_batch(children.front().batch_size().begin(), children.front().batch_size().end());
      child_batch.insert(child_batch.begin() + stack_dim, static_cast<int64_t>(members.size()));
      out.append(key, densify_members(children, child_batch, stack_dim, device, layout, full));
      continue;
    }
    if (kind == EntryKind::NonTensor) {
      std::vector<NonTensorData> items;
      for (const Entry& e : entries) items.push_back(e.defined() ? e.non_tensor() : NonTensorData());
      out.append(key, NonTensorData::stack(items, stack_dim, members.front().batch_size()));
      continue;
    }
    std::vector<at::Tensor> leaves;
    const at::Tensor* like = nullptr;
    for (const Entry& e : entries) {
      if (e.defined() && like == nullptr) like = &e.tensor_unchecked();
    }
    bool same = true;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].defined()) {
        leaves.push_back(entries[i].tensor_unchecked());
      } else {
        // A member without the key contributes an empty leaf (Nested) or zeros (Padded).
        TD_CHECK(like->dim() > 0, ValueError, "Cannot densify a tensordict with values with empty shape and exclusive keys (",
                 full.repr(), ")");
        std::vector<int64_t> shape(like->sizes().begin(), like->sizes().end());
        if (layout == DensifyLayout::Nested) shape.front() = 0;
        leaves.push_back(at::zeros(shape, like->options()));
      }
      same = same && leaves.back().sizes() == leaves.front().sizes();
    }
    if (same) {
      out.append(key, detail::stack_tensors(leaves, stack_dim));
    } else if (layout == DensifyLayout::Nested) {
      out.append(key, nested(leaves, stack_dim, full.repr()));
    } else {
      out.append(key, padded(leaves, stack_dim, 0.0, PaddingSide::Right, full.repr()));
    }
  }
  return out.finish();
}

}  // namespace

TensorDict LazyStackedTensorDict::densify(DensifyLayout layout) const {
  const LazyStackImpl& s = stack_of(*this);
  if (s.count() == 0) return TensorDict::empty_with(batch_size(), device());
  BatchSize batch(batch_size().begin(), batch_size().end());
  return densify_members(s.members(), batch, s.stack_dim(), device(), layout, NestedKey());
}

}  // namespace tensordict
