// Listing keys, items and values (semantics 1.3), and is_empty.

#include <tensordict/tensor_dict.h>

#include <typeinfo>

#include <tensordict/entry.h>

#include "backends/in_memory/tensor_dict_impl.h"

namespace tensordict {

namespace {

// `path` + `key` as one NestedKey, built with a single allocation.
NestedKey joined(const std::vector<std::string>& path, const std::string& key) {
  std::vector<std::string> parts;
  parts.reserve(path.size() + 1);
  parts.insert(parts.end(), path.begin(), path.end());
  parts.push_back(key);
  return NestedKey(std::move(parts));
}

// Whether keys() lists an entry of `kind` (every kind, or tensors only).
bool listed(EntryKind kind, bool leaves_only) { return !leaves_only || kind == EntryKind::Tensor; }

// Keys below `td` in pre-order, read without touching tensor data: an in-memory level's slots in
// place (its nested levels with them), another level's through for_each_key (for_each_key_nesting
// when every key is listed: an HDF5 level then opens no dataset), then get for a nested level (a
// remote backend lists kinds without reading tensors).
void collect_keys(const TensorDictBase& td, std::vector<std::string>& path, bool include_nested, bool leaves_only,
                  std::vector<NestedKey>& out) {
  const auto visit = [&](const std::string& key, EntryKind kind, const Entry* nested) {
    if (listed(kind, leaves_only)) out.push_back(joined(path, key));
    if (include_nested && kind == EntryKind::TensorDict) {
      Entry fetched;
      if (nested == nullptr) fetched = td.get(key);
      path.push_back(key);
      collect_keys(*(nested ? *nested : fetched).tensordict_unchecked().impl(), path, include_nested, leaves_only, out);
      path.pop_back();
    }
  };
  if (typeid(td) == typeid(TensorDictImpl)) {
    static_cast<const TensorDictImpl&>(td).for_each_slot(
        [&](const TensorDictImpl::Slot& slot) { visit(slot.key, slot.value.kind(), &slot.value); });
  } else if (leaves_only) {
    td.for_each_key([&](const std::string& key, EntryKind kind) { visit(key, kind, nullptr); });
  } else {
    // Any kind but TensorDict stands for a key that is not nested: every one is listed.
    td.for_each_key_nesting([&](const std::string& key, bool nested) {
      visit(key, nested ? EntryKind::TensorDict : EntryKind::Tensor, nullptr);
    });
  }
}

// How many keys collect_keys lists below `td` in levels in memory: what `out` reserves (growing it
// key by key moves every key made so far). Keys in levels of other backends are not counted:
// counting them is a listing of its own (HDF5, a store).
size_t count_in_memory_keys(const TensorDictBase& td, bool include_nested, bool leaves_only) {
  if (typeid(td) != typeid(TensorDictImpl)) return 0;
  size_t n = 0;
  static_cast<const TensorDictImpl&>(td).for_each_slot([&](const TensorDictImpl::Slot& slot) {
    const EntryKind kind = slot.value.kind();
    if (listed(kind, leaves_only)) ++n;
    if (include_nested && kind == EntryKind::TensorDict)
      n += count_in_memory_keys(*slot.value.tensordict_unchecked().impl(), include_nested, leaves_only);
  });
  return n;
}

// Entries below `td` in pre-order.
template <typename Out>
void collect_entries(const TensorDictBase& td, std::vector<std::string>& path, bool include_nested, bool leaves_only,
                     Out& out) {
  td.for_each([&](const std::string& key, const Entry& entry) {
    if (!leaves_only || entry.is_tensor()) out(path, key, entry);
    if (include_nested && entry.is_tensordict()) {
      path.push_back(key);
      collect_entries(*entry.tensordict_unchecked().impl(), path, include_nested, leaves_only, out);
      path.pop_back();
    }
  });
}

}  // namespace

std::vector<NestedKey> TensorDict::keys(bool include_nested, bool leaves_only) const {
  std::vector<NestedKey> out;
  out.reserve(count_in_memory_keys(*impl_, include_nested, leaves_only));
  std::vector<std::string> path;
  collect_keys(*impl_, path, include_nested, leaves_only, out);
  return out;
}

std::vector<std::pair<NestedKey, Entry>> TensorDict::items(bool include_nested, bool leaves_only) const {
  std::vector<std::pair<NestedKey, Entry>> out;
  out.reserve(impl_->num_entries());
  std::vector<std::string> path;
  auto add = [&](const std::vector<std::string>& p, const std::string& key, const Entry& e) {
    out.emplace_back(joined(p, key), e);
  };
  collect_entries(*impl_, path, include_nested, leaves_only, add);
  return out;
}

std::vector<Entry> TensorDict::values(bool include_nested, bool leaves_only) const {
  std::vector<Entry> out;
  out.reserve(impl_->num_entries());
  std::vector<std::string> path;
  auto add = [&](const std::vector<std::string>&, const std::string&, const Entry& e) { out.push_back(e); };
  collect_entries(*impl_, path, include_nested, leaves_only, add);
  return out;
}

bool TensorDict::is_empty() const {
  bool empty = true;
  std::function<void(const TensorDictBase&)> visit = [&](const TensorDictBase& td) {
    td.for_each_key([&](const std::string& key, EntryKind kind) {
      if (!empty) return;
      if (kind == EntryKind::Tensor) empty = false;
      else if (kind == EntryKind::TensorDict) visit(*td.get(key).tensordict_unchecked().impl());
    });
  };
  visit(*impl_);
  return empty;
}

}  // namespace tensordict
