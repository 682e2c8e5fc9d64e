// TensorDict handle: construction, keys and entries, batch size, locking.

#include <tensordict/tensor_dict.h>

#include <typeinfo>

#include <ATen/ATen.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_impl.h>

#include "detail/format.h"
#include "detail/validate.h"

namespace tensordict {

using detail::keys_str;
using detail::size_str;

// ---- Validation ---------------------------------------------------------------------------

namespace detail {

// True when `value` can be stored as it is: its shape starts with the batch size and it is on
// the tensordict's device. The fast path of the constructor and of prepare_tensor().
// Forced inline, reading the sizes from the TensorImpl: it runs once per leaf of every
// constructor, where an out-of-line sizes() call was a third of its cost.
static C10_ALWAYS_INLINE bool storable_as_is(const TensorDictBase& dest, const at::Tensor& value) {
  if (!value.defined()) return false;
  const c10::IntArrayRef batch = dest.batch_size();
  const c10::IntArrayRef shape = value.unsafeGetTensorImpl()->sizes();
  if (shape.size() < batch.size()) return false;
  for (size_t d = 0; d < batch.size(); ++d) {
    if (shape[d] != batch[d]) return false;
  }
  const auto& device = dest.device();
  return !device.has_value() || value.device() == *device;
}

at::Tensor prepare_tensor(const TensorDictBase& dest, KeyRef key, at::Tensor value) {
  if (storable_as_is(dest, value)) return value;
  // The slow path: say what is wrong, or move the tensor to the tensordict's device.
  TD_CHECK(value.defined(), ValueError, "cannot store an undefined tensor at key ", key.repr());
  c10::IntArrayRef batch = dest.batch_size();
  c10::IntArrayRef shape = value.sizes();
  if (__builtin_expect(shape.size() < batch.size() || shape.slice(0, batch.size()) != batch, 0)) {
    TD_THROW(ShapeError, "batch dimension mismatch, got self.batch_size=", size_str(batch),
             " and value.shape=", size_str(shape), " for key ", key.repr(), ".");
  }
  const auto& device = dest.device();
  if (device.has_value() && value.device() != *device) value = value.to(*device);
  return value;
}

TensorDict prepare_tensordict(const TensorDictBase& dest, KeyRef key, TensorDict value) {
  c10::IntArrayRef batch = dest.batch_size();
  c10::IntArrayRef child = value.batch_size();
  if (child.size() < batch.size() || child.slice(0, batch.size()) != batch) {
    // Python re-batches a nested tensordict to its parent's batch when its leaves allow it.
    TensorDict rebatched = value.clone(/*recurse=*/false);
    try {
      rebatched.set_batch_size(batch);
    } catch (const ShapeError&) {
      TD_THROW(ShapeError, "batch dimension mismatch, got self.batch_size=", size_str(batch),
               " and the batch size of the TensorDict at key ", key.repr(), " is ",
               size_str(child), ", which cannot be re-batched to it.");
    }
    value = rebatched;
  }
  const auto& device = dest.device();
  if (device.has_value() && value.device() != device) value = value.to(*device);
  return value;
}

NonTensorData prepare_non_tensor(const TensorDictBase& dest, KeyRef key, NonTensorData value) {
  if (value.is_stack()) {
    TD_CHECK(value.ids().sizes() == dest.batch_size(), ShapeError,
             "batch dimension mismatch, got self.batch_size=", size_str(dest.batch_size()),
             " and a non-tensor stack of shape ", size_str(value.ids().sizes()), " for key ",
             key.repr(), ".");
  }
  return value;
}

Entry prepare_entry(const TensorDictBase& dest, KeyRef key, Entry value) {
  switch (value.kind()) {
    case Entry::Kind::Tensor: return prepare_tensor(dest, key, value.tensor_unchecked());
    case Entry::Kind::TensorDict: return prepare_tensordict(dest, key, value.tensordict_unchecked());
    case Entry::Kind::NonTensor: return prepare_non_tensor(dest, key, value.non_tensor());
    case Entry::Kind::Undefined: break;
  }
  TD_THROW(ValueError, "cannot store an undefined entry at key ", key.repr());
}

[[noreturn]] void throw_missing(const TensorDictBase& level, KeyRef key, size_t depth) {
  std::string where = depth == 0 ? "" : " at " + key.prefix(depth).repr();
  TD_THROW(KeyError, "key \"", detail::printable(key[depth]), "\" not found in ",
           level.type_name(), where, " with keys ", keys_str(level.keys()),
           key.size() > 1 ? " (looking up " + key.repr() + ")" : std::string());
}

void check_unlocked(const TensorDictBase& td) {
  TD_CHECK(!td.is_locked(), LockedError,
           "Cannot modify locked TensorDict. For in-place modification, consider using the "
           "`set_()` method and make sure the key is present.");
}

}  // namespace detail

using namespace detail;

namespace {

void check_key(KeyRef key) {
  TD_CHECK(!key.empty(), KeyError, "Only NestedKeys are supported. Got key ().");
}

// Follows all but the last part of `key`. Returns the collection that holds the last part,
// or nullptr when a level is missing (`missing_depth` tells which). `holder` keeps
// intermediate collections alive for backends that create them on the fly.
TensorDictBase* walk(TensorDictBase* root, KeyRef key, Entry& holder, size_t* missing_depth) {
  TensorDictBase* level = root;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    Entry next = level->get(key[i]);
    if (!next.defined()) {
      if (missing_depth) *missing_depth = i;
      return nullptr;
    }
    TD_CHECK(next.is_tensordict(), ValueError,
             "Expected a TensorDictBase instance but got ", kind_name(next.kind()), " for key ",
             key.prefix(i + 1).repr(), " while looking up ", key.repr(), ".");
    holder = std::move(next);
    level = holder.tensordict_unchecked().impl();
  }
  return level;
}

// Like walk, creating missing levels (of the parent's backend kind).
TensorDictBase* walk_create(TensorDictBase* root, KeyRef key, Entry& holder) {
  TensorDictBase* level = root;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    Entry next = level->get(key[i]);
    if (!next.defined()) {
      check_unlocked(*level);
      TensorDict child = level->make_child(key[i], level->batch_size());
      level->insert_or_assign(key[i], child);
      next = Entry(std::move(child));
    } else {
      TD_CHECK(next.is_tensordict(), KeyError, "The entry ", key.prefix(i + 1).repr(),
               " is already present in tensordict and holds ", kind_name(next.kind()),
               ", so ", key.repr(), " cannot be created under it.");
    }
    holder = std::move(next);
    level = holder.tensordict_unchecked().impl();
  }
  return level;
}

}  // namespace

// ---- Construction -------------------------------------------------------------------------

namespace {

void fill_from_items(TensorDictImpl& impl, const TensorDict::Item* begin,
                     const TensorDict::Item* end) {
  // A 128-bit filter on the hash's top 7 bits, kept in two registers (a table in memory would
  // chain every key's check on the previous key's store): a key whose bit is clear cannot be a
  // duplicate, so the slot scan only runs on a filter collision.
  uint64_t seen_low = 0;
  uint64_t seen_high = 0;
  for (const TensorDict::Item* it = begin; it != end; ++it) {
    const std::string& key = it->first;
    const uint32_t hash = TensorDictImpl::key_hash(key);
    const uint64_t bit = uint64_t{1} << ((hash >> 25) & 63);
    const uint64_t low_bit = (hash >> 31) ? 0 : bit;
    const uint64_t high_bit = bit ^ low_bit;
    if ((seen_low & low_bit) | (seen_high & high_bit)) {
      TD_CHECK(impl.find_slot(key, hash) < 0, ValueError, "duplicate key ", NestedKey(key).repr(),
               " in TensorDict constructor");
    }
    seen_low |= low_bit;
    seen_high |= high_bit;
    const EntryInit& init = it->second;
    if (init.is_nested_list()) {
      const auto& nested = init.nested();
      auto child = TensorDictImpl::make(impl.batch_size(), impl.device(), nested.size());
      fill_from_items(*child, nested.data(), nested.data() + nested.size());
      impl.append_unchecked(key, hash, TensorDict(std::move(child)));
    } else if (init.entry().is_tensor()) {
      const at::Tensor& value = init.entry().tensor_unchecked();
      if (storable_as_is(impl, value)) {
        impl.append_unchecked(key, hash, value);
      } else {
        impl.append_unchecked(key, hash, prepare_tensor(impl, key, value));
      }
    } else {
      impl.append_unchecked(key, hash, prepare_entry(impl, key, init.entry()));
    }
  }
}

}  // namespace

TensorDict::TensorDict() : impl_(c10::make_intrusive<TensorDictImpl>(c10::IntArrayRef{}, std::nullopt)) {}

TensorDict::TensorDict(std::initializer_list<Item> items, c10::IntArrayRef batch_size,
                       std::optional<at::Device> device)
    : impl_(TensorDictImpl::make(batch_size, device, items.size())) {
  for (int64_t s : batch_size) TD_CHECK(s >= 0, ValueError, "batch size ", batch_size, " has a negative size");
  fill_from_items(static_cast<TensorDictImpl&>(*impl_), items.begin(), items.end());
}

TensorDict::TensorDict(const std::vector<Item>& items, c10::IntArrayRef batch_size,
                       std::optional<at::Device> device)
    : impl_(TensorDictImpl::make(batch_size, device, items.size())) {
  for (int64_t s : batch_size) TD_CHECK(s >= 0, ValueError, "batch size ", batch_size, " has a negative size");
  fill_from_items(static_cast<TensorDictImpl&>(*impl_), items.data(), items.data() + items.size());
}

TensorDict::TensorDict(c10::intrusive_ptr<TensorDictBase> impl) : impl_(std::move(impl)) {
  TD_CHECK(impl_, ValueError, "TensorDict needs a backend, got a null pointer");
}

TensorDict TensorDict::empty_with(c10::IntArrayRef batch_size, std::optional<at::Device> device) {
  return TensorDict({}, batch_size, device);
}

// ---- Batch size -----------------------------------------------------------------------------

int64_t TensorDict::size(int64_t dim) const {
  const int64_t n = batch_dims();
  TD_CHECK(dim >= -n && dim < n, IndexError, "dim ", dim, " is out of range for batch size ",
           size_str(batch_size()));
  return batch_size()[dim < 0 ? dim + n : dim];
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
      TD_CHECK(shape.size() >= batch.size() && shape.slice(0, batch.size()) == batch, ShapeError,
               "the Tensor ", key, " has shape ", size_str(shape),
               " which is incompatible with the batch-size ", size_str(batch), ".");
    } else if (entry.is_non_tensor() && entry.non_tensor().is_stack()) {
      TD_CHECK(entry.non_tensor().ids().sizes() == batch, ShapeError, "the non-tensor stack ", key,
               " has shape ", size_str(entry.non_tensor().ids().sizes()),
               " which is incompatible with the batch-size ", size_str(batch), ".");
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
  return *this;
}

// ---- Lookup ---------------------------------------------------------------------------------

bool TensorDict::contains(KeyRef key) const {
  check_key(key);
  // Python: ("a", "b") in td is False when "a" holds a tensor (no error, unlike get).
  const TensorDictBase* level = impl_.get();
  Entry holder;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    Entry next = level->get(key[i]);
    if (!next.is_tensordict()) return false;
    holder = std::move(next);
    level = holder.tensordict_unchecked().impl();
  }
  return level->has(key.back());
}

Entry TensorDict::find(KeyRef key) const {
  check_key(key);
  Entry holder;
  TensorDictBase* level = walk(impl_.get(), key, holder, nullptr);
  return level ? level->get(key.back()) : Entry();
}

Entry TensorDict::get_entry(KeyRef key) const {
  check_key(key);
  Entry holder;
  size_t missing = 0;
  TensorDictBase* level = walk(impl_.get(), key, holder, &missing);
  if (level == nullptr) {
    // Report the level where the path broke off.
    Entry h2;
    TensorDictBase* parent = walk(impl_.get(), key.prefix(missing + 1), h2, nullptr);
    throw_missing(*parent, key, missing);
  }
  Entry e = level->get(key.back());
  if (!e.defined()) throw_missing(*level, key, key.size() - 1);
  return e;
}

namespace {
// The in-memory level of a path, found without copying entries, or nullptr when some level is
// missing, not a tensordict, or not in memory (the general path then handles it and its errors).
const TensorDictImpl* in_memory_parent(const TensorDictBase* root, KeyRef key) {
  const TensorDictBase* level = root;
  for (size_t i = 0;; ++i) {
    if (typeid(*level) != typeid(TensorDictImpl)) return nullptr;
    const auto* mem = static_cast<const TensorDictImpl*>(level);
    if (i + 1 >= key.size()) return mem;
    const int64_t slot = mem->find_slot(key[i]);
    if (slot < 0) return nullptr;
    const Entry& e = mem->slots()[slot].value;
    if (!e.is_tensordict()) return nullptr;
    level = e.tensordict_unchecked().impl();
  }
}
}  // namespace

at::Tensor TensorDict::get(KeyRef key) const {
  if (!key.empty()) {
    if (const TensorDictImpl* mem = in_memory_parent(impl_.get(), key)) {
      const int64_t slot = mem->find_slot(key.back());
      if (slot >= 0 && mem->slots()[slot].value.is_tensor()) return mem->slots()[slot].value.tensor_unchecked();
    }
  }
  Entry e = get_entry(key);
  TD_CHECK(e.is_tensor(), TypeError, "the entry at ", key.repr(), " holds ", kind_name(e.kind()),
           ", not a tensor; use ", e.is_tensordict() ? "get_tensordict()" : "get_non_tensor()",
           " or get_entry()");
  return std::move(e.mutable_tensor());
}

at::Tensor TensorDict::get(KeyRef key, const at::Tensor& default_value) const {
  Entry e = find(key);
  if (!e.defined()) return default_value;
  TD_CHECK(e.is_tensor(), TypeError, "the entry at ", key.repr(), " holds ", kind_name(e.kind()),
           ", not a tensor");
  return std::move(e.mutable_tensor());
}

TensorDict TensorDict::get_tensordict(KeyRef key) const {
  Entry e = get_entry(key);
  TD_CHECK(e.is_tensordict(), TypeError, "the entry at ", key.repr(), " holds ",
           kind_name(e.kind()), ", not a TensorDict");
  return e.tensordict_unchecked();
}

NonTensorData TensorDict::get_non_tensor(KeyRef key) const {
  Entry e = get_entry(key);
  TD_CHECK(e.is_non_tensor(), TypeError, "the entry at ", key.repr(), " holds ",
           kind_name(e.kind()), ", not non-tensor data");
  return e.non_tensor();
}

// ---- Writes ---------------------------------------------------------------------------------

TensorDict& TensorDict::set(KeyRef key, at::Tensor value) {
  check_key(key);
  check_unlocked(*impl_);
  if (const TensorDictImpl* found = in_memory_parent(impl_.get(), key)) {
    auto* mem = const_cast<TensorDictImpl*>(found);
    check_unlocked(*mem);
    mem->TensorDictImpl::insert_or_assign(key.back(), prepare_tensor(*mem, key, std::move(value)));
    return *this;
  }
  Entry holder;
  TensorDictBase* level = walk_create(impl_.get(), key, holder);
  check_unlocked(*level);
  level->insert_or_assign(key.back(), prepare_tensor(*level, key, std::move(value)));
  return *this;
}

TensorDict& TensorDict::set(KeyRef key, EntryInit value) {
  check_key(key);
  check_unlocked(*impl_);
  Entry holder;
  TensorDictBase* level = walk_create(impl_.get(), key, holder);
  check_unlocked(*level);
  if (value.is_nested_list()) {
    TensorDict child({}, level->batch_size(), level->device());
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

TensorDict& TensorDict::set_(KeyRef key, const at::Tensor& value) {
  check_key(key);
  Entry holder;
  size_t missing = 0;
  TensorDictBase* level = walk(impl_.get(), key, holder, &missing);
  if (level == nullptr) {
    Entry h2;
    throw_missing(*walk(impl_.get(), key.prefix(missing + 1), h2, nullptr), key, missing);
  }
  Entry dest = level->get(key.back());
  if (!dest.defined()) throw_missing(*level, key, key.size() - 1);
  TD_CHECK(dest.is_tensor(), TypeError, "set_ of a tensor at ", key.repr(), " which holds ",
           kind_name(dest.kind()));
  c10::IntArrayRef batch = level->batch_size();
  TD_CHECK(value.dim() >= static_cast<int64_t>(batch.size()) &&
               value.sizes().slice(0, batch.size()) == batch,
           ShapeError, "batch dimension mismatch, got self.batch_size=", size_str(batch),
           " and value.shape=", size_str(value.sizes()), " for key ", key.repr(), ".");
  try {
    level->write_(key.back(), value);
  } catch (const c10::Error& e) {
    TD_THROW(ValueError, "Failed to update ", key.repr(), " in tensordict: destination shape ",
             size_str(dest.tensor_unchecked().sizes()), ", value shape ", size_str(value.sizes()),
             ": ", e.what_without_backtrace());
  }
  return *this;
}

TensorDict& TensorDict::set_(KeyRef key, const TensorDict& value) {
  check_key(key);
  TensorDict dest = get_tensordict(key);
  for (auto& [k, entry] : value.items(/*include_nested=*/true, /*leaves_only=*/true)) {
    dest.set_(k, entry.tensor());
  }
  return *this;
}

TensorDict& TensorDict::erase(KeyRef key) {
  check_key(key);
  check_unlocked(*impl_);
  Entry holder;
  size_t missing = 0;
  TensorDictBase* level = walk(impl_.get(), key, holder, &missing);
  if (level == nullptr) {
    Entry h2;
    throw_missing(*walk(impl_.get(), key.prefix(missing + 1), h2, nullptr), key, missing);
  }
  check_unlocked(*level);
  if (!level->has(key.back())) throw_missing(*level, key, key.size() - 1);
  level->erase(key.back());
  return *this;
}

Entry TensorDict::pop(KeyRef key) {
  check_key(key);
  check_unlocked(*impl_);
  Entry e = find(key);
  TD_CHECK(e.defined(), KeyError, "You are trying to pop key ", key.repr(),
           " which is not in dict without providing default value. Keys=",
           keys_str(impl_->keys()));
  erase(key);
  return e;
}

Entry TensorDict::pop(KeyRef key, Entry default_value) {
  check_key(key);
  check_unlocked(*impl_);
  Entry e = find(key);
  if (!e.defined()) return default_value;
  erase(key);
  return e;
}

TensorDict& TensorDict::rename_key_(KeyRef old_key, KeyRef new_key, bool safe) {
  check_key(old_key);
  check_key(new_key);
  check_unlocked(*impl_);
  Entry value = get_entry(old_key);
  if (safe && contains(new_key)) {
    TD_THROW(KeyError, "key ", new_key.repr(), " already present in TensorDict.");
  }
  bool same_level = old_key.size() == new_key.size();
  for (size_t i = 0; same_level && i + 1 < old_key.size(); ++i) same_level = old_key[i] == new_key[i];
  if (same_level) {
    Entry holder;
    TensorDictBase* level = walk(impl_.get(), old_key, holder, nullptr);
    check_unlocked(*level);
    if (old_key.back() == new_key.back()) return *this;
    if (level->has(new_key.back())) level->erase(new_key.back());
    level->rename(old_key.back(), new_key.back());
    return *this;
  }
  set(new_key, EntryInit(value));
  erase(old_key);
  return *this;
}

// ---- Listing --------------------------------------------------------------------------------

namespace {
// Visits the entries below `td` in pre-order; `path` holds the key parts leading to `td`, so
// each listed key is built with a single allocation.
template <typename Out>
void collect(const TensorDictBase& td, std::vector<std::string>& path, bool include_nested, bool leaves_only,
             Out& out) {
  td.for_each([&](const std::string& key, const Entry& entry) {
    if (!leaves_only || entry.is_tensor()) {
      std::vector<std::string> parts;
      parts.reserve(path.size() + 1);
      parts.insert(parts.end(), path.begin(), path.end());
      parts.push_back(key);
      out(NestedKey(std::move(parts)), entry);
    }
    if (include_nested && entry.is_tensordict()) {
      path.push_back(key);
      collect(*entry.tensordict_unchecked().impl(), path, include_nested, leaves_only, out);
      path.pop_back();
    }
  });
}
}  // namespace

std::vector<NestedKey> TensorDict::keys(bool include_nested, bool leaves_only) const {
  std::vector<NestedKey> out;
  out.reserve(impl_->num_entries());
  std::vector<std::string> path;
  auto add = [&](NestedKey k, const Entry&) { out.push_back(std::move(k)); };
  collect(*impl_, path, include_nested, leaves_only, add);
  return out;
}

std::vector<std::pair<NestedKey, Entry>> TensorDict::items(bool include_nested,
                                                           bool leaves_only) const {
  std::vector<std::pair<NestedKey, Entry>> out;
  out.reserve(impl_->num_entries());
  std::vector<std::string> path;
  auto add = [&](NestedKey k, const Entry& e) { out.emplace_back(std::move(k), e); };
  collect(*impl_, path, include_nested, leaves_only, add);
  return out;
}

std::vector<Entry> TensorDict::values(bool include_nested, bool leaves_only) const {
  std::vector<Entry> out;
  out.reserve(impl_->num_entries());
  std::vector<std::string> path;
  auto add = [&](NestedKey, const Entry& e) { out.push_back(e); };
  collect(*impl_, path, include_nested, leaves_only, add);
  return out;
}

// ---- Locking ----------------------------------------------------------------------------------

TensorDict& TensorDict::lock_() {
  impl_->set_locked(true);
  impl_->for_each([&](const std::string&, const Entry& entry) {
    if (!entry.is_tensordict()) return;
    TensorDict child = entry.tensordict_unchecked();
    child.lock_();
    child.impl()->add_lock_parent(impl_);
  });
  return *this;
}

TensorDict& TensorDict::unlock_() {
  TD_CHECK(!impl_->has_locked_parent(), LockedError,
           "Cannot unlock a tensordict that is part of a locked graph. Unlock the root "
           "tensordict first. If the tensordict is part of multiple graphs, group the graphs "
           "under a common tensordict and unlock this root.");
  impl_->set_locked(false);
  impl_->for_each([&](const std::string&, const Entry& entry) {
    if (!entry.is_tensordict()) return;
    TensorDict child = entry.tensordict_unchecked();
    child.impl()->remove_lock_parent(impl_.get());
    child.unlock_();
  });
  return *this;
}

}  // namespace tensordict
