// Note [Direct writes]: `td.set(key, tensor)` and `td.erase(key)` on a tree of in-memory levels,
// done in one inlined walk of the slots instead of the general path's virtual lookups (one per
// level, then the write's own lookup behind another virtual call). Taken only when nothing on
// the way asks for more than the write itself: every level built, its leaves made, unlocked, no
// packed op's records to drop and no index left to build; every part of the key there and a
// nested level; the tensor storable as is. Otherwise nothing is changed and the caller takes the
// general path, which creates missing levels and raises the errors. Each level's lookup tries
// its write hint first (Note [Write hints], tensor_dict_impl.h). select_ on an in-memory
// level rebuilds it at once with what it keeps (keep_in_order), where other backends erase what
// it drops key by key so that a file's groups stay in place.

#include <typeinfo>

#include "backends/in_memory/in_memory.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "core/validate.h"

namespace tensordict {
namespace in_memory {

namespace {

C10_ALWAYS_INLINE TensorDictImpl* as_open_level(TensorDictBase* level) {
  if (typeid(*level) != typeid(TensorDictImpl)) return nullptr;
  auto* impl = static_cast<TensorDictImpl*>(level);
  return impl->open_for_direct_writes() ? impl : nullptr;
}

/// The level holding `key.back()` when every level down to it is open for direct writes, else
/// nullptr.
C10_ALWAYS_INLINE TensorDictImpl* open_level_of(TensorDictBase& root, const KeyRef& key) {
  if (key.empty()) return nullptr;
  TensorDictImpl* level = as_open_level(&root);
  for (size_t i = 0; level != nullptr && i + 1 < key.size(); ++i) {
    const std::string_view part = key[i];
    uint32_t hash = 0;
    const int64_t slot = level->find_slot_for_write(part, &hash);
    if (slot < 0) return nullptr;
    const Entry& next = level->ready_entry(slot);
    if (!next.is_tensordict()) return nullptr;
    level = as_open_level(next.tensordict_unchecked().impl());
  }
  return level;
}

}  // namespace

bool try_set_tensor(TensorDictBase& root, const KeyRef& key, at::Tensor& value) {
  TensorDictImpl* level = open_level_of(root, key);
  if (level == nullptr || !detail::storable_as_is(*level, value)) return false;
  const std::string_view name = key.back();
  uint32_t hash = 0;
  const int64_t slot = level->find_slot_for_write(name, &hash);
  if (slot < 0) {
    level->append_for_write(name, hash, std::move(value));
  } else {
    level->ready_entry(slot) = std::move(value);
  }
  return true;
}

bool try_erase(TensorDictBase& root, const KeyRef& key) {
  TensorDictImpl* level = open_level_of(root, key);
  return level != nullptr && level->erase_ready(key.back());
}

bool keep_in_order(TensorDictBase& level, const std::vector<std::string>& kept) {
  if (typeid(level) != typeid(TensorDictImpl)) return false;
  static_cast<TensorDictImpl&>(level).keep_in_order(kept);
  return true;
}

}  // namespace in_memory
}  // namespace tensordict
