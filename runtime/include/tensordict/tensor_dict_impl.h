#pragma once
// TensorDictImpl: the in-memory backend. Entries live in a vector (insertion order) with a
// hash index that is only built once a level holds more than 16 keys; below that a linear scan
// over short strings is faster than hashing, and building no index keeps construction cheap.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_base.h>

namespace tensordict {

class TensorDictImpl : public TensorDictBase {
 public:
  struct Slot {
    std::string key;
    Entry value;
  };

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
  int64_t find_slot(std::string_view key) const;
  const std::vector<Slot>& slots() const { return slots_; }
  /// Appends without checking for an existing key (the caller knows it is new).
  void append_unchecked(std::string key, Entry value);
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
  void rebuild_index();

  static constexpr size_t kLinearScanLimit = 16;
  std::vector<Slot> slots_;
  // Open-addressing table of slot positions + 1 (0 = empty); empty while small.
  std::vector<uint32_t> index_;
};

}  // namespace tensordict
