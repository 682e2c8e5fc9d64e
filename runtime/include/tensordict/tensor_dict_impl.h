#pragma once
// TensorDictImpl: the in-memory backend. Entries live in an array of slots (insertion order);
// every slot keeps a 32-bit hash of its key. A lookup hashes the key once, then either scans the slots'
// hashes (a level of up to 16 keys: cheaper than probing, and no index to build) or probes an
// open-addressing index built from the stored hashes, so keys are never hashed twice.
// A level made with `make(..., capacity)` carries its first slots in the same allocation.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <c10/util/ArrayRef.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_base.h>

namespace tensordict {

class TensorDictImpl : public TensorDictBase {
 public:
  struct Slot {
    // Builds the entry in place from whatever Entry accepts (no temporary Entry to move).
    template <typename K, typename V>
    Slot(K&& k, V&& v, uint32_t h) : key(std::forward<K>(k)), value(std::forward<V>(v)), hash(h) {}
    std::string key;
    Entry value;
    uint32_t hash;  // key_hash(key)
  };

  /// The hash stored in Slot::hash; not persisted. Its high bits depend on every byte of the
  /// key: the index takes its buckets from them (Fibonacci hashing), so the hash itself needs
  /// only one multiply, off the critical path of building a level.
  static uint32_t key_hash(std::string_view key) {
    const char* p = key.data();
    size_t n = key.size();
    uint64_t v;
    if (n > 8) {
      // 8 bytes per step, then the last 8 bytes (overlapping the previous step).
      v = n;
      for (; n > 8; p += 8, n -= 8) v = (v ^ load_bytes<uint64_t>(p)) * kHashMultiplier;
      v ^= load_bytes<uint64_t>(p + n - 8);
    } else if (n >= 4) {
      // Two overlapping 4-byte reads cover 4 to 8 bytes: exact for a given length.
      v = (uint64_t{load_bytes<uint32_t>(p)} << 32) | load_bytes<uint32_t>(p + n - 4);
    } else if (n > 0) {
      v = (uint64_t{static_cast<uint8_t>(p[0])} << 16) |
          (uint64_t{static_cast<uint8_t>(p[n / 2])} << 8) | static_cast<uint8_t>(p[n - 1]);
    } else {
      v = 0;
    }
    // The length goes in the top byte, away from the bytes of short keys.
    return static_cast<uint32_t>(((v ^ (uint64_t{key.size()} << 56)) * kHashMultiplier) >> 32);
  }

  /// A level with no slots allocated yet; they grow on the heap.
  TensorDictImpl(c10::IntArrayRef batch_size, std::optional<at::Device> device)
      : TensorDictBase(batch_size, device) {}
  /// A level with room for `capacity` entries in its own allocation: building a level of known
  /// size then costs one allocation, not two.
  static c10::intrusive_ptr<TensorDictImpl> make(c10::IntArrayRef batch_size,
                                                 std::optional<at::Device> device,
                                                 size_t capacity);
  ~TensorDictImpl() override;
  TensorDictImpl(const TensorDictImpl&) = delete;
  TensorDictImpl& operator=(const TensorDictImpl&) = delete;

  // make() allocates the object and its inline slots as one block from the global operator
  // new; deleting through these class forms frees that block, whatever its size.
  static void* operator new(size_t size) { return ::operator new(size); }
  static void operator delete(void* p) { ::operator delete(p); }

  const char* type_name() const override { return "TensorDict"; }

  size_t num_entries() const override { return size_; }
  std::vector<std::string> keys() const override;
  bool has(std::string_view key) const override { return find_slot(key) >= 0; }
  Entry get(std::string_view key) const override;
  void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const override;
  void insert_or_assign(std::string_view key, Entry value) override;
  void erase(std::string_view key) override;
  void rename(std::string_view from, std::string_view to) override;

  /// Position of `key` in slots(), or -1.
  int64_t find_slot(std::string_view key) const { return find_slot(key, key_hash(key)); }
  /// The same, with `hash == key_hash(key)` already computed.
  int64_t find_slot(std::string_view key, uint32_t hash) const;
  c10::ArrayRef<Slot> slots() const { return {slots_, size_}; }
  /// Appends without checking for an existing key (the caller knows it is new).
  /// `key` is a std::string (moved in) or a std::string_view; `value` anything Entry accepts.
  template <typename K, typename V>
  void append_unchecked(K&& key, V&& value) {
    const uint32_t hash = key_hash(key);
    append_unchecked(std::forward<K>(key), hash, std::forward<V>(value));
  }
  template <typename K, typename V>
  void append_unchecked(K&& key, uint32_t hash, V&& value) {
    if (size_ == capacity_) grow(size_ + 1);
    new (slots_ + size_) Slot(std::forward<K>(key), std::forward<V>(value), hash);
    ++size_;
    after_append();
  }
  /// Room for `n` entries (a level not made with make() starts with none).
  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }

  /// Drops the entries when the last handle goes. Children hold weak references to their lock
  /// parents, and intrusive_ptr only deletes an object once those are gone too: without this,
  /// a locked tensordict would keep its leaves (and mapped files) alive.
  void release_resources() override {
    clear_slots();
    index_.clear();
    lock_parents_.clear();
  }

 private:
  template <typename T>
  static T load_bytes(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
  static constexpr uint64_t kHashMultiplier = 0x9E3779B97F4A7C15ull;
  /// The index bucket of a hash: its top bits after a multiply, which depend on all 32 bits.
  size_t bucket_of(uint32_t hash) const { return (hash * 0x9E3779B9u) >> index_shift_; }

  struct InlineSlots {
    size_t capacity;
  };
  TensorDictImpl(c10::IntArrayRef batch_size, std::optional<at::Device> device, InlineSlots slots)
      : TensorDictBase(batch_size, device),
        slots_(reinterpret_cast<Slot*>(this + 1)),
        capacity_(static_cast<uint32_t>(slots.capacity)) {}

  void grow(size_t min_capacity);
  void clear_slots() noexcept;
  void rebuild_index();
  void after_append() {
    bump_layout_version();
    if (size_ > kLinearScanLimit) index_append();
  }
  void index_append();

  static constexpr size_t kLinearScanLimit = 16;
  // slots_[0, size_) are live; the array is either inline (right after this object, from
  // make()) or on the heap (slots_on_heap_).
  Slot* slots_ = nullptr;
  uint32_t size_ = 0;
  uint32_t capacity_ = 0;
  bool slots_on_heap_ = false;
  // Open-addressing table of slot positions + 1 (0 = empty); empty while small. Its size is
  // 2^(32 - index_shift_).
  std::vector<uint32_t> index_;
  uint8_t index_shift_ = 26;
};

}  // namespace tensordict
