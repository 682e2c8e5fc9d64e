#include <tensordict/tensor_dict_impl.h>

#include <cstring>
#include <functional>

namespace tensordict {

namespace {
inline size_t hash_key(std::string_view key) { return std::hash<std::string_view>{}(key); }
}  // namespace

int64_t TensorDictImpl::find_slot(std::string_view key) const {
  if (index_.empty()) {
    // Short keys of one level often share a prefix ("x0", "x1"): test the length and the last
    // character before comparing the rest.
    const size_t n = key.size();
    for (size_t i = 0; i < slots_.size(); ++i) {
      const std::string& k = slots_[i].key;
      if (k.size() != n) continue;
      if (n == 0) return static_cast<int64_t>(i);
      if (k[n - 1] != key[n - 1]) continue;
      if (std::memcmp(k.data(), key.data(), n - 1) == 0) return static_cast<int64_t>(i);
    }
    return -1;
  }
  const size_t mask = index_.size() - 1;
  for (size_t b = hash_key(key) & mask;; b = (b + 1) & mask) {
    uint32_t v = index_[b];
    if (v == 0) return -1;
    if (slots_[v - 1].key == key) return v - 1;
  }
}

void TensorDictImpl::rebuild_index() {
  if (slots_.size() <= kLinearScanLimit) {
    index_.clear();
    return;
  }
  size_t cap = 16;
  while (cap < slots_.size() * 2) cap <<= 1;
  index_.assign(cap, 0);
  const size_t mask = cap - 1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    size_t b = hash_key(slots_[i].key) & mask;
    while (index_[b] != 0) b = (b + 1) & mask;
    index_[b] = static_cast<uint32_t>(i + 1);
  }
}

std::vector<std::string> TensorDictImpl::keys() const {
  std::vector<std::string> out;
  out.reserve(slots_.size());
  for (const auto& s : slots_) out.push_back(s.key);
  return out;
}

Entry TensorDictImpl::get(std::string_view key) const {
  int64_t i = find_slot(key);
  return i < 0 ? Entry() : slots_[i].value;
}

void TensorDictImpl::for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const {
  for (const auto& s : slots_) fn(s.key, s.value);
}

void TensorDictImpl::append_unchecked(std::string key, Entry value) {
  slots_.push_back(Slot{std::move(key), std::move(value)});
  bump_layout_version();
  if (!index_.empty() && slots_.size() * 2 <= index_.size()) {
    const size_t mask = index_.size() - 1;
    size_t b = hash_key(slots_.back().key) & mask;
    while (index_[b] != 0) b = (b + 1) & mask;
    index_[b] = static_cast<uint32_t>(slots_.size());
  } else if (slots_.size() > kLinearScanLimit) {
    rebuild_index();
  }
}

void TensorDictImpl::insert_or_assign(std::string_view key, Entry value) {
  int64_t i = find_slot(key);
  if (i >= 0) {
    slots_[i].value = std::move(value);
    return;
  }
  append_unchecked(std::string(key), std::move(value));
}

void TensorDictImpl::erase(std::string_view key) {
  int64_t i = find_slot(key);
  if (i < 0) return;
  slots_.erase(slots_.begin() + i);
  bump_layout_version();
  rebuild_index();
}

void TensorDictImpl::rename(std::string_view from, std::string_view to) {
  int64_t i = find_slot(from);
  if (i < 0) return;
  slots_[i].key = std::string(to);
  bump_layout_version();
  rebuild_index();
}

}  // namespace tensordict
