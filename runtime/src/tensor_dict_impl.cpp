#include <tensordict/tensor_dict_impl.h>

#include <algorithm>
#include <cstdint>

#include <tensordict/errors.h>

#include <memory>

namespace tensordict {

static_assert(sizeof(TensorDictImpl) % alignof(TensorDictImpl::Slot) == 0,
              "inline slots start right after the object and must be aligned");

c10::intrusive_ptr<TensorDictImpl> TensorDictImpl::make(c10::IntArrayRef batch_size,
                                                        std::optional<at::Device> device,
                                                        size_t capacity) {
  if (capacity == 0) return c10::make_intrusive<TensorDictImpl>(batch_size, device);
  void* block = ::operator new(sizeof(TensorDictImpl) + capacity * sizeof(Slot));
  TensorDictImpl* impl;
  try {
    impl = ::new (block) TensorDictImpl(batch_size, device, InlineSlots{capacity});
  } catch (...) {
    ::operator delete(block);
    throw;
  }
  // The unique_ptr form sets the counts of a new object as make_intrusive does; its delete
  // goes through the class operator delete, which frees the whole block.
  return c10::intrusive_ptr<TensorDictImpl>(std::unique_ptr<TensorDictImpl>(impl));
}

TensorDictImpl::~TensorDictImpl() {
  clear_slots();
  if (slots_on_heap_) ::operator delete(slots_);
}

void TensorDictImpl::clear_slots() noexcept {
  for (uint32_t i = size_; i > 0; --i) slots_[i - 1].~Slot();
  size_ = 0;
}

void TensorDictImpl::grow(size_t min_capacity) {
  size_t capacity = std::max<size_t>({min_capacity, size_t{capacity_} * 2, 4});
  TD_CHECK(capacity <= UINT32_MAX, ValueError, "a TensorDict level holds at most ", UINT32_MAX,
           " entries");
  auto* fresh = static_cast<Slot*>(::operator new(capacity * sizeof(Slot)));
  // Slot moves cannot throw (string and Entry moves are noexcept).
  for (uint32_t i = 0; i < size_; ++i) {
    new (fresh + i) Slot(std::move(slots_[i]));
    slots_[i].~Slot();
  }
  if (slots_on_heap_) ::operator delete(slots_);
  slots_ = fresh;
  capacity_ = static_cast<uint32_t>(capacity);
  slots_on_heap_ = true;
}

int64_t TensorDictImpl::find_slot(std::string_view key, uint32_t hash) const {
  if (index_.empty()) {
    const Slot* slots = slots_;
    for (size_t i = 0, n = size_; i < n; ++i) {
      if (slots[i].hash == hash && slots[i].key == key) return static_cast<int64_t>(i);
    }
    return -1;
  }
  const size_t mask = index_.size() - 1;
  for (size_t b = bucket_of(hash);; b = (b + 1) & mask) {
    const uint32_t v = index_[b];
    if (v == 0) return -1;
    const Slot& s = slots_[v - 1];
    if (s.hash == hash && s.key == key) return v - 1;
  }
}

void TensorDictImpl::rebuild_index() {
  if (size_ <= kLinearScanLimit) {
    index_.clear();
    return;
  }
  size_t cap = 64;
  int bits = 6;
  while (cap < size_t{size_} * 2) {
    cap <<= 1;
    ++bits;
  }
  index_.assign(cap, 0);
  index_shift_ = static_cast<uint8_t>(32 - bits);
  const size_t mask = cap - 1;
  for (size_t i = 0; i < size_; ++i) {
    size_t b = bucket_of(slots_[i].hash);
    while (index_[b] != 0) b = (b + 1) & mask;
    index_[b] = static_cast<uint32_t>(i + 1);
  }
}

void TensorDictImpl::index_append() {
  // Keep the table at most half full; a full rebuild only re-reads the stored hashes.
  if (index_.empty() || size_t{size_} * 2 > index_.size()) {
    rebuild_index();
    return;
  }
  const size_t mask = index_.size() - 1;
  size_t b = bucket_of(slots_[size_ - 1].hash);
  while (index_[b] != 0) b = (b + 1) & mask;
  index_[b] = size_;
}

std::vector<std::string> TensorDictImpl::keys() const {
  std::vector<std::string> out;
  out.reserve(size_);
  for (const Slot& s : slots()) out.push_back(s.key);
  return out;
}

Entry TensorDictImpl::get(std::string_view key) const {
  int64_t i = find_slot(key);
  return i < 0 ? Entry() : slots_[i].value;
}

void TensorDictImpl::for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const {
  for (const Slot& s : slots()) fn(s.key, s.value);
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
  std::move(slots_ + i + 1, slots_ + size_, slots_ + i);
  slots_[--size_].~Slot();
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
