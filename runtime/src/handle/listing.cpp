// Listing keys, items and values (semantics 1.3), and is_empty.

#include <tensordict/tensor_dict.h>

#include <tensordict/entry.h>

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

// Keys below `td` in pre-order, read without touching tensor data (for_each_key).
void collect_keys(const TensorDictBase& td, std::vector<std::string>& path, bool include_nested, bool leaves_only,
                  std::vector<NestedKey>& out) {
  td.for_each_key([&](const std::string& key, EntryKind kind) {
    if (!leaves_only || kind == EntryKind::Tensor) out.push_back(joined(path, key));
    if (include_nested && kind == EntryKind::TensorDict) {
      const Entry child = td.get(key);
      path.push_back(key);
      collect_keys(*child.tensordict_unchecked().impl(), path, include_nested, leaves_only, out);
      path.pop_back();
    }
  });
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
  out.reserve(impl_->num_entries());
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
