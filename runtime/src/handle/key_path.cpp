#include "handle/key_path.h"

#include <tensordict/errors.h>
#include <tensordict/tensor_dict.h>

#include "core/validate.h"

namespace tensordict {
namespace detail {

TensorDictBase* find_level(TensorDictBase* root, KeyRef key, Entry& holder, size_t* missing_depth) {
  TensorDictBase* level = root;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    Entry fetched;
    const Entry* next = entry_in(*level, key[i], fetched);
    if (next == nullptr) {
      if (missing_depth) *missing_depth = i;
      return nullptr;
    }
    TD_CHECK(next->is_tensordict(), ValueError, "Expected a TensorDictBase instance but got ", kind_name(next->kind()),
             " for key ", key.prefix(i + 1).repr(), " while looking up ", key.repr(), ".");
    TensorDictBase* child = next->tensordict_unchecked().impl();
    // Only the current level must stay alive: in-memory levels below a fetched one are owned by it.
    if (fetched.defined()) holder = std::move(fetched);
    level = child;
  }
  return level;
}

TensorDictBase* level_of(TensorDictBase* root, KeyRef key, Entry& holder) {
  size_t missing = 0;
  TensorDictBase* level = find_level(root, key, holder, &missing);
  if (level == nullptr) {
    Entry parent_holder;
    throw_missing(*find_level(root, key.prefix(missing + 1), parent_holder), key, missing);
  }
  return level;
}

TensorDictBase* level_holding(TensorDictBase* root, KeyRef key, EntryKind kind, const char* op, Entry& holder) {
  TensorDictBase* level = level_of(root, key, holder);
  const EntryKind held = level->kind(key.back());
  if (held == EntryKind::Undefined) throw_missing(*level, key, key.size() - 1);
  TD_CHECK(held == kind, TypeError, op, " at ", key.repr(), " which holds ", kind_name(held));
  return level;
}

TensorDictBase* level_of_or_create(TensorDictBase* root, KeyRef key, Entry& holder) {
  TensorDictBase* level = root;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    Entry fetched;
    const Entry* next = entry_in(*level, key[i], fetched);
    if (next == nullptr) {
      check_unlocked(*level);
      level->insert_or_assign(key[i], level->make_child(key[i], level->batch_size()));
      // Read back what was stored: a backend may keep a converted copy of what it was given.
      next = entry_in(*level, key[i], fetched);
      TD_CHECK(next != nullptr && next->is_tensordict(), RuntimeError, level->type_name(),
               " did not keep the nested level created at ", key.prefix(i + 1).repr());
    }
    TD_CHECK(next->is_tensordict(), KeyError, "The entry ", key.prefix(i + 1).repr(),
             " is already present in tensordict and holds ", kind_name(next->kind()), ", so ", key.repr(),
             " cannot be created under it.");
    TensorDictBase* child = next->tensordict_unchecked().impl();
    if (fetched.defined()) holder = std::move(fetched);
    level = child;
  }
  return level;
}

}  // namespace detail
}  // namespace tensordict
