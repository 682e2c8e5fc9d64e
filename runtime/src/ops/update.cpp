// The update family (semantics 1.6) and the indexed reads and writes of one key (1.4): update,
// update_ / copy_, update_at_, set_at_, get_at, setdefault.

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/batch_index.h>
#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "core/format.h"
#include "core/validate.h"
#include "handle/key_path.h"

namespace tensordict {

using detail::size_str;

namespace {

bool selected(const NestedKey& path, const std::optional<std::vector<NestedKey>>& keys) {
  if (!keys) return true;
  for (const auto& k : *keys) {
    const size_t n = std::min(k.size(), path.size());
    bool prefix = true;
    for (size_t i = 0; i < n && prefix; ++i) prefix = k[i] == path[i];
    if (prefix) return true;
  }
  return false;
}

void update_level(TensorDict& dest, const TensorDict& src, bool clone, bool inplace,
                  const std::optional<std::vector<NestedKey>>& keys, const NestedKey& prefix) {
  for (auto& [key, entry] : src.items()) {
    const NestedKey full = prefix.child(key[0]);
    if (!selected(full, keys)) continue;
    const Entry existing = dest.find(key);
    if (entry.is_tensordict()) {
      if (existing.is_tensordict()) {
        TensorDict child = existing.tensordict();
        update_level(child, entry.tensordict_unchecked(), clone, inplace, keys, full);
      } else {
        const TensorDict& value = entry.tensordict_unchecked();
        dest.set(key, EntryInit(clone ? value.clone() : value));
      }
    } else if (entry.is_tensor()) {
      at::Tensor value = clone ? entry.tensor_unchecked().clone() : entry.tensor_unchecked();
      if (inplace && existing.is_tensor()) {
        dest.set_(key, value);
      } else {
        dest.set(key, value);
      }
    } else if (entry.defined()) {
      dest.set(key, EntryInit(entry));
    }
  }
}

// Every tensor and non-tensor leaf of `src` must exist in `dest` with the same kind, tensors
// with `dest`'s batch dims leading (checked before anything is written). Returns the
// non-tensor leaves, which update_ writes after the tensors.
std::vector<std::pair<NestedKey, Entry>> check_in_place_source(const TensorDict& dest, const TensorDict& src) {
  std::vector<std::pair<NestedKey, Entry>> non_tensors;
  for (auto& [key, value] : src.items(/*include_nested=*/true)) {
    if (value.is_tensordict()) continue;
    Entry holder;
    TensorDictBase* level = detail::find_level(dest.impl(), key, holder);
    const EntryKind kind = level ? level->kind(key.back()) : EntryKind::Undefined;
    TD_CHECK(kind != EntryKind::Undefined, KeyError, "The key ", key.repr(), " was not found in the dest tensordict.");
    TD_CHECK(kind == value.kind(), TypeError, "update_: the entry at ", key.repr(), " holds ", kind_name(kind),
             ", the source holds ", kind_name(value.kind()));
    if (value.is_non_tensor()) {
      non_tensors.emplace_back(key, value);
      continue;
    }
    const at::Tensor& v = value.tensor_unchecked();
    c10::IntArrayRef batch = level->batch_size();
    TD_CHECK(v.dim() >= static_cast<int64_t>(batch.size()) && v.sizes().slice(0, batch.size()) == batch, ShapeError,
             "batch dimension mismatch, got self.batch_size=", size_str(batch), " and value.shape=", size_str(v.sizes()),
             " for key ", key.repr(), ".");
  }
  return non_tensors;
}

}  // namespace

TensorDict& TensorDict::update(const TensorDict& source, bool clone, bool inplace,
                               const std::optional<std::vector<NestedKey>>& keys_to_update) {
  if (!inplace) detail::check_unlocked(*impl_);
  c10::IntArrayRef a = batch_size(), b = source.batch_size();
  const size_t n = std::min(a.size(), b.size());
  TD_CHECK(a.slice(0, n) == b.slice(0, n), ShapeError,
           "update_batch_size must be set to True to be able to update tensordicts of different batch size. Got sizes ",
           size_str(a), " and ", size_str(b), ".");
  update_level(*this, source, clone, inplace, keys_to_update, NestedKey());
  return *this;
}

TensorDict& TensorDict::update_(const TensorDict& source) {
  const auto non_tensors = check_in_place_source(*this, source);
  // One batched write (one round trip for a remote backend); a failing copy is redone key by
  // key, which names the key.
  try {
    impl_->write_many_(source);
  } catch (const c10::Error&) {
    for (auto& [key, entry] : source.items(/*include_nested=*/true, /*leaves_only=*/true)) {
      set_(key, entry.tensor_unchecked());
    }
    throw;
  }
  // Non-tensor values are written too, as v0.14's update_ (through set_) does.
  for (const auto& [key, entry] : non_tensors) set_non_tensor_(key, entry.non_tensor());
  return *this;
}

TensorDict& TensorDict::copy_(const TensorDict& source) { return update_(source); }

TensorDict& TensorDict::update_at_(const TensorDict& source, c10::ArrayRef<at::indexing::TensorIndex> index) {
  for (const auto& key : source.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    TD_CHECK(contains(key), KeyError, "The key ", key.repr(), " was not found in the dest tensordict.");
  }
  for (auto& [key, entry] : source.items(/*include_nested=*/true, /*leaves_only=*/true)) {
    set_at_(key, entry.tensor_unchecked(), index);
  }
  return *this;
}

TensorDict& TensorDict::update_at_(const TensorDict& source, std::initializer_list<at::indexing::TensorIndex> index) {
  return update_at_(source, c10::ArrayRef<at::indexing::TensorIndex>(index));
}

TensorDict& TensorDict::set_at_(KeyRef key, const at::Tensor& value, c10::ArrayRef<at::indexing::TensorIndex> index) {
  detail::check_key(key);
  Entry holder;
  TensorDictBase* level = detail::level_of(impl_.get(), key, holder);
  const EntryKind kind = level->kind(key.back());
  if (kind == EntryKind::Undefined) detail::throw_missing(*level, key, key.size() - 1);
  TD_CHECK(kind == EntryKind::Tensor, TypeError, "set_at_ of a tensor at ", key.repr(), " which holds ",
           kind_name(kind));
  BatchIndex bi(index, batch_size());
  try {
    level->write_at_(key.back(), bi, value);
  } catch (const c10::Error& e) {
    TD_THROW(ShapeError, "set_at_: cannot write a value of shape ", size_str(value.sizes()), " into ", key.repr(), "[",
             bi.repr(), "] (leaf shape ", size_str(level->get(key.back()).tensor().sizes()),
             "): ", e.what_without_backtrace());
  }
  return *this;
}

TensorDict& TensorDict::set_at_(KeyRef key, const at::Tensor& value,
                                std::initializer_list<at::indexing::TensorIndex> index) {
  return set_at_(key, value, c10::ArrayRef<at::indexing::TensorIndex>(index));
}

at::Tensor TensorDict::get_at(KeyRef key, c10::ArrayRef<at::indexing::TensorIndex> index) const {
  at::Tensor leaf = get(key);
  BatchIndex bi(index, batch_size());
  return bi.apply(leaf);
}

at::Tensor TensorDict::get_at(KeyRef key, std::initializer_list<at::indexing::TensorIndex> index) const {
  return get_at(key, c10::ArrayRef<at::indexing::TensorIndex>(index));
}

Entry TensorDict::setdefault(KeyRef key, EntryInit default_value) {
  Entry e = find(key);
  if (e.defined()) return e;
  set(key, std::move(default_value));
  return get_entry(key);
}

}  // namespace tensordict
