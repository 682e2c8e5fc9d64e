// LazyStackImpl: entries, reads and writes of a lazy stack (semantics §2). Reads stack the
// members' leaves; writes are split along the stack dim and sent to every member.

#include "backends/lazy_stack/lazy_stack_impl.h"

#include <algorithm>

#include <ATen/ATen.h>

#include <tensordict/batch_index.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "core/format.h"
#include "core/plain_copy.h"
#include "handle/repr_fields.h"

namespace tensordict {
namespace lazy {

using detail::size_str;

namespace {

std::string device_name(const std::optional<at::Device>& d) { return d ? d->str() : "None"; }

// Member i's part of a non-tensor value of the stack: its slice of a stack, compacted, and
// one value where the slice is uniform.
NonTensorData member_non_tensor(const NonTensorData& value, int64_t stack_dim, int64_t i) {
  if (!value.is_stack()) return value;
  if (value.is_ragged()) return value.members()[static_cast<size_t>(i)];
  NonTensorData part = value.with_ids(value.ids().select(stack_dim, i)).compacted();
  return part.is_uniform() ? NonTensorData(part.value()) : part;
}


}  // namespace

BatchSize stacked_batch(const std::vector<TensorDict>& members, int64_t stack_dim, bool strict_shape) {
  TD_CHECK(!members.empty(), ValueError, "items cannot be empty");
  const TensorDict& first = members.front();
  const int64_t dims = first.batch_dims();
  // RuntimeError, as v0.14 (a dim below the range is "too big" there too).
  TD_CHECK(stack_dim >= 0 && stack_dim <= dims, RuntimeError, "Stack dim ", stack_dim,
           " is too big for a set of tensordicts with batch_size ", size_str(first.batch_size()));
  BatchSize batch(first.batch_size().begin(), first.batch_size().end());
  for (size_t i = 1; i < members.size(); ++i) {
    const TensorDict& td = members[i];
    TD_CHECK(td.device() == first.device(), RuntimeError, "devices differ, got ", device_name(first.device()),
             " and ", device_name(td.device()));
    const bool same_rank = td.batch_dims() == dims;
    TD_CHECK(same_rank && (!strict_shape || td.batch_size() == first.batch_size()), RuntimeError,
             "batch sizes in tensordicts differs, LazyStackedTensorDict cannot be created. Got td[0].batch_size=",
             size_str(first.batch_size()), " and td[", i, "].batch_size=", size_str(td.batch_size()),
             strict_shape ? " (strict_shape=True)" : "");
    for (int64_t d = 0; d < dims; ++d) {
      if (td.batch_size()[d] != batch[d]) batch[d] = -1;
    }
  }
  batch.insert(batch.begin() + stack_dim, static_cast<int64_t>(members.size()));
  return batch;
}

TensorDict make_stack(std::vector<TensorDict> members, int64_t stack_dim, bool strict_shape) {
  BatchSize batch = stacked_batch(members, stack_dim, strict_shape);
  std::optional<at::Device> device = members.front().device();
  return TensorDict(c10::make_intrusive<LazyStackImpl>(std::move(members), stack_dim, batch, device));
}

LazyStackImpl* as_stack(const TensorDict& td) { return dynamic_cast<LazyStackImpl*>(td.impl()); }

LazyStackImpl::LazyStackImpl(std::vector<TensorDict> members, int64_t stack_dim, c10::IntArrayRef batch_size,
                             std::optional<at::Device> device)
    : TensorDictBase(batch_size, device, StoragePolicy{}),
      list_(std::make_shared<std::vector<TensorDict>>(std::move(members))),
      count_(list_->size()),
      stack_dim_(stack_dim) {}

LazyStackImpl::LazyStackImpl(std::shared_ptr<std::vector<TensorDict>> shared, size_t begin, size_t count,
                             int64_t stack_dim, c10::IntArrayRef batch_size, std::optional<at::Device> device)
    : TensorDictBase(batch_size, device, StoragePolicy{}),
      list_(std::move(shared)),
      begin_(begin),
      count_(count),
      stack_dim_(stack_dim) {}

void LazyStackImpl::release_resources() {
  list_.reset();
  begin_ = count_ = 0;
  TensorDictBase::release_resources();
}

void LazyStackImpl::insert_member(int64_t position, TensorDict member) {
  if (!list_ || list_.use_count() > 1 || begin_ != 0 || count_ != list_->size()) {
    // Shared with a slice or a parent: this stack gets a list of its own first.
    list_ = std::make_shared<std::vector<TensorDict>>(members().vec());
    begin_ = 0;
  }
  list_->insert(list_->begin() + position, std::move(member));
  count_ = list_->size();
  batch_size_[stack_dim_] = count();
  bump_layout_version();
}

// ---- Keys -------------------------------------------------------------------------------------

std::vector<std::string> LazyStackImpl::keys() const {
  // Member 0's insertion order, the order every backend keeps (Python sorts here; its issue
  // #1230 asks for insertion order: docs/architecture.md, A18).
  std::vector<std::string> out;
  if (members().empty()) return out;
  for (std::string& key : members().front().impl()->keys()) {
    if (has(key)) out.push_back(std::move(key));
  }
  return out;
}

size_t LazyStackImpl::num_entries() const { return keys().size(); }

bool LazyStackImpl::has(std::string_view key) const {
  if (members().empty()) return false;
  for (const TensorDict& m : members()) {
    if (!m.impl()->has(key)) return false;
  }
  return true;
}

std::vector<int64_t> LazyStackImpl::holders(std::string_view key) const {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count(); ++i) {
    if (member_at(i).impl()->has(key)) out.push_back(i);
  }
  return out;
}

std::vector<std::string> LazyStackImpl::exclusive_keys() const {
  std::vector<std::string> out;
  for (const TensorDict& m : members()) {
    for (std::string& key : m.impl()->keys()) {
      if (!has(key) && std::find(out.begin(), out.end(), key) == out.end()) out.push_back(std::move(key));
    }
  }
  return out;
}

EntryKind LazyStackImpl::kind(std::string_view key) const {
  return has(key) ? members().front().impl()->kind(key) : EntryKind::Undefined;
}

void LazyStackImpl::for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const {
  for (const std::string& key : keys()) fn(key, members().front().impl()->kind(key));
}

std::string LazyStackImpl::missing_key_note(std::string_view key) const {
  std::vector<int64_t> held = holders(key);
  if (held.empty()) return {};
  std::string list;
  for (size_t i = 0; i < held.size(); ++i) list += (i ? ", " : "") + std::to_string(held[i]);
  return c10::str(": it is an exclusive key, held by member(s) ", list, " of ", count(),
                  " only (read it from those members). Setting a value in-place on a stack of TensorDict is only "
                  "permitted if all members of the stack have this key in their register.");
}

void LazyStackImpl::repr_parts(std::vector<std::string>& parts) const {
  std::string exclusive;
  for (int64_t i = 0; i < count(); ++i) {
    std::vector<std::string> own;
    for (std::string& key : member_at(i).impl()->keys()) {
      if (!has(key)) own.push_back(std::move(key));
    }
    if (own.empty()) continue;
    if (!exclusive.empty()) exclusive += ",\n";
    exclusive += detail::indent_lines(std::to_string(i) + " ->" + detail::indent_lines(detail::fields_repr(member_at(i), own), 4), 4);
  }
  parts.insert(parts.begin() + 1, "exclusive_fields={\n" + exclusive + "}");
  parts.push_back("stack_dim=" + std::to_string(stack_dim_));
}

// ---- Reads ------------------------------------------------------------------------------------

Entry LazyStackImpl::get(std::string_view key) const {
  // One read per member: a member without the key makes it exclusive (no entry), one holding
  // another kind is an error. Members whose entries live in memory are read through peek, so a
  // leaf is not copied into an Entry first (get is what every stacked read costs).
  std::vector<Entry> held;  // entries of members that return them by value (reserved: no moves)
  std::vector<const Entry*> entries;
  entries.reserve(members().size());
  for (size_t i = 0; i < members().size(); ++i) {
    const TensorDictBase& m = *member_at(i).impl();
    const Entry* e = nullptr;
    if (m.entries_in_memory()) {
      e = m.peek(key);
    } else {
      if (held.empty()) held.reserve(members().size());  // once, before the first: pointers stay valid
      held.push_back(m.get(key));
      e = held.back().defined() ? &held.back() : nullptr;
    }
    if (e == nullptr || !e->defined()) return Entry();
    TD_CHECK(i == 0 || e->kind() == entries.front()->kind(), TypeError, "LazyStackedTensorDict: member 0 holds ",
             kind_name(entries.front()->kind()), " at ", NestedKey(key).repr(), " but member ", i, " holds ",
             kind_name(e->kind()));
    entries.push_back(e);
  }
  if (entries.empty()) return Entry();
  switch (entries.front()->kind()) {
    case EntryKind::Tensor: {
      std::vector<at::Tensor> parts;
      parts.reserve(entries.size());
      for (const Entry* e : entries) parts.push_back(e->tensor_unchecked());
      for (size_t i = 1; i < parts.size(); ++i) {
        TD_CHECK(parts[i].sizes() == parts.front().sizes(), RuntimeError,
                 "Failed to stack tensors within a tensordict. You can use nested tensors, padded tensors or return "
                 "lists via specialized keyword arguments. Check the TensorDict.lazy_stack documentation! (key ",
                 NestedKey(key).repr(), ": member 0 has shape ", size_str(parts.front().sizes()), ", member ", i,
                 " has shape ", size_str(parts[i].sizes()),
                 "; LazyStackedTensorDict::get_as_list, get_padded and get_nested read ragged leaves)");
      }
      // Plain CPU leaves copied into the result (Note [Plain copies]), the small per-member
      // leaves a lazy stack usually holds above all.
      return Entry(detail::stack_tensors(parts, stack_dim_));
    }
    case EntryKind::TensorDict: {
      std::vector<TensorDict> children;
      children.reserve(entries.size());
      for (const Entry* e : entries) children.push_back(e->tensordict_unchecked());
      return Entry(make_stack(std::move(children), stack_dim_));
    }
    case EntryKind::NonTensor: {
      std::vector<NonTensorData> items;
      items.reserve(entries.size());
      for (const Entry* e : entries) items.push_back(e->non_tensor());
      return Entry(stack_non_tensor(items));
    }
    case EntryKind::Undefined: break;
  }
  return Entry();
}

NonTensorData LazyStackImpl::stack_non_tensor(const std::vector<NonTensorData>& items) const {
  const bool ragged = std::any_of(batch_size_.begin(), batch_size_.end(), [](int64_t s) { return s < 0; });
  if (!ragged) return NonTensorData::stack(items, stack_dim_, members().front().batch_size());
  // Members of different batch sizes: one value for all stays one value; otherwise each
  // member keeps its own stack (a dense id tensor cannot hold them).
  const bool same = std::all_of(items.begin(), items.end(), [&](const NonTensorData& d) {
    return !d.is_stack() && d.value() == items.front().value();
  });
  if (same) return items.front();
  std::vector<std::vector<int64_t>> batches;
  batches.reserve(members().size());
  for (const TensorDict& m : members()) batches.push_back(m.batch_size().vec());
  return NonTensorData::ragged(items, batches, stack_dim_, batch_size_);
}

void LazyStackImpl::for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const {
  // Member 0's keys, each read once: get() finds the exclusive ones (no entry) on its way.
  if (members().empty()) return;
  for (const std::string& key : members().front().impl()->keys()) {
    Entry e = get(key);
    if (e.defined()) fn(key, e);
  }
}

LeafMeta LazyStackImpl::leaf_meta(std::string_view key) const {
  LeafMeta meta = members().front().impl()->leaf_meta(key);
  for (size_t i = 1; i < members().size(); ++i) {
    LeafMeta other = member_at(i).impl()->leaf_meta(key);
    if (other.shape.size() != meta.shape.size()) {
      meta.shape = {-1};  // ranks differ: Python shows torch.Size([-1])
      return meta;
    }
    for (size_t d = 0; d < meta.shape.size(); ++d) {
      if (other.shape[d] != meta.shape[d]) meta.shape[d] = -1;
    }
  }
  meta.shape.insert(meta.shape.begin() + stack_dim_, count());
  return meta;
}

// ---- Writes -----------------------------------------------------------------------------------

void LazyStackImpl::insert_or_assign(std::string_view key, Entry value) {
  switch (value.kind()) {
    case EntryKind::Tensor: {
      std::vector<at::Tensor> parts = value.tensor_unchecked().unbind(stack_dim_);
      for (int64_t i = 0; i < count(); ++i) member_at(i).set(key, parts[i]);
      break;
    }
    case EntryKind::TensorDict: {
      const TensorDict& td = value.tensordict_unchecked();
      LazyStackImpl* stack = as_stack(td);
      // A lazy stack along the same dim gives its members themselves, by reference.
      std::vector<TensorDict> parts = stack && stack->stack_dim_ == stack_dim_ ? stack->members().vec() : td.unbind(stack_dim_);
      for (int64_t i = 0; i < count(); ++i) member_at(i).set(key, EntryInit(parts[i]));
      break;
    }
    case EntryKind::NonTensor: {
      const NonTensorData& data = value.non_tensor();
      for (int64_t i = 0; i < count(); ++i) member_at(i).set(key, EntryInit(member_non_tensor(data, stack_dim_, i)));
      break;
    }
    case EntryKind::Undefined: break;
  }
  bump_layout_version();
}

void LazyStackImpl::erase(std::string_view key) {
  for (TensorDict m : members()) {
    if (m.impl()->has(key)) m.erase(key);
  }
  bump_layout_version();
}

void LazyStackImpl::rename(std::string_view from, std::string_view to) {
  for (TensorDict m : members()) {
    if (m.impl()->has(from)) m.rename_key_(from, to);
  }
  bump_layout_version();
}

int64_t LazyStackImpl::leaf_dims(std::string_view key) const {
  return members().front().impl()->leaf_meta(key).shape.size() + 1;
}

at::Tensor LazyStackImpl::member_part(const at::Tensor& value, int64_t leaf_dims, int64_t stack_pos,
                                      int64_t i, int64_t n) const {
  // Broadcasting aligns trailing dims: the stack dim of `value`, if it has one, is this far from its end.
  const int64_t pos = value.dim() - (leaf_dims - stack_pos);
  if (pos < 0) return value;
  const int64_t size = value.size(pos);
  if (size == 1) return value.select(pos, 0);
  // A c10::Error, as the same mismatch on a dense leaf: the handle names the key.
  TORCH_CHECK(size == n, "a value of shape ", size_str(value.sizes()), " cannot be broadcast to the ", n,
              " members of a LazyStackedTensorDict along its stack dim");
  return value.select(pos, i);
}

void LazyStackImpl::write_(std::string_view key, const at::Tensor& value) {
  const int64_t dims = leaf_dims(key);
  for (int64_t i = 0; i < count(); ++i) {
    member_at(i).impl()->write_(key, member_part(value, dims, stack_dim_, i, count()));
  }
}

void LazyStackImpl::write_many_(const TensorDict& values) {
  std::vector<TensorDict> parts = values.unbind(stack_dim_);
  for (int64_t i = 0; i < count(); ++i) member_at(i).impl()->write_many_(parts[i]);
}


void LazyStackImpl::write_non_tensor_(std::string_view key, const NonTensorData& value) {
  for (int64_t i = 0; i < count(); ++i) member_at(i).impl()->write_non_tensor_(key, member_non_tensor(value, stack_dim_, i));
}

void LazyStackImpl::write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) {
  std::optional<MemberSelection> sel = select_members(index);
  if (!sel) {
    // An index the members cannot share (several index tensors, a mask across the stack dim):
    // read the stacked leaf, change it, and write it back to every member.
    TensorDictBase::write_at_(key, index, value);
    return;
  }
  auto write_member = [&](int64_t m, const at::Tensor& part) {
    TensorDictBase& member = *member_at(m).impl();
    if (sel->rest.empty()) {
      member.write_(key, part);
    } else {
      member.write_at_(key, BatchIndex(sel->rest, member_at(m).batch_size()), part);
    }
  };
  if (!sel->keeps_dim) {
    write_member(sel->members.front(), value);
    return;
  }
  const int64_t n = static_cast<int64_t>(sel->members.size());
  const int64_t result_dims =
      static_cast<int64_t>(index.result_batch_size().size()) + leaf_dims(key) - batch_dims();
  for (int64_t j = 0; j < n; ++j) write_member(sel->members[j], member_part(value, result_dims, sel->position, j, n));
}

// ---- Structure --------------------------------------------------------------------------------

TensorDict LazyStackImpl::make_child(std::string_view key, c10::IntArrayRef batch_size) const {
  std::vector<TensorDict> children;
  children.reserve(members().size());
  for (const TensorDict& m : members()) {
    BatchSize child(batch_size.begin(), batch_size.end());
    child.erase(child.begin() + stack_dim_);
    for (int64_t d = 0; d < member_dims(); ++d) child[d] = m.batch_size()[d];
    children.push_back(m.impl()->make_child(key, child));
  }
  if (children.empty()) return TensorDictBase::make_child(key, batch_size);
  return make_stack(std::move(children), stack_dim_);
}

void LazyStackImpl::set_batch_size(c10::IntArrayRef) {
  TD_THROW(RuntimeError,
           "Modifying the batch size of a lazy representation of a tensordict is not permitted. Consider "
           "instantiating the tensordict first by calling `td = td.to_tensordict()` before resetting the batch size.");
}

void LazyStackImpl::set_locked(bool locked) {
  locked_ = locked;
  if (!locked) shared_ = false;
  auto self = c10::intrusive_ptr<TensorDictBase>::reclaim_copy(this);
  for (TensorDict m : members()) {
    if (locked) {
      m.lock_();
      m.impl()->add_lock_parent(self);
    } else {
      m.impl()->remove_lock_parent(this);
      m.unlock_();
    }
  }
}

bool LazyStackImpl::is_locked() const {
  if (locked_) return true;
  if (members().empty()) return false;
  return std::all_of(members().begin(), members().end(), [](const TensorDict& m) { return m.is_locked(); });
}

TensorDict LazyStackImpl::map_leaves(FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                     std::optional<at::Device> device) const {
  if (members().empty()) return make_empty(member_batch(), stack_dim_, device);
  std::vector<TensorDict> out;
  out.reserve(members().size());
  for (const TensorDict& m : members()) out.push_back(m.impl()->map_leaves(fn, device));
  return make_stack(std::move(out), stack_dim_);
}

TensorDict LazyStackImpl::rearrange_batch(c10::IntArrayRef source) const {
  auto at_stack = std::find(source.begin(), source.end(), stack_dim_);
  if (at_stack == source.end() || members().empty()) return TensorDictBase::rearrange_batch(source);
  const int64_t position = at_stack - source.begin();
  std::vector<int64_t> member_source;
  for (int64_t s : source) {
    if (s == stack_dim_) continue;
    member_source.push_back(s > stack_dim_ ? s - 1 : s);
  }
  std::vector<TensorDict> out;
  out.reserve(members().size());
  for (const TensorDict& m : members()) out.push_back(m.impl()->rearrange_batch(member_source));
  return make_stack(std::move(out), position);
}

TensorDict LazyStackImpl::map_batch(c10::IntArrayRef new_batch, FunctionRef<at::Tensor(const at::Tensor&)> fn) const {
  const c10::IntArrayRef old = batch_size_;
  auto product = [](c10::IntArrayRef dims) {
    int64_t p = 1;
    for (int64_t d : dims) p *= d;
    return p;
  };
  const bool plain = count() > 0 && product(old) > 0 && std::none_of(old.begin(), old.end(), [](int64_t d) { return d < 0; });
  if (plain) {
    const int64_t before = product(old.slice(0, stack_dim_));
    const int64_t after = product(old.slice(stack_dim_ + 1));
    for (size_t p = 0; p < new_batch.size(); ++p) {
      if (new_batch[p] != count() || product(new_batch.slice(0, p)) != before ||
          product(new_batch.slice(p + 1)) != after)
        continue;
      // Element (a, i, b) of the stack is element (a, b) of member i on both sides of the view.
      std::vector<int64_t> member_shape(new_batch.begin(), new_batch.end());
      member_shape.erase(member_shape.begin() + static_cast<int64_t>(p));
      std::vector<TensorDict> out;
      out.reserve(members().size());
      try {
        for (const TensorDict& m : members()) out.push_back(m.view(member_shape));
      } catch (const Error&) {
        break;  // a member cannot be viewed (a non-contiguous leaf): read the stacked leaves
      }
      return make_stack(std::move(out), static_cast<int64_t>(p));
    }
  }
  return TensorDictBase::map_batch(new_batch, fn);
}

BatchSize LazyStackImpl::member_batch() const {
  BatchSize b(batch_size_.begin(), batch_size_.end());
  b.erase(b.begin() + stack_dim_);
  return b;
}

TensorDict make_empty(c10::IntArrayRef member_batch, int64_t stack_dim, std::optional<at::Device> device) {
  BatchSize batch(member_batch.begin(), member_batch.end());
  TD_CHECK(stack_dim >= 0 && stack_dim <= static_cast<int64_t>(batch.size()), RuntimeError, "Stack dim ", stack_dim,
           " is too big for a set of tensordicts with batch_size ", size_str(member_batch));
  batch.insert(batch.begin() + stack_dim, 0);
  return TensorDict(c10::make_intrusive<LazyStackImpl>(std::vector<TensorDict>{}, stack_dim, batch, device));
}

}  // namespace lazy
}  // namespace tensordict
