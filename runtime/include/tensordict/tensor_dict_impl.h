#pragma once
// TensorDictImpl: the in-memory backend. Entries live in a vector (insertion order); every slot
// keeps a 32-bit hash of its key. A lookup hashes the key once, then either scans the slots'
// hashes (a level of up to 16 keys: cheaper than probing, and no index to build) or probes an
// open-addressing index built from the stored hashes, so keys are never hashed twice.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

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

  /// The hash stored in Slot::hash. Cheap for the short keys tensordicts hold; not persisted.
  static uint32_t key_hash(std::string_view key) {
    // Word-at-a-time: 8 bytes per step, then the last 1-8 bytes read as overlapping words, so a
    // key of up to 8 bytes (most keys) costs a couple of loads and two multiplies.
    const char* p = key.data();
    size_t n = key.size();
    uint64_t h = 0x243F6A8885A308D3ull ^ n;
    for (; n > 8; p += 8, n -= 8) h = hash_mix(h ^ load_bytes<uint64_t>(p));
    uint64_t tail = 0;
    if (n >= 4) {
      tail = (uint64_t{load_bytes<uint32_t>(p)} << 32) | load_bytes<uint32_t>(p + n - 4);
    } else if (n > 0) {
      tail = (uint64_t{static_cast<uint8_t>(p[0])} << 16) |
             (uint64_t{static_cast<uint8_t>(p[n / 2])} << 8) | static_cast<uint8_t>(p[n - 1]);
    }
    h = hash_mix(hash_mix(h ^ tail));
    return static_cast<uint32_t>(h ^ (h >> 32));
  }

  TensorDictImpl(c10::IntArrayRef batch_size, std::optional<at::Device> device)
      : TensorDictBase(batch_size, device) {}

  const char* type_name() const override { return "TensorDict"; }

  size_t num_entries() const override { return slots_.size(); }
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
  const std::vector<Slot>& slots() const { return slots_; }
  /// Appends without checking for an existing key (the caller knows it is new).
  /// `key` is a std::string (moved in) or a std::string_view; `value` anything Entry accepts.
  template <typename K, typename V>
  void append_unchecked(K&& key, V&& value) {
    const uint32_t hash = key_hash(key);
    append_unchecked(std::forward<K>(key), hash, std::forward<V>(value));
  }
  template <typename K, typename V>
  void append_unchecked(K&& key, uint32_t hash, V&& value) {
    slots_.emplace_back(std::forward<K>(key), std::forward<V>(value), hash);
    after_append();
  }
  void reserve(size_t n) { slots_.reserve(n); }

  /// Drops the entries when the last handle goes. Children hold weak references to their lock
  /// parents, and intrusive_ptr only deletes an object once those are gone too: without this,
  /// a locked tensordict would keep its leaves (and mapped files) alive.
  void release_resources() override {
    slots_.clear();
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
  static uint64_t hash_mix(uint64_t x) {
    x *= 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
  }

  void rebuild_index();
  void after_append() {
    bump_layout_version();
    if (slots_.size() > kLinearScanLimit) index_append();
  }
  void index_append();

  static constexpr size_t kLinearScanLimit = 16;
  std::vector<Slot> slots_;
  // Open-addressing table of slot positions + 1 (0 = empty); empty while small.
  std::vector<uint32_t> index_;
};

}  // namespace tensordict
