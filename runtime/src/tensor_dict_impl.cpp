#include <tensordict/tensor_dict_impl.h>

namespace tensordict {

int64_t TensorDictImpl::find_slot(std::string_view key, uint32_t hash) const {
  if (index_.empty()) {
    const Slot* slots = slots_.data();
    for (size_t i = 0, n = slots_.size(); i < n; ++i) {
      if (slots[i].hash == hash && slots[i].key == key) return static_cast<int64_t>(i);
    }
    return -1;
  }
  const size_t mask = index_.size() - 1;
  for (size_t b = hash & mask;; b = (b + 1) & mask) {
    const uint32_t v = index_[b];
    if (v == 0) return -1;
    const Slot& s = slots_[v - 1];
    if (s.hash == hash && s.key == key) return v - 1;
  }
}

void TensorDictImpl::rebuild_index() {
  if (slots_.size() <= kLinearScanLimit) {
    index_.clear();
    return;
  }
  size_t cap = 64;
  while (cap < slots_.size() * 2) cap <<= 1;
  index_.assign(cap, 0);
  const size_t mask = cap - 1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    size_t b = slots_[i].hash & mask;
    while (index_[b] != 0) b = (b + 1) & mask;
    index_[b] = static_cast<uint32_t>(i + 1);
  }
}

void TensorDictImpl::index_append() {
  // Keep the table at most half full; a full rebuild only re-reads the stored hashes.
  if (index_.empty() || slots_.size() * 2 > index_.size()) {
    rebuild_index();
    return;
  }
  const size_t mask = index_.size() - 1;
  size_t b = slots_.back().hash & mask;
  while (index_[b] != 0) b = (b + 1) & mask;
  index_[b] = static_cast<uint32_t>(slots_.size());
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

void TensorDictImpl::insert_or_assign(std::string_view key, Entry value) {
  const uint32_t hash = key_hash(key);
  int64_t i = find_slot(key, hash);
  if (i >= 0) {
    slots_[i].value = std::move(value);
    return;
  }
  append_unchecked(key, hash, std::move(value));
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
  slots_[i].hash = key_hash(to);
  bump_layout_version();
  rebuild_index();
}

}  // namespace tensordict
