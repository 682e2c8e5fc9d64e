// Key selection and transforms (select, exclude, split_keys, flatten_keys, unflatten_keys,
// semantics 1.5) and the update family with indexed reads and writes (semantics 1.4, 1.6).

#include <cstring>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/batch_index.h>
#include <tensordict/tensor_dict_impl.h>

#include "detail/format.h"
#include "detail/validate.h"

namespace tensordict {

using detail::size_str;

namespace {

// Keys grouped by their first part, in first-appearance order: `whole` when the entry itself is
// named, `rest` the remaining parts of the nested keys under it.
struct KeyGroup {
  std::string head;
  bool whole = false;
  std::vector<NestedKey> rest;
};

std::vector<KeyGroup> group_keys(const std::vector<NestedKey>& keys) {
  std::vector<KeyGroup> groups;
  for (const auto& key : keys) {
    TD_CHECK(!key.empty(), KeyError, "Only NestedKeys are supported. Got key ().");
    KeyGroup* g = nullptr;
    for (auto& existing : groups) {
      if (existing.head == key[0]) g = &existing;
    }
    if (g == nullptr) {
      groups.push_back(KeyGroup{key[0], false, {}});
      g = &groups.back();
    }
    if (key.size() == 1) {
      g->whole = true;
    } else {
      g->rest.emplace_back(std::vector<std::string>(key.parts().begin() + 1, key.parts().end()));
    }
  }
  return groups;
}

c10::intrusive_ptr<TensorDictImpl> new_level(const TensorDictBase& like, size_t capacity = 0) {
  return TensorDictImpl::make(like.batch_size(), like.device(), capacity);
}

TensorDict select_level(const TensorDictBase& td, const std::vector<NestedKey>& keys, bool strict,
                        const NestedKey& prefix) {
  auto out = new_level(td);
  for (const KeyGroup& g : group_keys(keys)) {
    Entry e = td.get(g.head);
    NestedKey full = prefix.empty() ? NestedKey(g.head) : prefix.child(g.head);
    if (!e.defined()) {
      if (!strict) continue;
      TD_THROW(KeyError, "key \"", g.head, "\" not found in ", td.type_name(),
               prefix.empty() ? std::string() : " at " + prefix.repr(), " with keys ",
               detail::keys_str(td.keys()), " (select of ", full.repr(), ")");
    }
    if (g.whole) {
      out->append_unchecked(g.head, e);
      continue;
    }
    if (!e.is_tensordict()) {
      TD_CHECK(!strict, KeyError, "select: ", full.repr(), " holds ", kind_name(e.kind()),
               ", so nested keys under it do not exist");
      continue;
    }
    out->append_unchecked(g.head, select_level(*e.tensordict_unchecked().impl(), g.rest, strict, full));
  }
  return TensorDict(std::move(out));
}

TensorDict exclude_level(const TensorDictBase& td, const std::vector<NestedKey>& keys) {
  std::vector<KeyGroup> groups = group_keys(keys);
  auto out = new_level(td, td.num_entries());
  td.for_each([&](const std::string& key, const Entry& e) {
    const KeyGroup* g = nullptr;
    for (const auto& cand : groups) {
      if (cand.head == key) g = &cand;
    }
    if (g == nullptr) {
      out->append_unchecked(key, e);
    } else if (!g->whole) {
      if (e.is_tensordict()) {
        out->append_unchecked(key, exclude_level(*e.tensordict_unchecked().impl(), g->rest));
      } else {
        out->append_unchecked(key, e);  // nested keys under a leaf do not exist: nothing to drop
      }
    }
  });
  return TensorDict(std::move(out));
}

// True when some key below `td` contains `sep`: only then can flattened keys collide.
bool any_key_contains(const TensorDictBase& td, std::string_view sep, size_t& leaves) {
  bool found = false;
  td.for_each([&](const std::string& key, const Entry& e) {
    if (!found && std::string_view(key).find(sep) != std::string_view::npos) found = true;
    if (e.is_tensordict()) {
      found = any_key_contains(*e.tensordict_unchecked().impl(), sep, leaves) || found;
    } else {
      ++leaves;
    }
  });
  return found;
}

// select_: `td` keeps only the selected entries, in selection order. A nested tensordict named
// through nested keys is narrowed in place, so other handles to it see the change. Missing keys
// were rejected (strict) or are skipped, so every key used here exists.
void select_in_place(TensorDictBase& td, const std::vector<NestedKey>& keys) {
  detail::check_unlocked(td);
  std::vector<std::pair<std::string, Entry>> kept;
  for (const KeyGroup& g : group_keys(keys)) {
    Entry e = td.get(g.head);
    if (!e.defined() || (!g.whole && !e.is_tensordict())) continue;
    if (!g.whole) select_in_place(*e.tensordict_unchecked().impl(), g.rest);
    kept.emplace_back(g.head, std::move(e));
  }
  for (const std::string& key : td.keys()) td.erase(key);
  for (auto& [key, e] : kept) td.insert_or_assign(key, std::move(e));
}

void exclude_in_place(TensorDictBase& td, const std::vector<NestedKey>& keys) {
  detail::check_unlocked(td);
  for (const KeyGroup& g : group_keys(keys)) {
    Entry e = td.get(g.head);
    if (g.whole) {
      if (e.defined()) td.erase(g.head);
    } else if (e.is_tensordict()) {
      exclude_in_place(*e.tensordict_unchecked().impl(), g.rest);
    }
  }
}

// `prefix + sep + key`, built on the stack when it fits (flattened keys are short) so that the
// only string made per leaf is the one the new slot owns.
class JoinedKey {
 public:
  // `prefix` is null at the top level (an empty prefix string is a real, empty key).
  JoinedKey(const std::string_view* prefix, std::string_view sep, std::string_view key) {
    if (prefix == nullptr) {
      view_ = key;
      return;
    }
    const size_t n = prefix->size() + sep.size() + key.size();
    if (n > sizeof(inline_)) heap_.resize(n);
    char* p = n > sizeof(inline_) ? heap_.data() : inline_;
    std::memcpy(p, prefix->data(), prefix->size());
    std::memcpy(p + prefix->size(), sep.data(), sep.size());
    std::memcpy(p + prefix->size() + sep.size(), key.data(), key.size());
    view_ = std::string_view(p, n);
  }
  JoinedKey(const JoinedKey&) = delete;
  JoinedKey& operator=(const JoinedKey&) = delete;
  std::string_view view() const { return view_; }

 private:
  char inline_[96];
  std::string heap_;
  std::string_view view_;
};

void flatten_into(TensorDictImpl& out, const TensorDictBase& td, const std::string_view* prefix, std::string_view sep,
                  bool check, std::vector<std::string>& collisions) {
  td.for_each([&](const std::string& key, const Entry& e) {
    const JoinedKey name(prefix, sep, key);
    if (e.is_tensordict() && e.tensordict_unchecked().num_keys() > 0) {
      const std::string_view joined = name.view();
      flatten_into(out, *e.tensordict_unchecked().impl(), &joined, sep, check, collisions);
      return;
    }
    const uint32_t hash = TensorDictImpl::key_hash(name.view());
    if (check && out.find_slot(name.view(), hash) >= 0) {
      collisions.emplace_back(name.view());
      return;
    }
    out.append_unchecked(name.view(), hash, e);
  });
}

}  // namespace

TensorDict TensorDict::select(const std::vector<NestedKey>& keys, bool strict) const {
  return select_level(*impl_, keys, strict, NestedKey());
}

TensorDict TensorDict::exclude(const std::vector<NestedKey>& keys) const {
  return exclude_level(*impl_, keys);
}

TensorDict& TensorDict::select_(const std::vector<NestedKey>& keys, bool strict) {
  detail::check_unlocked(*impl_);
  // The out-of-place select raises every missing-key error before anything is modified.
  if (strict) select(keys, strict);
  select_in_place(*impl_, keys);
  return *this;
}

TensorDict& TensorDict::exclude_(const std::vector<NestedKey>& keys) {
  exclude_in_place(*impl_, keys);
  return *this;
}

std::vector<TensorDict> TensorDict::split_keys(const std::vector<std::vector<NestedKey>>& key_sets,
                                               bool strict) const {
  std::vector<TensorDict> out;
  std::vector<NestedKey> all;
  for (const auto& set : key_sets) {
    out.push_back(select(set, strict));
    all.insert(all.end(), set.begin(), set.end());
  }
  out.push_back(exclude(all));
  return out;
}

TensorDict TensorDict::flatten_keys(std::string_view separator) const {
  // Keys without the separator cannot collide once joined: the check is skipped then.
  size_t leaves = 0;
  const bool check = any_key_contains(*impl_, separator, leaves);
  auto out = TensorDictImpl::make(batch_size(), device(), leaves);
  std::vector<std::string> collisions;
  flatten_into(*out, *impl_, nullptr, separator, check, collisions);
  if (!collisions.empty()) {
    TD_THROW(KeyError, "Flattening keys in tensordict causes keys ", detail::keys_str(collisions), " to collide.");
  }
  return TensorDict(std::move(out));
}

TensorDict TensorDict::unflatten_keys(std::string_view separator) const {
  TD_CHECK(!separator.empty(), ValueError, "unflatten_keys: the separator must not be empty");
  TensorDict out = empty_with(batch_size(), device());
  impl_->for_each([&](const std::string& key, const Entry& e) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
      size_t pos = key.find(separator, start);
      if (pos == std::string::npos) {
        parts.push_back(key.substr(start));
        break;
      }
      parts.push_back(key.substr(start, pos - start));
      start = pos + separator.size();
    }
    NestedKey target(parts);
    bool conflict = false;
    try {
      conflict = out.contains(target);
      if (!conflict) out.set(target, EntryInit(e));
    } catch (const KeyError&) {
      conflict = true;  // an intermediate level is a leaf
    } catch (const ValueError&) {
      conflict = true;
    }
    TD_CHECK(!conflict, KeyError, "Unflattening key(s) in tensordict will override an existing for unflattened key ",
             target.repr(), " (from ", NestedKey(key).repr(), ").");
  });
  return out;
}

// ---- update family -------------------------------------------------------------------------------

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
                  const std::optional<std::vector<NestedKey>>& keys, const NestedKey& prefix, TensorDict& root) {
  for (auto& [key, entry] : src.items()) {
    NestedKey full = prefix.empty() ? key : prefix.child(key[0]);
    if (!selected(full, keys)) continue;
    Entry existing = dest.find(key);
    if (entry.is_tensordict()) {
      if (existing.is_tensordict()) {
        TensorDict child = existing.tensordict();
        update_level(child, entry.tensordict_unchecked(), clone, inplace, keys, full, root);
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

// Every leaf key of `src` must exist in `dest` (checked before anything is written).
void check_keys_exist(const TensorDict& dest, const TensorDict& src) {
  for (const auto& key : src.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    TD_CHECK(dest.contains(key), KeyError, "The key ", key.repr(), " was not found in the dest tensordict.");
  }
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
  update_level(*this, source, clone, inplace, keys_to_update, NestedKey(), *this);
  return *this;
}

TensorDict& TensorDict::update_(const TensorDict& source) {
  check_keys_exist(*this, source);
  for (auto& [key, entry] : source.items(/*include_nested=*/true, /*leaves_only=*/true)) {
    set_(key, entry.tensor_unchecked());
  }
  return *this;
}

TensorDict& TensorDict::update_at_(const TensorDict& source, c10::ArrayRef<at::indexing::TensorIndex> index) {
  check_keys_exist(*this, source);
  for (auto& [key, entry] : source.items(/*include_nested=*/true, /*leaves_only=*/true)) {
    set_at_(key, entry.tensor_unchecked(), index);
  }
  return *this;
}

TensorDict& TensorDict::update_at_(const TensorDict& source, std::initializer_list<at::indexing::TensorIndex> index) {
  return update_at_(source, c10::ArrayRef<at::indexing::TensorIndex>(index));
}

TensorDict& TensorDict::set_at_(KeyRef key, const at::Tensor& value, c10::ArrayRef<at::indexing::TensorIndex> index) {
  TD_CHECK(!key.empty(), KeyError, "Only NestedKeys are supported. Got key ().");
  at::Tensor dest = get(key);  // KeyError / TypeError naming the key
  BatchIndex bi(index, batch_size());
  TensorDict parent = key.size() == 1 ? *this : get_tensordict(key.prefix(key.size() - 1));
  try {
    parent.impl()->write_at_(key.back(), bi, value);
  } catch (const c10::Error& e) {
    TD_THROW(ShapeError, "set_at_: cannot write a value of shape ", size_str(value.sizes()), " into ", key.repr(), "[",
             bi.repr(), "] (leaf shape ", size_str(dest.sizes()), "): ", e.what_without_backtrace());
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
