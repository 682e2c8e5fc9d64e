#include "backends/in_memory/tensor_dict_impl.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>

#include <tensordict/errors.h>

#include "core/strided_view.h"

namespace tensordict {

static_assert(sizeof(TensorDictImpl) % alignof(TensorDictImpl::Slot) == 0,
              "inline slots start right after the object and must be aligned");

c10::intrusive_ptr<TensorDictImpl> TensorDictImpl::make(c10::IntArrayRef batch_size, std::optional<at::Device> device,
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

void TensorDictImpl::release_resources() {
  lazy_.store(nullptr, std::memory_order_release);
  written();
  clear_slots();
  index_.clear();
  pending_.store(0, std::memory_order_release);  // nothing to build any more
  TensorDictBase::release_resources();
}

void TensorDictImpl::clear_slots() noexcept {
  for (uint32_t i = size_; i > 0; --i) slots_[i - 1].~Slot();
  size_ = 0;
  live_ = 0;
}

void TensorDictImpl::clear() {
  ready();
  lazy_.store(nullptr, std::memory_order_release);  // no slot left to make
  written();
  bump_layout_version();
  clear_slots();
  index_.clear();
  pending_.store(0, std::memory_order_relaxed);  // built by ready() above
}

void TensorDictImpl::keep_in_order(const std::vector<std::string>& kept) {
  ready();
  if (live_ == kept.size()) {
    // Already as asked (no tombstones when every slot is live): leave the level, its index and
    // an intact result's records alone.
    bool same = size_ == live_;
    for (size_t i = 0; same && i < kept.size(); ++i) same = slots_[i].key == kept[i];
    if (same) return;
  }
  make_leaves();  // the kept entries are moved out below: lazy leaves must exist first
  struct Kept {
    uint32_t slot;
    uint32_t hash;
    Entry value;
  };
  std::vector<Kept> values;
  values.reserve(kept.size());
  // Every key found before any entry moves: a missing one (select_ keeps present keys only)
  // leaves the level as it was.
  for (const std::string& key : kept) {
    const uint32_t hash = in_memory::key_hash(key);
    const int64_t i = find_slot(key, hash);
    TD_CHECK(i >= 0, KeyError, "keep_in_order: no key ", key);
    values.push_back(Kept{static_cast<uint32_t>(i), hash, Entry()});
  }
  for (Kept& k : values) k.value = std::move(slots_[k.slot].value);
  clear();
  reserve(kept.size());
  for (size_t i = 0; i < kept.size(); ++i) append_unindexed(kept[i], values[i].hash, std::move(values[i].value));
  index_appended();
}

void TensorDictImpl::grow(size_t min_capacity) {
  size_t capacity = std::max<size_t>({min_capacity, size_t{capacity_} * 2, 4});
  TD_CHECK(capacity <= UINT32_MAX, ValueError, "a TensorDict level holds at most ", UINT32_MAX, " entries");
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
  if (C10_UNLIKELY(pending_.load(std::memory_order_acquire) != 0)) {  // one load for both
    ready();
    build_pending_index();
  }
  return find_ready_slot(key, hash);
}

void TensorDictImpl::unindex(size_t hole) {
  // Backward-shift deletion: every entry after the hole in the same probe run moves back into
  // it unless its home bucket lies (cyclically) after the hole, so no tombstones are needed.
  const size_t mask = index_.size() - 1;
  for (size_t j = (hole + 1) & mask; index_[j] != 0; j = (j + 1) & mask) {
    const size_t home = bucket_of(entry_hash(index_[j]));
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      index_[hole] = index_[j];
      hole = j;
    }
  }
  index_[hole] = 0;
}

void TensorDictImpl::index_insert(uint32_t slot) const {
  const size_t mask = index_.size() - 1;
  const uint32_t hash = slots_[slot].hash;
  size_t b = bucket_of(hash);
  while (index_[b] != 0) b = (b + 1) & mask;
  index_[b] = index_entry(hash, slot);
}

void TensorDictImpl::build_index_now() const {
  // Concurrent first lookups: one builds, the others wait and find it built.
  std::lock_guard<std::recursive_mutex> guard(lazy_mutex());
  if (pending_.load(std::memory_order_relaxed) & kIndexPending) rebuild_index();
}

void TensorDictImpl::rebuild_index() const {
  if (size_ <= kLinearScanLimit && size_ == live_) {
    index_.clear();
    clear_pending(kIndexPending);
    return;
  }
  size_t cap = 64;
  int bits = 6;
  while (cap < size_t{live_} * 2) {
    cap <<= 1;
    ++bits;
  }
  index_.assign(cap, 0);
  index_shift_ = static_cast<uint8_t>(32 - bits);
  for (uint32_t i = 0; i < size_; ++i) {
    if (slots_[i].live) index_insert(i);
  }
  clear_pending(kIndexPending);
}

void TensorDictImpl::index_append() {
  // Keep the table at most half full; a full rebuild only re-reads the stored hashes.
  if (index_.empty() || size_t{live_} * 2 > index_.size()) {
    rebuild_index();
    return;
  }
  index_insert(size_ - 1);
}

void TensorDictImpl::compact() {
  uint32_t out = 0;
  for (uint32_t i = 0; i < size_; ++i) {
    if (!slots_[i].live) continue;
    if (out != i) slots_[out] = std::move(slots_[i]);
    ++out;
  }
  for (uint32_t i = size_; i > out; --i) slots_[i - 1].~Slot();
  size_ = out;
  rebuild_index();
}

std::vector<std::string> TensorDictImpl::keys() const {
  ready();
  std::vector<std::string> out;
  out.reserve(live_);
  for (uint32_t i = 0; i < size_; ++i) {
    if (slots_[i].live) out.push_back(slots_[i].key);
  }
  return out;
}

std::recursive_mutex& TensorDictImpl::lazy_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

void TensorDictImpl::make_lazy_leaves() const {
  // Levels are made rarely, once each: one lock for all of them.
  std::lock_guard<std::recursive_mutex> guard(lazy_mutex());
  LazyLeaves* lazy = lazy_.load(std::memory_order_acquire);
  if (lazy == nullptr) return;  // another reader made them
  for (size_t i = 0; i < lazy->records.size();) {
    const LazyLeaves::Record r = lazy->next(i);
    // Only the tensor handle changes: the entry's kind stays Tensor for readers of kinds and
    // keys, who do not wait for this.
    at::Tensor& leaf = slots_[r.slot].value.mutable_tensor();
    const at::Tensor& flat = lazy->flat_of(r);
    const int64_t offset = flat.storage_offset() + r.offset;  // records count from their flat's start
    leaf = lazy->autograd_views ? flat.as_strided(r.sizes, r.strides, offset)
                                : detail::strided_view(flat, r.sizes, r.strides, offset);
    if (lazy->shared_version && !leaf.is_inference())  // an inference tensor has no counter
      leaf.unsafeGetTensorImpl()->set_version_counter(flat.unsafeGetTensorImpl()->version_counter());
    lazy->made_keys = leaf.key_set();  // the same for every leaf of the level
  }
  lazy_.store(nullptr, std::memory_order_release);  // the records stay, in layout_
}

Entry TensorDictImpl::get(std::string_view key) const {
  const int64_t i = find_slot(key);
  return i < 0 ? Entry() : *entry_read(slots_[i]);
}

EntryKind TensorDictImpl::kind(std::string_view key) const {
  const int64_t i = find_slot(key);
  return i < 0 ? EntryKind::Undefined : slots_[i].value.kind();
}

void TensorDictImpl::for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const {
  ready();
  make_leaves();
  for (uint32_t i = 0; i < size_; ++i) {
    const Slot& s = slots_[i];
    if (s.live) fn(s.key, s.value);
  }
}

void TensorDictImpl::for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const {
  ready();
  for (uint32_t i = 0; i < size_; ++i) {
    const Slot& s = slots_[i];
    if (s.live) fn(s.key, s.value.kind());
  }
}

void TensorDictImpl::insert_or_assign(std::string_view key, Entry value) {
  const uint32_t hash = in_memory::key_hash(key);
  const int64_t i = find_slot(key, hash);  // builds a deferred level first
  make_leaves();  // a lazy leaf replaced before it is made would be made over the new value
  if (C10_UNLIKELY(packed_result_)) written();
  if (i >= 0) {
    slots_[i].value = std::move(value);
    return;
  }
  append_unchecked(key, hash, std::move(value));
}

size_t TensorDictImpl::find_bucket(std::string_view key, uint32_t hash) const {
  const size_t mask = index_.size() - 1;
  for (size_t b = bucket_of(hash);; b = (b + 1) & mask) {
    const uint64_t entry = index_[b];
    if (entry == 0) return SIZE_MAX;
    if (entry_hash(entry) == hash && in_memory::key_equals(slots_[entry_slot(entry)].key, key)) return b;
  }
}

bool TensorDictImpl::erase_if_present(std::string_view key) {
  ready();
  if (C10_UNLIKELY(packed_result_ || has_lazy_leaves())) {
    if (find_slot(key) < 0) return false;  // nothing to erase: leaves and records stay
    make_leaves();  // the slots after the key move
    written();
  }
  build_pending_index();  // a large level is erased from through its index (O(1))
  if (index_.empty()) return erase_scanned(key);  // at most 16 slots: shift the ones after it
  const size_t bucket = find_bucket(key, in_memory::key_hash(key));
  if (bucket == SIZE_MAX) return false;
  const uint32_t i = entry_slot(index_[bucket]);
  bump_layout_version();
  unindex(bucket);
  Slot& s = slots_[i];
  std::string().swap(s.key);
  s.value = Entry();
  s.live = false;
  --live_;
  // Compacting once tombstones outnumber live entries keeps erase O(1) amortized.
  if (size_ - live_ > live_) compact();
  return true;
}

void TensorDictImpl::rename(std::string_view from, std::string_view to) {
  ready();
  make_leaves();
  if (C10_UNLIKELY(packed_result_) && find_slot(from) >= 0) written();
  build_pending_index();
  const uint32_t from_hash = in_memory::key_hash(from);
  uint32_t i = 0;
  if (index_.empty()) {
    const int64_t found = find_slot(from, from_hash);
    if (found < 0) return;
    i = static_cast<uint32_t>(found);
  } else {
    // One probe finds both the slot and the bucket to free.
    const size_t bucket = find_bucket(from, from_hash);
    if (bucket == SIZE_MAX) return;
    i = entry_slot(index_[bucket]);
    unindex(bucket);
  }
  bump_layout_version();
  slots_[i].key.assign(to.data(), to.size());
  slots_[i].hash = in_memory::key_hash(to);
  if (!index_.empty()) index_insert(i);
}

}  // namespace tensordict
