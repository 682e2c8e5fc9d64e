// TensorDict handle: construction, batch size, lookup and the writes of one key.

#include <tensordict/tensor_dict.h>

#include <ATen/ATen.h>

#include <tensordict/entry.h>

#include "backends/in_memory/in_memory.h"
#include "core/batch_dim.h"
#include "core/format.h"
#include "core/dim_names.h"
#include "core/validate.h"
#include "handle/key_path.h"

namespace tensordict {

using namespace detail;

// ---- Construction -------------------------------------------------------------------------

TensorDict::TensorDict() : impl_(in_memory::make_level({}, std::nullopt)) {}

TensorDict::TensorDict(std::initializer_list<Item> items, c10::IntArrayRef batch_size,
                       std::optional<at::Device> device, const DimNames& names)
    : impl_(in_memory::make_from_items(c10::ArrayRef<Item>(items.begin(), items.size()), batch_size, device)) {
  if (!names.empty()) set_names(names);
}

TensorDict::TensorDict(const std::vector<Item>& items, c10::IntArrayRef batch_size, std::optional<at::Device> device,
                       const DimNames& names)
    : impl_(in_memory::make_from_items(items, batch_size, device)) {
  if (!names.empty()) set_names(names);
}

TensorDict::TensorDict(c10::intrusive_ptr<TensorDictBase> impl) : impl_(std::move(impl)) {
  TD_CHECK(impl_, ValueError, "TensorDict needs a backend, got a null pointer");
}

TensorDict TensorDict::empty_with(c10::IntArrayRef batch_size, std::optional<at::Device> device) {
  for (int64_t s : batch_size) TD_CHECK(s >= 0, ValueError, "batch size ", batch_size, " has a negative size");
  return TensorDict(in_memory::make_level(batch_size, device));
}

// ---- Batch size -----------------------------------------------------------------------------

int64_t TensorDict::size(int64_t dim) const {
  return batch_size()[wrap_batch_dim<IndexError>(dim, batch_dims(), "size", batch_size())];
}

int64_t TensorDict::numel() const {
  int64_t n = 1;
  for (int64_t s : batch_size()) n *= s;
  return n;
}

namespace {
void validate_batch_size(const TensorDictBase& td, c10::IntArrayRef batch) {
  td.for_each([&](const std::string& key, const Entry& entry) {
    if (entry.is_tensor()) {
      c10::IntArrayRef shape = entry.tensor_unchecked().sizes();
      TD_CHECK(shape.size() >= batch.size() && shape.slice(0, batch.size()) == batch, ShapeError, "the Tensor ", key,
               " has shape ", size_str(shape), " which is incompatible with the batch-size ", size_str(batch), ".");
    } else if (entry.is_non_tensor() && entry.non_tensor().is_stack()) {
      TD_CHECK(entry.non_tensor().ids().sizes() == batch, ShapeError, "the non-tensor stack ", key, " has shape ",
               size_str(entry.non_tensor().ids().sizes()), " which is incompatible with the batch-size ",
               size_str(batch), ".");
    }
  });
}
}  // namespace

TensorDict& TensorDict::set_batch_size(c10::IntArrayRef batch_size) {
  validate_batch_size(*impl_, batch_size);
  // Nested tensordicts must keep the new batch as a prefix: those that do not are re-batched.
  impl_->for_each([&](const std::string& key, const Entry& entry) {
    if (!entry.is_tensordict()) return;
    TensorDict child = entry.tensordict_unchecked();
    c10::IntArrayRef cb = child.batch_size();
    if (cb.size() >= batch_size.size() && cb.slice(0, batch_size.size()) == batch_size) return;
    try {
      child.set_batch_size(batch_size);
    } catch (ShapeError& e) {
      e.add_context("in nested TensorDict " + NestedKey(key).repr());
      throw;
    }
  });
  impl_->set_batch_size(batch_size);
  // Python pads the names with None or drops the last ones.
  if (any_named(impl_->dim_names())) {
    DimNames names = impl_->dim_names();
    names.resize(batch_size.size());
    assign_names(*impl_, names);
  }
  return *this;
}

// ---- Lookup ---------------------------------------------------------------------------------

bool TensorDict::contains(KeyRef key) const {
  check_key(key);
  // Python: ("a", "b") in td is False when "a" holds a tensor (no error, unlike get).
  const TensorDictBase* level = impl_.get();
  Entry holder;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    if (level->kind(key[i]) != EntryKind::TensorDict) return false;
    holder = level->get(key[i]);
    level = holder.tensordict_unchecked().impl();
  }
  return level->has(key.back());
}

Entry TensorDict::find(KeyRef key) const {
  check_key(key);
  Entry holder;
  TensorDictBase* level = find_level(impl_.get(), key, holder);
  return level ? level->get(key.back()) : Entry();
}

Entry TensorDict::get_entry(KeyRef key) const {
  check_key(key);
  Entry holder;
  TensorDictBase* level = level_of(impl_.get(), key, holder);
  Entry e = level->get(key.back());
  if (!e.defined()) throw_missing(*level, key, key.size() - 1);
  return e;
}

std::vector<int64_t> TensorDict::get_item_shape(KeyRef key) const {
  check_key(key);
  Entry holder;
  TensorDictBase* level = level_of(impl_.get(), key, holder);
  switch (level->kind(key.back())) {
    case EntryKind::Tensor: {
      // From the backend's metadata: no data is read (-1 where a lazy stack's members differ).
      BatchSize shape = level->leaf_meta(key.back()).shape;
      return std::vector<int64_t>(shape.begin(), shape.end());
    }
    case EntryKind::TensorDict: {
      Entry e = level->get(key.back());
      c10::IntArrayRef b = e.tensordict_unchecked().batch_size();
      return std::vector<int64_t>(b.begin(), b.end());
    }
    case EntryKind::NonTensor:
      return std::vector<int64_t>(level->batch_size().begin(), level->batch_size().end());
    case EntryKind::Undefined:
      break;
  }
  throw_missing(*level, key, key.size() - 1);
}

namespace {
[[noreturn]] void throw_not_tensor(KeyRef key, EntryKind kind) {
  TD_THROW(TypeError, "the entry at ", key.repr(), " holds ", kind_name(kind), ", not a tensor; use ",
           kind == EntryKind::TensorDict ? "get_tensordict()" : "get_non_tensor()", " or get_entry()");
}
}  // namespace

at::Tensor TensorDict::get(KeyRef key) const {
  check_key(key);
  Entry holder;
  TensorDictBase* level = level_of(impl_.get(), key, holder);
  if (level->entries_in_memory()) {
    // The stored tensor itself, without copying the entry.
    const Entry* e = level->peek(key.back());
    if (C10_LIKELY(e != nullptr && e->is_tensor())) return e->tensor_unchecked();
    if (e == nullptr) throw_missing(*level, key, key.size() - 1);
    throw_not_tensor(key, e->kind());
  }
  Entry e = level->get(key.back());
  if (!e.defined()) throw_missing(*level, key, key.size() - 1);
  if (!e.is_tensor()) throw_not_tensor(key, e.kind());
  return std::move(e.mutable_tensor());
}

at::Tensor TensorDict::get(KeyRef key, const at::Tensor& default_value) const {
  Entry e = find(key);
  if (!e.defined()) return default_value;
  TD_CHECK(e.is_tensor(), TypeError, "the entry at ", key.repr(), " holds ", kind_name(e.kind()), ", not a tensor");
  return std::move(e.mutable_tensor());
}

TensorDict TensorDict::get_tensordict(KeyRef key) const {
  Entry e = get_entry(key);
  TD_CHECK(e.is_tensordict(), TypeError, "the entry at ", key.repr(), " holds ", kind_name(e.kind()),
           ", not a TensorDict");
  return e.tensordict_unchecked();
}

NonTensorData TensorDict::get_non_tensor(KeyRef key) const {
  Entry e = get_entry(key);
  TD_CHECK(e.is_non_tensor(), TypeError, "the entry at ", key.repr(), " holds ", kind_name(e.kind()),
           ", not non-tensor data");
  return e.non_tensor();
}

// ---- Writes ---------------------------------------------------------------------------------

namespace {
// The general paths of set(key, tensor) and erase(key), out of line: the direct writes before
// them (Note [Direct writes]) then pay for no frame of theirs.
C10_NOINLINE void set_tensor_slow(TensorDictBase* root, KeyRef key, at::Tensor value) {
  check_key(key);
  check_unlocked(*root);
  Entry holder;
  TensorDictBase* level = level_of_or_create(root, key, holder);
  check_unlocked(*level);
  level->insert_or_assign(key.back(), prepare_tensor(*level, key, std::move(value)));
}

C10_NOINLINE void erase_slow(TensorDictBase* root, KeyRef key) {
  check_key(key);
  check_unlocked(*root);
  Entry holder;
  TensorDictBase* level = level_of(root, key, holder);
  check_unlocked(*level);
  if (!level->erase_if_present(key.back())) throw_missing(*level, key, key.size() - 1);
}
}  // namespace

TensorDict& TensorDict::set(KeyRef key, at::Tensor value) {
  if (!in_memory::try_set_tensor(*impl_, key, value)) set_tensor_slow(impl_.get(), key, std::move(value));
  return *this;
}

TensorDict& TensorDict::set(KeyRef key, EntryInit value) {
  check_key(key);
  check_unlocked(*impl_);
  Entry holder;
  TensorDictBase* level = level_of_or_create(impl_.get(), key, holder);
  check_unlocked(*level);
  if (value.is_nested_list()) {
    TensorDict child = TensorDict::empty_with(level->batch_size(), level->device());
    for (const auto& item : value.nested()) child.set(item.first, item.second);
    level->insert_or_assign(key.back(), std::move(child));
    return *this;
  }
  level->insert_or_assign(key.back(), prepare_entry(*level, key, std::move(value.entry())));
  return *this;
}

TensorDict& TensorDict::set_non_tensor(KeyRef key, json::Value value) {
  return set(key, EntryInit(NonTensorData(std::move(value))));
}

TensorDict& TensorDict::set_non_tensor_(KeyRef key, NonTensorData value) {
  check_key(key);
  Entry holder;
  TensorDictBase* level = level_holding(impl_.get(), key, EntryKind::NonTensor, "set_non_tensor_", holder);
  level->write_non_tensor_(key.back(), detail::prepare_non_tensor(*level, key, std::move(value)));
  return *this;
}

TensorDict& TensorDict::set_(KeyRef key, const at::Tensor& value) {
  check_key(key);
  Entry holder;
  TensorDictBase* level = level_holding(impl_.get(), key, EntryKind::Tensor, "set_ of a tensor", holder);
  write_tensor_(*level, key.back(), value, [&] { return NestedKey(key); });
  return *this;
}

TensorDict& TensorDict::set_(KeyRef key, const TensorDict& value) {
  check_key(key);
  TensorDict dest = get_tensordict(key);
  for (auto& [k, entry] : value.items(/*include_nested=*/true, /*leaves_only=*/true)) dest.set_(k, entry.tensor());
  return *this;
}

TensorDict& TensorDict::erase(KeyRef key) {
  if (!in_memory::try_erase(*impl_, key)) erase_slow(impl_.get(), key);
  return *this;
}

namespace {
// The entry at `key`, taken out of its level (one walk down the key path), or an undefined Entry
// when there is none, with nothing changed.
Entry take_out(TensorDictBase* root, KeyRef key) {
  Entry holder;
  TensorDictBase* level = find_level(root, key, holder);
  if (level == nullptr) return Entry();
  Entry e = level->get(key.back());
  if (e.defined()) {
    check_unlocked(*level);
    level->erase(key.back());
  }
  return e;
}
}  // namespace

Entry TensorDict::pop(KeyRef key) {
  check_key(key);
  check_unlocked(*impl_);
  Entry e = take_out(impl_.get(), key);
  TD_CHECK(e.defined(), KeyError, "You are trying to pop key ", key.repr(),
           " which is not in dict without providing default value. Keys=", keys_str(impl_->keys()));
  return e;
}

Entry TensorDict::pop(KeyRef key, Entry default_value) {
  check_key(key);
  check_unlocked(*impl_);
  Entry e = take_out(impl_.get(), key);
  return e.defined() ? e : default_value;
}

TensorDict& TensorDict::rename_key_(KeyRef old_key, KeyRef new_key, bool safe) {
  check_key(old_key);
  check_key(new_key);
  check_unlocked(*impl_);
  Entry holder;
  TensorDictBase* level = level_of(impl_.get(), old_key, holder);
  if (!level->has(old_key.back())) throw_missing(*level, old_key, old_key.size() - 1);
  bool same_level = old_key.size() == new_key.size();
  for (size_t i = 0; same_level && i + 1 < old_key.size(); ++i) same_level = old_key[i] == new_key[i];
  // Within one level the new key is probed once, for the check and the overwrite.
  const bool new_present = same_level ? level->has(new_key.back()) : contains(new_key);
  if (safe && new_present) TD_THROW(KeyError, "key ", new_key.repr(), " already present in TensorDict.");
  if (same_level) {
    check_unlocked(*level);
    if (old_key.back() == new_key.back()) return *this;
    if (new_present) level->erase(new_key.back());
    level->rename(old_key.back(), new_key.back());
    return *this;
  }
  set(new_key, EntryInit(level->get(old_key.back())));
  erase(old_key);
  return *this;
}

}  // namespace tensordict
