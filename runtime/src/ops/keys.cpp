// Key selection and key transforms (semantics 1.5): select(_), exclude(_), split_keys,
// flatten_keys, unflatten_keys. Results share the leaves.

#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <c10/macros/Macros.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/in_memory.h"
#include "backends/in_memory/level_builder.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "core/format.h"
#include "core/key_chain.h"
#include "core/validate.h"

namespace tensordict {

namespace {

// Keys grouped by their first part, in first-appearance order: `whole` when the entry itself is
// named, `rest` the remaining parts of the nested keys under it.
struct KeyGroup {
  std::string head;
  bool whole = false;
  std::vector<NestedKey> rest;
};

// Groups in first-appearance order. A few heads (the usual select) are found by a scan; past
// kScannedHeads an index by head is built, O(1) per key whatever the count.
struct KeyGroups {
  static constexpr size_t kScannedHeads = 16;
  std::vector<KeyGroup> groups;
  std::unordered_map<std::string_view, size_t> by_head;  // views into groups[i].head; empty below the limit
  static constexpr size_t kMissing = SIZE_MAX;
  size_t index_of(std::string_view head) const {
    if (by_head.empty()) {
      for (size_t i = 0; i < groups.size(); ++i) {
        if (groups[i].head == head) return i;
      }
      return kMissing;
    }
    auto it = by_head.find(head);
    return it == by_head.end() ? kMissing : it->second;
  }
  const KeyGroup* find(std::string_view head) const {
    const size_t i = index_of(head);
    return i == kMissing ? nullptr : &groups[i];
  }
};

KeyGroups group_keys(const std::vector<NestedKey>& keys) {
  KeyGroups out;
  out.groups.reserve(keys.size());  // no reallocation: by_head views the heads in place
  for (const auto& key : keys) {
    detail::check_key(key);
    size_t i = out.index_of(key[0]);
    if (i == KeyGroups::kMissing) {
      i = out.groups.size();
      out.groups.push_back(KeyGroup{key[0], false, {}});
      if (!out.by_head.empty()) {
        out.by_head.emplace(out.groups[i].head, i);
      } else if (out.groups.size() > KeyGroups::kScannedHeads) {
        for (size_t j = 0; j < out.groups.size(); ++j) out.by_head.emplace(out.groups[j].head, j);
      }
    }
    KeyGroup* g = &out.groups[i];
    if (key.size() == 1) {
      g->whole = true;
    } else {
      g->rest.emplace_back(std::vector<std::string>(key.parts().begin() + 1, key.parts().end()));
    }
  }
  return out;
}

// Python narrows a nested level to the nested keys named under it, even when the level is also
// named whole (select("n", ("n", "c")) keeps n with c only).
TensorDict select_level(const TensorDictBase& td, const std::vector<NestedKey>& keys, bool strict,
                        const detail::KeyChain& prefix) {
  const KeyGroups groups = group_keys(keys);
  LevelBuilder out(td.batch_size(), td.device(), groups.groups.size());
  for (const KeyGroup& g : groups.groups) {
    Entry e = td.get(g.head);
    const detail::KeyChain full = prefix.child(g.head);
    if (!e.defined()) {
      if (!strict) continue;
      TD_THROW(KeyError, "key \"", detail::printable(g.head), "\" not found in ", td.type_name(),
               prefix.empty() ? std::string() : " at " + prefix.repr(), " with keys ", detail::keys_str(td.keys()),
               " (select of ", full.repr(), ")");
    }
    if (g.rest.empty()) {
      out.append(g.head, std::move(e));
    } else if (e.is_tensordict()) {
      out.append(g.head, select_level(*e.tensordict_unchecked().impl(), g.rest, strict, full));
    } else {
      TD_CHECK(!strict, KeyError, "select: ", full.repr(), " holds ", kind_name(e.kind()), ", so the nested key ",
               full.child_path(g.rest.front()[0]).repr(), " does not exist");
      if (g.whole) out.append(g.head, std::move(e));
    }
  }
  return out.finish();
}

TensorDict exclude_level(const TensorDictBase& td, const std::vector<NestedKey>& keys) {
  const KeyGroups groups = group_keys(keys);
  LevelBuilder out(td.batch_size(), td.device(), td.num_entries());
  td.for_each([&](const std::string& key, const Entry& e) {
    const KeyGroup* g = groups.find(key);
    if (g == nullptr) {
      out.append(key, e);
    } else if (!g->whole) {
      // A nested key under a leaf does not exist: like any missing key, nothing to drop.
      if (e.is_tensordict()) {
        out.append(key, exclude_level(*e.tensordict_unchecked().impl(), g->rest));
      } else {
        out.append(key, e);
      }
    }
  });
  return out.finish();
}

// select_: `td` keeps only the selected entries, in selection order. A nested tensordict named
// through nested keys is narrowed in place, so other handles to it see the change. Missing keys
// were rejected (strict) or are skipped, so every key used here exists.
void select_in_place(TensorDictBase& td, const std::vector<NestedKey>& keys) {
  detail::check_unlocked(td);
  std::vector<std::string> kept;
  for (const KeyGroup& g : group_keys(keys).groups) {
    const EntryKind kind = td.kind(g.head);
    if (kind == EntryKind::Undefined) continue;
    if (!g.rest.empty()) {
      if (kind != EntryKind::TensorDict) {
        if (!g.whole) continue;
      } else {
        select_in_place(*td.get(g.head).tensordict_unchecked().impl(), g.rest);
      }
    }
    kept.push_back(g.head);
  }
  if (in_memory::keep_in_order(td, kept)) return;  // an in-memory level is rebuilt at once
  // The rest is erased; what stays is put in selection order only when it is not already.
  // Entries stay where they are stored (a file's groups are never taken out and put back).
  const std::unordered_set<std::string_view> keep(kept.begin(), kept.end());
  for (const std::string& key : td.keys()) {
    if (keep.count(key) == 0) td.erase(key);
  }
  if (td.keys() != kept) {
    for (const std::string& key : kept) td.move_to_end(key);
  }
}

void exclude_in_place(TensorDictBase& td, const std::vector<NestedKey>& keys) {
  detail::check_unlocked(td);
  // Whole keys are erased as they come (O(1) each); only nested keys need grouping by level.
  std::vector<NestedKey> nested;
  for (const NestedKey& key : keys) {
    detail::check_key(key);
    if (key.size() > 1) {
      nested.push_back(key);
    } else {
      td.erase(key[0]);
    }
  }
  if (nested.empty()) return;
  for (const KeyGroup& g : group_keys(nested).groups) {
    if (td.kind(g.head) == EntryKind::TensorDict) exclude_in_place(*td.get(g.head).tensordict_unchecked().impl(), g.rest);
  }
}

// Whether `key` contains `sep`. Keys are short: for the usual one-character separator, a byte
// loop inlined in the walk costs a third of string_view::find, which calls memchr (and, inlined
// too, makes the whole function too large to inline).
C10_NOINLINE bool key_contains_string(std::string_view key, std::string_view sep) {
  return key.find(sep) != std::string_view::npos;
}
inline bool key_contains(std::string_view key, std::string_view sep) {
  if (sep.size() != 1) return key_contains_string(key, sep);
  for (const char c : key) {
    if (c == sep[0]) return true;
  }
  return false;
}

// True when some key below `td` contains `sep`: only then can flattened keys collide.
bool any_key_contains(const TensorDictBase& td, std::string_view sep, size_t& leaves) {
  bool found = false;
  in_memory::for_each_structure_entry(td, [&](const std::string& key, const Entry& e) {
    if (!found && key_contains(key, sep)) found = true;
    if (e.is_tensordict()) {
      found = any_key_contains(*e.tensordict_unchecked().impl(), sep, leaves) || found;
    } else {
      ++leaves;
    }
  });
  return found;
}

// Copies `n` bytes, sizeof(T) <= n <= 2 * sizeof(T): its first and last sizeof(T), overlapping.
template <typename T>
inline void copy_ends(char* dst, const char* src, size_t n) {
  T head, tail;
  std::memcpy(&head, src, sizeof(T));
  std::memcpy(&tail, src + n - sizeof(T), sizeof(T));
  std::memcpy(dst, &head, sizeof(T));
  std::memcpy(dst + n - sizeof(T), &tail, sizeof(T));
}

// Copies `n` bytes. Up to 16 in at most two overlapping loads and stores a side (the three parts
// of a flattened key are a few bytes each: three calls to memcpy cost more than the copies).
inline void copy_short(char* dst, const char* src, size_t n) {
  if (n > 16) {
    std::memcpy(dst, src, n);
  } else if (n >= 8) {
    copy_ends<uint64_t>(dst, src, n);
  } else if (n >= 4) {
    copy_ends<uint32_t>(dst, src, n);
  } else if (n > 0) {
    const char first = src[0], middle = src[n / 2], last = src[n - 1];
    dst[0] = first;
    dst[n / 2] = middle;
    dst[n - 1] = last;
  }
}

// `prefix + sep + key`, built on the stack when it fits (flattened keys are short) so that the
// only string made per leaf is the one the new entry owns.
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
    copy_short(p, prefix->data(), prefix->size());
    copy_short(p + prefix->size(), sep.data(), sep.size());
    copy_short(p + prefix->size() + sep.size(), key.data(), key.size());
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

// Python lists leaves only (tensors and non-tensor data): an empty nested level disappears.
void flatten_into(LevelBuilder& out, const TensorDictBase& td, const std::string_view* prefix, std::string_view sep,
                  bool check, std::vector<std::string>& collisions) {
  in_memory::for_each_value_entry(td, [&](const std::string& key, const Entry& e) {
    const JoinedKey name(prefix, sep, key);
    if (e.is_tensordict()) {
      const std::string_view joined = name.view();
      flatten_into(out, *e.tensordict_unchecked().impl(), &joined, sep, check, collisions);
      return;
    }
    if (!check) {
      out.append(name.view(), e);
    } else if (!out.try_append(name.view(), e)) {
      collisions.emplace_back(name.view());
    }
  });
}

}  // namespace

TensorDict TensorDict::select(const std::vector<NestedKey>& keys, bool strict) const {
  return select_level(*impl_, keys, strict, detail::KeyChain());
}

TensorDict TensorDict::exclude(const std::vector<NestedKey>& keys) const { return exclude_level(*impl_, keys); }

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

std::vector<TensorDict> TensorDict::split_keys(const std::vector<std::vector<NestedKey>>& key_sets, bool strict) const {
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
  LevelBuilder out(batch_size(), device(), leaves);
  std::vector<std::string> collisions;
  flatten_into(out, *impl_, nullptr, separator, check, collisions);
  if (!collisions.empty()) {
    TD_THROW(KeyError, "Flattening keys in tensordict causes keys ", detail::keys_str(collisions), " to collide.");
  }
  return out.finish();
}

TensorDict TensorDict::unflatten_keys(std::string_view separator) const {
  TD_CHECK(!separator.empty(), ValueError, "unflatten_keys: the separator must not be empty");
  // As Python: a shallow copy whose keys holding the separator are moved, in order, to their
  // nested place; plain keys keep their positions, new groups come after them.
  TensorDict out = clone(/*recurse=*/false);
  for (const std::string& key : impl_->keys()) {
    if (key.find(separator) == std::string::npos) continue;
    const NestedKey target = NestedKey::split(key, separator);
    Entry value = out.impl()->get(key);
    out.impl()->erase(key);
    bool conflict = false;
    try {
      conflict = out.contains(target);
      if (!conflict) out.set(target, EntryInit(std::move(value)));
    } catch (const KeyError&) {
      conflict = true;  // a level on the way is a leaf
    } catch (const ValueError&) {
      conflict = true;
    }
    TD_CHECK(!conflict, KeyError, "Unflattening key(s) in tensordict will override an existing for unflattened key ",
             target.repr(), " (from ", NestedKey(key).repr(), ").");
  }
  return out;
}

}  // namespace tensordict
