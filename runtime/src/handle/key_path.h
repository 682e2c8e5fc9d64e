#pragma once
// Following a nested key down to the level that holds its last part. Levels whose entries live
// in memory are walked through peek() (no entry copied, no reference count touched); other
// backends hand out nested levels by value, which `holder` keeps alive.

#include <cstddef>
#include <string_view>

#include <tensordict/entry.h>
#include <tensordict/key.h>
#include <tensordict/tensor_dict_base.h>

namespace tensordict {
namespace detail {

/// The entry `key` of `level`, or nullptr when it is missing: its address where entries live in
/// memory, else a copy kept alive in `holder`.
inline const Entry* entry_in(const TensorDictBase& level, std::string_view key, Entry& holder) {
  if (level.entries_in_memory()) return level.peek(key);
  holder = level.get(key);
  return holder.defined() ? &holder : nullptr;
}
/// The same for a caller walking another level that lists its keys alike (stack, cat, binary
/// ops, apply): an in-memory entry is tried first at the key's `position` there.
inline const Entry* entry_in(const TensorDictBase& level, std::string_view key, Entry& holder, size_t position) {
  if (level.entries_in_memory()) return level.peek_at(key, position);
  holder = level.get(key);
  return holder.defined() ? &holder : nullptr;
}

/// The level that holds `key.back()`, or nullptr when a level on the way is missing
/// (`*missing_depth`, when given, is the index of the missing part). ValueError when a part on
/// the way holds something other than a tensordict.
TensorDictBase* find_level(TensorDictBase* root, KeyRef key, Entry& holder, size_t* missing_depth = nullptr);
/// Like find_level, but a missing level is a KeyError naming the level where the path broke off.
TensorDictBase* level_of(TensorDictBase* root, KeyRef key, Entry& holder);
/// Like level_of, for an in-place write: the key must exist (KeyError) and hold `kind`
/// (TypeError "<op> at <key> which holds <kind>").
TensorDictBase* level_holding(TensorDictBase* root, KeyRef key, EntryKind kind, const char* op, Entry& holder);
/// Like find_level, creating missing levels (of the parent's backend kind, make_child); a part
/// holding a leaf is a KeyError, a locked level a LockedError.
TensorDictBase* level_of_or_create(TensorDictBase* root, KeyRef key, Entry& holder);

}  // namespace detail
}  // namespace tensordict
