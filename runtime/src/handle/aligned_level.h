#pragma once
// AlignedLevel: a level read alongside another that lists its keys alike (stack, cat, binary
// ops), each entry looked for first at the position its key has in the level
// walked. An in-memory level's slots are read in place: the level built and its leaves made
// once, then one key compare a lookup, with no virtual call. Only for reads: a write to the level
// may move its slots.

#include <c10/macros/Macros.h>

#include <cstdint>
#include <string_view>
#include <typeinfo>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_base.h>

#include "backends/in_memory/key_hash.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "handle/key_path.h"

namespace tensordict {
namespace detail {

class AlignedLevel {
 public:
  explicit AlignedLevel(const TensorDictBase& level) : level_(&level) {
    if (typeid(level) == typeid(TensorDictImpl)) slots_ = static_cast<const TensorDictImpl&>(level).slots_for_reads(&count_);
  }

  /// entry_in(level, key, holder, position): the entry at `key`, or nullptr. Its fast part is
  /// always inlined (a walk calls it once per leaf and member); the rest is a call.
  C10_ALWAYS_INLINE const Entry* at(std::string_view key, size_t position, Entry& holder) const {
    if (slots_ != nullptr && position < count_) {
      const TensorDictImpl::Slot& slot = slots_[position];
      if (slot.live && in_memory::key_equals_inline(slot.key, key)) return &slot.value;
    }
    return look_up(key, position, holder);
  }

 private:
  C10_NOINLINE const Entry* look_up(std::string_view key, size_t position, Entry& holder) const {
    return entry_in(*level_, key, holder, position);
  }

  const TensorDictBase* level_;
  const TensorDictImpl::Slot* slots_ = nullptr;
  uint32_t count_ = 0;
};

}  // namespace detail
}  // namespace tensordict
