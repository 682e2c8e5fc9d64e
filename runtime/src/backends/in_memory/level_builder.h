#pragma once
// LevelBuilder: how the runtime makes in-memory levels (operation results, snapshots,
// constructors), entry by entry, without going through the checks of `set`. One allocation for
// the level and its `capacity` entries.

#include <optional>
#include <string_view>
#include <utility>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/tensor_dict_impl.h"

namespace tensordict {

class LevelBuilder {
 public:
  LevelBuilder(c10::IntArrayRef batch_size, std::optional<at::Device> device, size_t capacity = 0)
      : impl_(TensorDictImpl::make(batch_size, device, capacity)) {}

  /// Adds an entry. The key must not be in the level yet (callers copy keys from a level,
  /// where they are distinct); `value` is anything Entry accepts, stored as it is. A level of
  /// more than 16 keys gets its index once, in finish().
  template <typename K, typename V>
  void append(K&& key, V&& value) {
    impl_->append_unindexed(std::forward<K>(key), std::forward<V>(value));
  }
  /// Adds the entry unless the key is already there (then returns false); hashes the key once.
  template <typename V>
  bool try_append(std::string_view key, V&& value) {
    const uint32_t hash = in_memory::key_hash(key);
    if (impl_->find_slot(key, hash) >= 0) return false;
    impl_->append_unchecked(key, hash, std::forward<V>(value));
    return true;
  }
  bool contains(std::string_view key) const { return impl_->has(key); }
  size_t size() const { return impl_->num_entries(); }
  /// The level being built (what values are validated against).
  const TensorDictBase& level() const { return *impl_; }
  void set_locked(bool locked) { impl_->set_locked(locked); }
  /// The finished level; the builder is empty afterwards.
  TensorDict finish() {
    impl_->index_appended();
    return TensorDict(std::move(impl_));
  }

 private:
  c10::intrusive_ptr<TensorDictImpl> impl_;
};

}  // namespace tensordict
