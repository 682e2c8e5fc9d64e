#pragma once
// TensorDictImpl: the in-memory backend. Entries live in an array of slots in insertion order;
// every slot keeps a 32-bit hash of its key. A lookup hashes the key once, then either scans
// the slots' hashes (a level of up to 16 keys: cheaper than probing, and no index to build) or
// probes an open-addressing index built from the stored hashes, so keys are never hashed twice.
// A level made with `make(..., capacity)` carries its first slots in the same allocation. A level
// built whole (LevelBuilder) gets its index on the first lookup by key or write, under a lock
// (index_appended): results that are only walked never build one.
//
// Note [Erasing in O(1)]: above 16 keys an erased slot becomes a tombstone (skipped by every
// walk) and leaves the index by backward-shift deletion; the slots are compacted, in order,
// once tombstones outnumber live entries. Erase, pop and rename therefore cost O(1) amortized
// whatever the level's size, and insertion order is kept. Up to 16 keys there is no index and
// an erase shifts the few slots after it.
//
// A level may hold its leaves not made yet (Note [Lazy leaves], lazy_leaves.h): every read of a
// tensor entry, every walk of the entries and every write makes them first. A packed op's result
// may be *deferred* (Note [Shared shapes], level_shape.h): its slots are built from its shape on
// the first access of any kind.
//
// Only this folder names this class: the rest of the runtime builds in-memory levels through
// in_memory.h and level_builder.h and reads them through TensorDictBase.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include <c10/util/ArrayRef.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_base.h>

#include "backends/in_memory/key_hash.h"
#include "backends/in_memory/lazy_leaves.h"
#include "backends/in_memory/level_shape.h"

namespace tensordict {

class TensorDictImpl final : public TensorDictBase {
 public:
  struct Slot {
    // Builds the entry in place from whatever Entry accepts (no temporary Entry to move).
    template <typename K, typename V>
    Slot(K&& k, V&& v, uint32_t h) : key(std::forward<K>(k)), value(std::forward<V>(v)), hash(h) {}
    std::string key;
    Entry value;
    uint32_t hash;     // key_hash(key)
    bool live = true;  // false: a tombstone (Note [Erasing in O(1)])
  };

  static constexpr StoragePolicy kPolicy{/*leaves_alias_storage=*/true, /*entries_in_memory=*/true};

  /// A level with no slots allocated yet; they grow on the heap.
  TensorDictImpl(c10::IntArrayRef batch_size, std::optional<at::Device> device)
      : TensorDictBase(batch_size, device, kPolicy) {}
  /// A level with room for `capacity` entries in its own allocation: building a level of known
  /// size then costs one allocation, not two.
  static c10::intrusive_ptr<TensorDictImpl> make(c10::IntArrayRef batch_size, std::optional<at::Device> device,
                                                 size_t capacity);
  ~TensorDictImpl() override;
  TensorDictImpl(const TensorDictImpl&) = delete;
  TensorDictImpl& operator=(const TensorDictImpl&) = delete;

  // make() allocates the object and its inline slots as one block from the global operator
  // new; deleting through these class forms frees that block, whatever its size.
  static void* operator new(size_t size) { return ::operator new(size); }
  static void operator delete(void* p) { ::operator delete(p); }

  const char* type_name() const override { return "TensorDict"; }

  size_t num_entries() const override { return live_; }
  std::vector<std::string> keys() const override;
  bool has(std::string_view key) const override { return find_slot(key) >= 0; }
  Entry get(std::string_view key) const override;
  const Entry* peek(std::string_view key) const override {
    const int64_t i = find_slot(key);
    return i < 0 ? nullptr : entry_read(slots_[i]);
  }
  const Entry* peek_at(std::string_view key, size_t position) const override {
    ready();
    // Slot `position` holds the key when both levels list the same keys in the same order and
    // this one has no tombstones before it: one string compare instead of a hash and a scan.
    if (position < size_ && slots_[position].live && in_memory::key_equals(slots_[position].key, key))
      return entry_read(slots_[position]);
    return peek(key);
  }
  void insert_or_assign_at(std::string_view key, size_t position, Entry value) override {
    // As peek_at: the slot at `position` when it holds the key, else the usual lookup.
    if (Slot* slot = slot_to_write_at(key, position)) {
      if (C10_UNLIKELY(packed_result_)) written();
      slot->value = std::move(value);
      return;
    }
    insert_or_assign(key, std::move(value));
  }
  /// in_memory::assign_leaf_at on this level.
  bool assign_leaf_at(std::string_view key, size_t position, const at::Tensor& value) {
    Slot* slot = slot_to_write_at(key, position);
    if (slot == nullptr || !slot->value.is_tensor()) return false;
    if (C10_UNLIKELY(packed_result_)) written();
    // Checked above: the unchecked accessor, without the kind check of mutable_tensor()'s call.
    const_cast<at::Tensor&>(slot->value.tensor_unchecked()) = value;
    return true;
  }
  EntryKind kind(std::string_view key) const override;
  void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const override;
  void for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const override;
  void insert_or_assign(std::string_view key, Entry value) override;
  void erase(std::string_view key) override { erase_if_present(key); }
  bool erase_if_present(std::string_view key) override;
  void rename(std::string_view from, std::string_view to) override;
  void clear() override;
  /// select_'s result on this level: only `kept` (distinct keys of this level), in that order,
  /// the level rebuilt at once instead of erased key by key. Nothing changes when the level
  /// already lists exactly `kept`.
  void keep_in_order(const std::vector<std::string>& kept);

  /// Position of `key` among the slots, or -1.
  int64_t find_slot(std::string_view key) const { return find_slot(key, in_memory::key_hash(key)); }
  /// The same, with `hash == key_hash(key)` already computed.
  int64_t find_slot(std::string_view key, uint32_t hash) const;
  /// find_slot on a level with nothing pending (open_for_direct_writes()), inlined into the
  /// direct writes' walk.
  C10_ALWAYS_INLINE int64_t find_ready_slot(std::string_view key, uint32_t hash) const {
    if (C10_LIKELY(index_.empty())) {
      // No tombstones without an index.
      const Slot* slots = slots_;
      const size_t n = size_;
      for (size_t i = next_hash_match(slots, 0, n, hash); i < n; i = next_hash_match(slots, i + 1, n, hash)) {
        if (in_memory::key_equals_inline(slots[i].key, key)) return static_cast<int64_t>(i);
      }
      return -1;
    }
    const size_t bucket = find_bucket(key, hash);
    return bucket == SIZE_MAX ? -1 : static_cast<int64_t>(entry_slot(index_[bucket]));
  }
  /// Note [Direct writes] (direct_write.cpp): whether a write may go straight to the slots: the
  /// level built, its leaves made, no packed op's records to drop, no index left to build, and
  /// unlocked. One load of each.
  bool open_for_direct_writes() const {
    return pending_.load(std::memory_order_acquire) == 0 && lazy_.load(std::memory_order_acquire) == nullptr &&
           !packed_result_ && !TensorDictBase::is_locked();
  }
  /// The entry of slot `i` (0 <= i < size) of a level open for direct writes.
  Entry& ready_entry(int64_t i) { return slots_[i].value; }
  /// Note [Write hints]: the slot the last direct write through this level found or added its
  /// key at, when it still holds `key` (checked: erases shift slots, renames change keys), else
  /// -1. Writes repeat their paths (a nested prefix walked again, a temporary key set then
  /// erased, a leaf overwritten each step): one key compare then replaces a hash and a scan.
  C10_ALWAYS_INLINE int64_t hinted_slot(std::string_view key) const {
    const uint32_t h = write_hint_.load(std::memory_order_relaxed);
    return h < size_ && in_memory::key_equals_inline(slots_[h].key, key) && slots_[h].live ? int64_t{h} : -1;
  }
  /// find_ready_slot for a direct write: the hint first, then the lookup, which becomes the hint.
  /// When the key is not there, `*hash` is its key_hash (what append_for_write takes).
  C10_ALWAYS_INLINE int64_t find_slot_for_write(std::string_view key, uint32_t* hash) {
    int64_t i = hinted_slot(key);
    if (i < 0) {
      *hash = in_memory::key_hash(key);
      i = find_ready_slot(key, *hash);
      if (i >= 0) hint_write(i);
    }
    return i;
  }
  /// append_unchecked for a direct write: the new slot becomes the hint.
  template <typename V>
  void append_for_write(std::string_view key, uint32_t hash, V&& value) {
    hint_write(size_);
    append_unchecked(key, hash, std::forward<V>(value));
  }
  /// erase_if_present on a level open for direct writes.
  C10_ALWAYS_INLINE bool erase_ready(std::string_view key) {
    if (!index_.empty()) return erase_if_present(key);
    const int64_t i = hinted_slot(key);
    if (i < 0) return erase_scanned(key);
    remove_scanned_slot(static_cast<uint32_t>(i));
    return true;
  }
  /// Appends without checking for an existing key (the caller knows it is new).
  /// `key` is a std::string (moved in) or a std::string_view; `value` anything Entry accepts.
  template <typename K, typename V>
  void append_unchecked(K&& key, V&& value) {
    const uint32_t hash = in_memory::key_hash(key);
    append_unchecked(std::forward<K>(key), hash, std::forward<V>(value));
  }
  template <typename K, typename V>
  void append_unchecked(K&& key, uint32_t hash, V&& value) {
    emplace_slot(std::forward<K>(key), hash, std::forward<V>(value));
    after_append();
  }
  /// append_unchecked for a level being built, whose index (above 16 keys) is built once by
  /// index_appended() rather than grown key by key. Lookups in between scan the slots (correct:
  /// a level being built has no tombstones), and an indexed append rebuilds the index first.
  template <typename K, typename V>
  void append_unindexed(K&& key, V&& value) {
    const uint32_t hash = in_memory::key_hash(key);
    append_unindexed(std::forward<K>(key), hash, std::forward<V>(value));
  }
  /// The same, with `hash == key_hash(key)` already computed (a key copied from another level).
  template <typename K, typename V>
  void append_unindexed(K&& key, uint32_t hash, V&& value) {
    emplace_slot(std::forward<K>(key), hash, std::forward<V>(value));
    bump_layout_version();
    if (!index_.empty()) index_append();  // an indexed append came first: keep the index whole
  }
  /// The index of what append_unindexed added (none needed up to 16 keys), built on the first
  /// lookup by key: a level only walked (flattened keys printed, a result the next op consumes
  /// whole) never pays for it. Until then the level has no tombstones, so a walk needs none.
  void index_appended() {
    if (size_ > kLinearScanLimit && index_.empty()) set_pending(kIndexPending);
  }
  /// Room for `n` entries (a level not made with make() starts with none).
  void reserve(size_t n) {
    ready();
    if (n > capacity_) grow(n);
  }

  /// Hands the level leaves to make on first access (Note [Lazy leaves]): the slots `lazy`
  /// records hold undefined tensors until then. Called once, on a level being built.
  void set_lazy_leaves(std::unique_ptr<LazyLeaves> lazy) {
    layout_ = std::move(lazy);
    lazy_.store(layout_.get(), std::memory_order_release);
  }
  /// Marks a level built as part of a packed op's result (Note [Lazy leaves]), with or
  /// without leaves of its own: only such levels are looked at for intact results (Note [Intact results]).
  void mark_packed_result() { packed_result_ = true; }
  bool is_packed_result() const { return packed_result_; }
  /// True while the leaves of a built level are not made yet (a deferred level, is_deferred(),
  /// has neither leaves nor records until built).
  bool has_lazy_leaves() const { return lazy_.load(std::memory_order_acquire) != nullptr; }
  /// Held while leaves are made, and while an index is built on a first lookup.
  static std::recursive_mutex& lazy_mutex();
  /// The leaves not made yet (nullptr: none, and then the slots' tensors, published by this
  /// acquire, may be read by any thread).
  const LazyLeaves* unmade_leaves() const { return lazy_.load(std::memory_order_acquire); }
  /// Where the leaves of a packed result lie in its storage, made or not, while nothing was
  /// written to the level since it was built (Note [Intact results]); nullptr otherwise. Builds a
  /// deferred level first.
  const LazyLeaves* packed_layout() const {
    ready();
    return layout_.get();
  }
  /// The live slot at `i` of a level nothing was erased from (a packed result: no tombstones).
  const Slot& slot_at(size_t i) const {
    ready();
    return slots_[i];
  }
  /// The slots of a level known not to be deferred (is_deferred() false): slot_at without its check.
  const Slot* built_slots() const { return slots_; }
  /// The slots as a reader sees them, `*count` of them (tombstones included): the level built and
  /// its leaves made, once for a walker that then reads many entries in place.
  const Slot* slots_for_reads(uint32_t* count) const {
    ready();
    make_leaves();
    *count = size_;
    return slots_;
  }
  /// fn(slot) for every live slot, its lazy leaves left unmade (undefined tensors): for code that
  /// reads the structure of a result (keys, kinds, nested levels; a concurrent maker of the leaves
  /// writes only the tensor handles, read only once unmade_leaves() is null).
  template <typename Fn>
  void for_each_slot(Fn&& fn) const {
    ready();
    for (uint32_t i = 0; i < size_; ++i) {
      if (slots_[i].live) fn(slots_[i]);
    }
  }
  /// for_each's walk, inlined for the structure walk (no call per entry; each slot's key hash
  /// is there for the result's copy of the key): the leaves made first.
  template <typename Fn>
  void for_each_made_slot(Fn&& fn) const {
    uint32_t count = 0;
    const Slot* slots = slots_for_reads(&count);
    for (uint32_t i = 0; i < count; ++i) {
      if (slots[i].live) fn(slots[i]);
    }
  }

  /// A packed op's result shaped as `shape` over `flat` (its storage) and `more_flats` (a result
  /// over runs: one storage a run, Note [Intact runs]), its slots built on first access (Note
  /// [Shared shapes]); nested levels come deferred too, locked when this level is then. The
  /// root's batch size, device and names are given (the operand's). `leaves_share_version`: its
  /// leaves, and its nested levels', get `flat`'s version counter (LazyLeaves::shared_version).
  static c10::intrusive_ptr<TensorDictImpl> make_deferred(c10::intrusive_ptr<LevelShape> shape, at::Tensor flat,
                                                          std::vector<at::Tensor> more_flats,
                                                          c10::IntArrayRef batch_size,
                                                          std::optional<at::Device> device, const DimNames& names,
                                                          bool locked, bool leaves_share_version = false);
  /// make_deferred's `leaves_share_version`: whether the leaves this level makes (when deferred)
  /// share its flat's version counter.
  bool deferred_leaves_share_version() const { return leaves_share_version_; }
  /// True while the slots are not built yet (nothing read the level since the op made it).
  bool is_deferred() const { return (pending_.load(std::memory_order_acquire) & kDeferred) != 0; }
  /// The storage a level made deferred views (kept once built).
  const at::Tensor& deferred_flat() const { return flat_; }
  /// The further storages a deferred result over runs views (empty over one storage).
  const std::vector<at::Tensor>& deferred_more_flats() const { return more_flats_; }
  /// The level's shape while nothing was written to it (its own, or one cached), else nullptr.
  LevelShape* shape() const { return shape_.load(std::memory_order_acquire); }
  /// Keeps `shape` (made from this packed level) for the next ops: the first one, or in place of
  /// a kept one that no longer fits (a nested level renamed or rebatched through its handle). The
  /// one replaced stays alive until the next write, since readers hold it without a lock; after
  /// kMaxRetiredShapes replacements the kept one stays and each op makes its own.
  void cache_shape(const c10::intrusive_ptr<LevelShape>& shape) const;

  /// Drops the entries when the last handle goes: children hold weak references to their lock
  /// parents, and intrusive_ptr only deletes an object once those are gone too; without this, a
  /// locked tensordict would keep its leaves (and mapped files) alive.
  void release_resources() override;

 private:
  /// The index bucket of a hash: its top bits after a multiply, which depend on all 32 bits.
  size_t bucket_of(uint32_t hash) const { return (hash * 0x9E3779B9u) >> index_shift_; }
  /// The index bucket of `key` (index built), or SIZE_MAX.
  size_t find_bucket(std::string_view key, uint32_t hash) const;
  /// Removes the bucket from the index, shifting the probe chain after it back.
  void unindex(size_t bucket);
  void index_insert(uint32_t slot) const;
  /// Builds the index index_appended() left for the first lookup; one atomic load when none is.
  void build_pending_index() const {
    if (C10_UNLIKELY(pending_.load(std::memory_order_acquire) & kIndexPending)) build_index_now();
  }
  void build_index_now() const;

  // An index entry packs the key's hash (high half) with its slot position + 1 (low half), so
  // probing and backward shifts compare hashes without touching the slots: on a large level
  // every slot read is a cache miss.
  static uint64_t index_entry(uint32_t hash, uint32_t slot) {
    return (uint64_t{hash} << 32) | (uint64_t{slot} + 1);
  }
  static uint32_t entry_hash(uint64_t entry) { return static_cast<uint32_t>(entry >> 32); }
  static uint32_t entry_slot(uint64_t entry) { return static_cast<uint32_t>(entry) - 1; }

  struct InlineSlots {
    size_t capacity;
  };
  TensorDictImpl(c10::IntArrayRef batch_size, std::optional<at::Device> device, InlineSlots slots)
      : TensorDictBase(batch_size, device, kPolicy),
        slots_(reinterpret_cast<Slot*>(this + 1)),
        capacity_(static_cast<uint32_t>(slots.capacity)) {}

  /// The first slot from `i` on whose hash is `hash`, or `n`: four slots a step (a compare and a
  /// branch each), since most lookups of a small level compare every slot's hash.
  static C10_ALWAYS_INLINE size_t next_hash_match(const Slot* slots, size_t i, size_t n, uint32_t hash) {
    for (; i + 4 <= n; i += 4) {
      if (slots[i].hash == hash) return i;
      if (slots[i + 1].hash == hash) return i + 1;
      if (slots[i + 2].hash == hash) return i + 2;
      if (slots[i + 3].hash == hash) return i + 3;
    }
    for (; i < n; ++i) {
      if (slots[i].hash == hash) return i;
    }
    return n;
  }
  void grow(size_t min_capacity);
  /// Removes `key` from a built level without an index (at most 16 slots, no tombstones): the
  /// slots after it shift. False when it is not there.
  bool erase_scanned(std::string_view key) {
    // From the last slot back: the key erased is most often one set lately (a temporary entry
    // set, used, then erased), and then the erase neither scans nor shifts the other slots.
    const uint32_t hash = in_memory::key_hash(key);
    uint32_t i = size_;
    do {
      if (i == 0) return false;
      --i;
    } while (slots_[i].hash != hash || !in_memory::key_equals_inline(slots_[i].key, key));
    remove_scanned_slot(i);
    return true;
  }
  /// Makes slot `i` the hint (a direct write found or added its key there).
  void hint_write(int64_t i) { write_hint_.store(static_cast<uint32_t>(i), std::memory_order_relaxed); }
  /// erase_scanned's removal of slot `i`.
  C10_ALWAYS_INLINE void remove_scanned_slot(uint32_t i) {
    bump_layout_version();
    if (i + 1 < size_) std::move(slots_ + i + 1, slots_ + size_, slots_ + i);
    slots_[--size_].~Slot();
    --live_;
  }
  /// Makes the leaves of a lazy level (Note [Lazy leaves]); one atomic load when there are none.
  void make_leaves() const {
    if (C10_UNLIKELY(lazy_.load(std::memory_order_acquire) != nullptr)) make_lazy_leaves();
  }
  /// The entry of `slot` for a reader: a nested level or non-tensor data is read without
  /// making the level's leaves (locking a result walks its nested levels this way).
  const Entry* entry_read(const Slot& slot) const {
    if (slot.value.is_tensor()) make_leaves();
    return &slot.value;
  }
  void make_lazy_leaves() const;
  /// For a write at `position` (as peek_at): the live slot there when it holds `key`, the level
  /// built and its leaves made first; else nullptr. The caller calls written() before writing.
  Slot* slot_to_write_at(std::string_view key, size_t position) {
    ready();
    make_leaves();
    if (position >= size_ || !slots_[position].live || !in_memory::key_equals(slots_[position].key, key)) return nullptr;
    return &slots_[position];
  }
  /// Builds a deferred level's slots (Note [Shared shapes]); one atomic load when built.
  void ready() const {
    if (C10_UNLIKELY(pending_.load(std::memory_order_acquire) & kDeferred)) materialize();
  }
  void materialize() const;
  /// Called by every write, after make_leaves(): the level is no longer as a packed op built it
  /// (Note [Intact results]), so its layout records and shape go.
  void written() {
    packed_result_ = false;
    layout_.reset();
    flat_ = at::Tensor();  // a deferred level's storage: layout_ held it too once built
    more_flats_.clear();
    shape_.store(nullptr, std::memory_order_relaxed);
    shape_owner_.reset();
    retired_shapes_.clear();
  }
  /// A new live slot at the end, the index and layout version left to the caller.
  template <typename K, typename V>
  void emplace_slot(K&& key, uint32_t hash, V&& value) {
    if (size_ == capacity_) grow(size_ + 1);
    new (slots_ + size_) Slot(std::forward<K>(key), std::forward<V>(value), hash);
    ++size_;
    ++live_;
  }
  void clear_slots() noexcept;
  /// Drops the tombstones, keeping the order, and rebuilds the index.
  void compact();
  void rebuild_index() const;
  void after_append() {
    bump_layout_version();
    if (size_ > kLinearScanLimit) index_append();
  }
  void index_append();

  static constexpr size_t kLinearScanLimit = 16;
  // slots_[0, size_) are live or tombstones (tombstones only while indexed); the array is
  // either inline (right after this object, from make()) or on the heap (slots_on_heap_).
  Slot* slots_ = nullptr;
  uint32_t size_ = 0;
  uint32_t live_ = 0;
  uint32_t capacity_ = 0;
  bool slots_on_heap_ = false;
  // Note [Write hints]. Written by direct writes only, never by readers; relaxed atomic (plain
  // loads and stores) so that writers of distinct existing keys of one level do not race on it:
  // whatever slot it names is checked before use.
  std::atomic<uint32_t> write_hint_{0};
  // Open-addressing table of index_entry()s (0 = empty); empty while small. Its size is
  // 2^(32 - index_shift_).
  // Built by const lookups too (index_appended), under lazy_mutex(): mutable.
  mutable std::vector<uint64_t> index_;
  mutable uint8_t index_shift_ = 26;
  // What a first access still has to do: build a deferred level's slots (Note [Shared shapes]),
  // then the index index_appended() left. One byte, so lookups test both with one load; changed
  // under lazy_mutex() once the level is shared, or by writes (never concurrent with readers).
  static constexpr uint8_t kDeferred = 1;
  static constexpr uint8_t kIndexPending = 2;
  mutable std::atomic<uint8_t> pending_{0};
  // A load and a store, not an atomic read-modify-write: every change is made under the lock or
  // by a write, so no two race.
  void set_pending(uint8_t bit) const {
    pending_.store(static_cast<uint8_t>(pending_.load(std::memory_order_relaxed) | bit), std::memory_order_release);
  }
  void clear_pending(uint8_t bit) const {
    pending_.store(static_cast<uint8_t>(pending_.load(std::memory_order_relaxed) & ~bit), std::memory_order_release);
  }
  bool packed_result_ = false;
  // The layout records of a packed result's leaves, until the first write (Note [Intact
  // results]); lazy_ points to them while the leaves are not made (null once they are, or when
  // there never were lazy ones).
  std::unique_ptr<LazyLeaves> layout_;
  mutable std::atomic<LazyLeaves*> lazy_{nullptr};
  // Note [Shared shapes]: the storage a deferred level's leaves view; whether it was made locked
  // (its nested levels are built so, as the eager build would have); the shape (owned by
  // shape_owner_, published through shape_: readers take no lock).
  at::Tensor flat_;
  std::vector<at::Tensor> more_flats_;
  bool built_locked_ = false;
  bool leaves_share_version_ = false;  // LazyLeaves::shared_version, for the leaves it makes
  mutable std::atomic<LevelShape*> shape_{nullptr};
  mutable c10::intrusive_ptr<LevelShape> shape_owner_;
  static constexpr size_t kMaxRetiredShapes = 8;
  mutable std::vector<c10::intrusive_ptr<LevelShape>> retired_shapes_;  // replaced by cache_shape
};

}  // namespace tensordict

namespace tensordict {
namespace in_memory {

/// fn(key, entry) for every entry of `level` in order: an in-memory level's slots are read in
/// place (no call per entry), any other level through for_each. `make_leaves`: an in-memory
/// level's leaves are made first (a reader of the values), else left unmade (a reader of keys,
/// kinds and nested levels only).
template <bool make_leaves, typename Fn>
void for_each_entry_in_place(const TensorDictBase& level, Fn&& fn) {
  if (typeid(level) != typeid(TensorDictImpl)) {
    level.for_each(fn);
    return;
  }
  const auto& impl = static_cast<const TensorDictImpl&>(level);
  const auto visit = [&](const TensorDictImpl::Slot& slot) { fn(slot.key, slot.value); };
  if constexpr (make_leaves) {
    impl.for_each_made_slot(visit);
  } else {
    impl.for_each_slot(visit);
  }
}

/// For a reader of keys, kinds and nested levels.
template <typename Fn>
void for_each_structure_entry(const TensorDictBase& level, Fn&& fn) {
  for_each_entry_in_place<false>(level, std::forward<Fn>(fn));
}

/// For a reader of the values.
template <typename Fn>
void for_each_value_entry(const TensorDictBase& level, Fn&& fn) {
  for_each_entry_in_place<true>(level, std::forward<Fn>(fn));
}

}  // namespace in_memory
}  // namespace tensordict
