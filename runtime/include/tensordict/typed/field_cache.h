#pragma once
// FieldCache: what makes a generated accessor cost no hashing or map lookup. For a backend
// whose entries live in memory (StoragePolicy::entries_in_memory: in memory, memmap,
// consolidated) it remembers the address TensorDictBase::peek gave together with the backend's
// layout_version(); while neither the backend object nor its layout changed, a read is two
// compares and a load. Entries added, removed or renamed bump the layout version, which
// invalidates the cache; replacing a value keeps the entry where it was, so the cached address
// stays right. Other backends are read through TensorDictBase::get every time.
//
// Note [Typed handles and threads]: a read refreshes the cache of the handle it goes through,
// so, like a std::vector being filled, one typed handle object must not be read from several
// threads at once. Copies of the handle are cheap (they share the data): give each thread its own.

#include <cstdint>
#include <string_view>

#include <c10/macros/Macros.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_base.h>

namespace tensordict {
namespace typed {

class FieldCache {
 public:
  /// The entry `name` of `base`, or nullptr when there is none.
  const Entry* lookup(const TensorDictBase* base, std::string_view name) const {
    if (C10_LIKELY(base == base_ && base->layout_version() == version_)) return entry_;
    return refresh(base, name);
  }

 private:
  const Entry* refresh(const TensorDictBase* base, std::string_view name) const;

  // The backend and layout the cached address belongs to; base_ stays null for backends
  // whose entries are not in memory, so every lookup refreshes.
  mutable const TensorDictBase* base_ = nullptr;
  mutable uint64_t version_ = 0;
  // Address of the entry inside the backend (null: the field is absent).
  mutable const Entry* entry_ = nullptr;
  // The last entry a generic backend returned (get() returns by value).
  mutable Entry holder_;
};

}  // namespace typed
}  // namespace tensordict
