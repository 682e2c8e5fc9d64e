// The update family (semantics 1.6) and the indexed reads and writes of one key (1.4): update,
// update_ / copy_, update_at_, set_at_, get_at, setdefault.

#include <cstdint>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>
#include <c10/util/SmallVector.h>

#include <tensordict/batch_index.h>
#include <tensordict/entry.h>
#include <tensordict/function_ref.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/in_memory.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "core/format.h"
#include "core/key_chain.h"
#include "core/plain_copy.h"
#include "core/validate.h"
#include "handle/key_path.h"
#include "ops/kernel.h"
#include "ops/packed.h"
#include "ops/packed_runs.h"

namespace tensordict {

using detail::size_str;

namespace {

bool selected(const NestedKey& path, const std::optional<std::vector<NestedKey>>& keys) {
  if (!keys) return true;
  for (const auto& k : *keys) {
    const size_t n = std::min(k.size(), path.size());
    bool prefix = true;
    for (size_t i = 0; i < n && prefix; ++i) prefix = k[i] == path[i];
    if (prefix) return true;
  }
  return false;
}

struct UpdateArgs {
  bool clone, inplace;
  const std::optional<std::vector<NestedKey>>& keys;
};

void update_level(TensorDictBase& dest, const TensorDictBase& src, const UpdateArgs& args, const detail::KeyChain& prefix);

// A nested level of the source whose level in the destination exists, updated once the level
// above has been walked (update_level). Handles, and a copy of the key: the walk below may change
// or free the levels they came from.
struct NestedUpdate {
  std::string key;
  TensorDict dest, src;
};
using NestedUpdates = c10::SmallVector<NestedUpdate, 4>;

// src's entry `key`, at `position` in src's key order, written into the level `dest`;
// `unlocked`: dest's lock already checked. A nested level to update goes to `later` when given.
void update_entry(TensorDictBase& dest, const std::string& key, size_t position, const Entry& entry,
                  const UpdateArgs& args, const detail::KeyChain& prefix, bool& unlocked, NestedUpdates* later) {
  if (args.keys && !selected(prefix.child_path(key), args.keys)) return;
  const auto check_unlocked = [&] {
    if (!unlocked) detail::check_unlocked(dest);
    unlocked = true;
  };
  // dest's entry, looked up where it decides something: a nested level, or an in-place write.
  Entry holder;
  const Entry* existing =
      entry.is_tensordict() || (args.inplace && entry.is_tensor()) ? detail::entry_in(dest, key, holder, position)
                                                                   : nullptr;
  switch (entry.kind()) {
    case Entry::Kind::TensorDict: {
      if (existing != nullptr && existing->is_tensordict()) {
        if (later != nullptr) {
          later->push_back(NestedUpdate{key, existing->tensordict_unchecked(), entry.tensordict_unchecked()});
        } else {
          update_level(*existing->tensordict_unchecked().impl(), *entry.tensordict_unchecked().impl(), args,
                       prefix.child(key));
        }
        return;
      }
      check_unlocked();
      const TensorDict& value = entry.tensordict_unchecked();
      dest.insert_or_assign(key, detail::prepare_tensordict(dest, prefix.child_path(key), args.clone ? value.clone() : value));
      return;
    }
    case Entry::Kind::Tensor: {
      const at::Tensor& t = entry.tensor_unchecked();
      at::Tensor value = args.clone ? t.clone() : t;
      if (args.inplace && existing != nullptr && existing->is_tensor()) {
        detail::write_tensor_(dest, key, value, [&] { return prefix.child_path(key); });
        return;
      }
      check_unlocked();
      // The full key is made only for an error or a move to dest's device.
      if (!detail::storable_as_is(dest, value)) value = detail::prepare_tensor(dest, prefix.child_path(key), std::move(value));
      dest.insert_or_assign_at(key, position, std::move(value));
      return;
    }
    case Entry::Kind::NonTensor:
      check_unlocked();
      dest.insert_or_assign(key, detail::prepare_non_tensor(dest, prefix.child_path(key), entry.non_tensor()));
      return;
    case Entry::Kind::Undefined:
      return;
  }
}

// The level walk of update: src's entries in order, each looked up in dest where it lives (no
// NestedKey made per entry, no walk from the root per key).
void update_level(TensorDictBase& dest, const TensorDictBase& src, const UpdateArgs& args, const detail::KeyChain& prefix) {
  bool unlocked = false;
  size_t position = 0;
  if (&dest != &src && src.entries_in_memory()) {
    // src walked in place: this walk writes only into dest, so src's slots stay as they are. The
    // nested levels are updated after it, as a write below one could change a level walked here
    // or drop the last reference to it (a source that is part of the destination:
    // td.update(td["a"])); they write no key of this level, so its order is unchanged.
    NestedUpdates later;
    const bool plain = !args.keys && !args.clone && !args.inplace;
    src.for_each([&](const std::string& key, const Entry& entry) {
      const size_t at = position++;
      // A leaf over dest's leaf at the same position, the common case: one handle assigned.
      // Here rather than in update_entry, whose call, handle copy and Entry it skips (the same
      // write there saved 220 instructions of 1,700 for 30 leaves).
      if (plain && entry.is_tensor() && detail::storable_as_is(dest, entry.tensor_unchecked())) {
        if (!unlocked) detail::check_unlocked(dest);
        unlocked = true;
        if (in_memory::assign_leaf_at(dest, key, at, entry.tensor_unchecked())) return;
      }
      update_entry(dest, key, at, entry, args, prefix, unlocked, &later);
    });
    for (const NestedUpdate& n : later) update_level(*n.dest.impl(), *n.src.impl(), args, prefix.child(n.key));
    return;
  }
  // A level updated from itself, or one whose reads are copies (a file, a server): its entries are
  // read first, which also keeps the file's or the store's lock out of the writes.
  std::vector<std::pair<std::string, Entry>> items;
  items.reserve(src.num_entries());
  src.for_each([&](const std::string& key, const Entry& entry) { items.emplace_back(key, entry); });
  for (const auto& [key, entry] : items) update_entry(dest, key, position++, entry, args, prefix, unlocked, nullptr);
}

// Every tensor and non-tensor leaf of `src` must exist in `dest` with the same kind, tensors
// with `dest`'s batch dims leading (checked before anything is written). Returns the
// non-tensor leaves, which update_ writes after the tensors.
std::vector<std::pair<NestedKey, Entry>> check_in_place_source(const TensorDict& dest, const TensorDict& src) {
  std::vector<std::pair<NestedKey, Entry>> non_tensors;
  for (auto& [key, value] : src.items(/*include_nested=*/true)) {
    if (value.is_tensordict()) continue;
    Entry holder;
    TensorDictBase* level = detail::find_level(dest.impl(), key, holder);
    const EntryKind kind = level ? level->kind(key.back()) : EntryKind::Undefined;
    TD_CHECK(kind != EntryKind::Undefined, KeyError, "The key ", key.repr(), " was not found in the dest tensordict.");
    TD_CHECK(kind == value.kind(), TypeError, "update_: the entry at ", key.repr(), " holds ", kind_name(kind),
             ", the source holds ", kind_name(value.kind()));
    if (value.is_non_tensor()) {
      non_tensors.emplace_back(key, value);
      continue;
    }
    const at::Tensor& v = value.tensor_unchecked();
    TD_CHECK(detail::batch_leads(*level, v), ShapeError, "batch dimension mismatch, got self.batch_size=",
             size_str(level->batch_size()), " and value.shape=", size_str(v.sizes()), " for key ", key.repr(), ".");
  }
  return non_tensors;
}

// The fast checks of update_ and update_at_: the leaves of `src` walked beside `dest` where both
// live in memory (no key made per leaf, no walk from the root). Every entry `wanted` names must be
// in dest, at src's position or found, with the same kind, nested levels walked in turn, and
// `fits(dest, prefix, key, value, here)` must accept each leaf (`here`: dest's entry at the key).
// False at the first that does not (or another backend): the caller's per-key path then names
// what is wrong, or finds all is well.
template <typename Wanted, typename Fits>
bool leaves_fit(const TensorDictBase& dest, const TensorDictBase& src, const detail::KeyChain& prefix,
                const Wanted& wanted, const Fits& fits) {
  if (!dest.entries_in_memory() || !src.entries_in_memory()) return false;
  bool ok = true;
  size_t position = 0;
  src.for_each([&](const std::string& key, const Entry& value) {
    const size_t at = position++;
    if (!ok || !(value.is_tensordict() || wanted(value))) return;
    const Entry* here = dest.peek_at(key, at);
    if (here == nullptr || here->kind() != value.kind()) {
      ok = false;  // missing, or another kind (a nested level here may still hold no leaf)
    } else if (value.is_tensordict()) {
      ok = leaves_fit(*here->tensordict_unchecked().impl(), *value.tensordict_unchecked().impl(), prefix.child(key),
                      wanted, fits);
    } else {
      ok = fits(dest, prefix, key, value, *here);
    }
  });
  return ok;
}

// The leaves update_ and update_at_ write into, kept by their check (leaves_fit) so that the write
// walks nothing again: a (destination, value) pair per tensor leaf, usable while every level on
// the way aliases its storage (where write_many_ and write_at_ write in place).
struct LeafWrites {
  c10::SmallVector<std::pair<const at::Tensor*, const at::Tensor*>, 32> pairs;
  size_t leaves = 0;
  bool direct = true;

  void add(const TensorDictBase& level, const Entry& here, const Entry& value) {
    ++leaves;
    if (level.leaves_alias_storage()) pairs.emplace_back(&here.tensor_unchecked(), &value.tensor_unchecked());
    else direct = false;
  }
};

// `level[name][index] = value`; LibTorch's refusal becomes a ShapeError naming the key (made by
// `key`, only then) and both shapes. `position`: where the key may sit in `level` (a walk in step
// with a level built alike), for an in-memory level's write in place; SIZE_MAX when unknown.
void write_at_named(TensorDictBase& level, std::string_view name, const BatchIndex& index, const at::Tensor& value,
                    FunctionRef<NestedKey()> key, size_t position = SIZE_MAX) {
  try {
    if (!in_memory::write_leaf_at(level, name, position, index, value)) level.write_at_(name, index, value);
  } catch (const c10::Error& e) {
    TD_THROW(ShapeError, "set_at_: cannot write a value of shape ", size_str(value.sizes()), " into ", key().repr(), "[",
             index.repr(), "] (leaf shape ", size_str(level.get(name).tensor().sizes()), "): ", e.what_without_backtrace());
  }
}

// The tensor leaves of `src` written at `index` into the matching leaves of `dest`, which
// leaves_fit has checked.
void write_leaves_at(TensorDictBase& dest, const BatchIndex& index, const TensorDictBase& src,
                     const detail::KeyChain& prefix) {
  size_t position = 0;
  src.for_each([&](const std::string& key, const Entry& value) {
    const size_t at = position++;
    if (value.is_tensor()) {
      write_at_named(dest, key, index, value.tensor_unchecked(), [&] { return prefix.child_path(key); }, at);
    } else if (value.is_tensordict()) {
      write_leaves_at(*dest.peek_at(key, at)->tensordict_unchecked().impl(), index, *value.tensordict_unchecked().impl(),
                      prefix.child(key));
    }
  });
}

// The non-tensor leaves of an in-memory tree, its tensor leaves left unmade (an intact tree's
// leaves stay records).
void collect_non_tensors(const TensorDictBase& level, const detail::KeyChain& prefix,
                         std::vector<std::pair<NestedKey, Entry>>& out) {
  in_memory::for_each_structure_entry(level, [&](const std::string& key, const Entry& e) {
    if (e.is_non_tensor()) out.emplace_back(prefix.child_path(key), e);
    else if (e.is_tensordict()) collect_non_tensors(*e.tensordict_unchecked().impl(), prefix.child(key), out);
  });
}

void copy_leaf(const at::Tensor& dest, const at::Tensor& value) { dest.copy_(value); }

}  // namespace

TensorDict& TensorDict::update(const TensorDict& source, bool clone, bool inplace,
                               const std::optional<std::vector<NestedKey>>& keys_to_update) {
  if (!inplace) detail::check_unlocked(*impl_);
  c10::IntArrayRef a = batch_size(), b = source.batch_size();
  const size_t n = std::min(a.size(), b.size());
  TD_CHECK(a.slice(0, n) == b.slice(0, n), ShapeError,
           "update_batch_size must be set to True to be able to update tensordicts of different batch size. Got sizes ",
           size_str(a), " and ", size_str(b), ".");
  update_level(*impl_, *source.impl(), UpdateArgs{clone, inplace, keys_to_update}, detail::KeyChain());
  return *this;
}

TensorDict& TensorDict::update_(const TensorDict& source) {
  // Two intact consolidated trees laid out alike (the same keys, kinds and batch sizes, each leaf
  // at the same place: Note [Intact results], [Intact runs]) need no check per key: one copy over
  // each storage or run writes every tensor leaf, none of them made.
  if (ops::write_over_intact(*this, source, copy_leaf, "update_")) {
    std::vector<std::pair<NestedKey, Entry>> non_tensors;
    collect_non_tensors(*source.impl(), detail::KeyChain(), non_tensors);
    for (const auto& [key, entry] : non_tensors) set_non_tensor_(key, entry.non_tensor());
    return *this;
  }
  // Every tensor and non-tensor leaf, tensors with their level's batch leading; the non-tensor
  // ones are kept, to be written after the tensors.
  std::vector<std::pair<NestedKey, Entry>> non_tensors;
  const auto any_leaf = [](const Entry& value) { return value.defined(); };
  LeafWrites writes;
  const auto leaf_fits = [&](const TensorDictBase& level, const detail::KeyChain& prefix, const std::string& key,
                             const Entry& value, const Entry& here) {
    if (value.is_tensor()) {
      if (!detail::batch_leads(level, value.tensor_unchecked())) return false;
      writes.add(level, here, value);
      return true;
    }
    non_tensors.emplace_back(prefix.child_path(key), value);
    return true;
  };
  if (!leaves_fit(*impl_, *source.impl(), detail::KeyChain(), any_leaf, leaf_fits)) {
    writes.direct = false;
    non_tensors = check_in_place_source(*this, source);  // names what does not fit, or finds all fits
  }
  // One batched write (one round trip for a remote backend); a failing copy is redone key by
  // key, which names the key.
  try {
    if (writes.direct) {
      // Leaves that lie in runs of one storage, the source's laid out alike: one copy a run
      // (Note [Packed runs]); else one a leaf.
      const auto& pairs = writes.pairs;
      bool packed = false;
      if (ops::in_few_storages(pairs.size(), [&](size_t i) -> const at::Tensor& { return *pairs[i].first; })) {
        ops::LeafList dests, values;
        dests.reserve(pairs.size());
        values.reserve(pairs.size());
        for (const auto& [dest, value] : pairs) {
          dests.push_back(*dest);
          values.push_back(*value);
        }
        packed = ops::write_packed(dests, values, copy_leaf, ops::LeafKeys{*source.impl()}, "update_");
      }
      if (!packed) {
        // Plain CPU leaves: one memcpy each (Note [Plain copies]).
        for (const auto& [dest, value] : pairs) detail::copy_leaf_(*dest, *value);
      }
    } else {
      impl_->write_many_(source);
    }
  } catch (const c10::Error&) {
    for (auto& [key, entry] : source.items(/*include_nested=*/true, /*leaves_only=*/true)) {
      set_(key, entry.tensor_unchecked());
    }
    throw;
  }
  // Non-tensor values are written too, as v0.14's update_ (through set_) does.
  for (const auto& [key, entry] : non_tensors) set_non_tensor_(key, entry.non_tensor());
  return *this;
}

TensorDict& TensorDict::copy_(const TensorDict& source) { return update_(source); }

TensorDict& TensorDict::update_at_(const TensorDict& source, c10::ArrayRef<at::indexing::TensorIndex> index) {
  // Every tensor leaf, counted and kept (non-tensor entries are not written).
  const auto tensor = [](const Entry& value) { return value.is_tensor(); };
  LeafWrites writes;
  const auto keep = [&](const TensorDictBase& level, const detail::KeyChain&, const std::string&, const Entry& value,
                        const Entry& here) {
    writes.add(level, here, value);
    return true;
  };
  if (!leaves_fit(*impl_, *source.impl(), detail::KeyChain(), tensor, keep)) {
    // The per-key path: names the first key missing, or not a tensor, and writes the rest.
    for (const auto& key : source.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      TD_CHECK(contains(key), KeyError, "The key ", key.repr(), " was not found in the dest tensordict.");
    }
    for (auto& [key, entry] : source.items(/*include_nested=*/true, /*leaves_only=*/true)) {
      set_at_(key, entry.tensor_unchecked(), index);
    }
    return *this;
  }
  if (writes.leaves == 0) return *this;  // nothing to write: the index is not even read, as per key
  const BatchIndex bi(index, batch_size());
  if (writes.direct) {
    try {
      for (const auto& [dest, value] : writes.pairs) bi.assign(*dest, *value);
      return *this;
    } catch (const c10::Error&) {
      // Written again below, which names the key LibTorch refuses (the leaves before it take the
      // same values again).
    }
  }
  write_leaves_at(*impl_, bi, *source.impl(), detail::KeyChain());
  return *this;
}

TensorDict& TensorDict::update_at_(const TensorDict& source, std::initializer_list<at::indexing::TensorIndex> index) {
  return update_at_(source, c10::ArrayRef<at::indexing::TensorIndex>(index));
}

TensorDict& TensorDict::set_at_(KeyRef key, const at::Tensor& value, c10::ArrayRef<at::indexing::TensorIndex> index) {
  detail::check_key(key);
  Entry holder;
  TensorDictBase* level = detail::level_of(impl_.get(), key, holder);
  const EntryKind kind = level->kind(key.back());
  if (kind == EntryKind::Undefined) detail::throw_missing(*level, key, key.size() - 1);
  TD_CHECK(kind == EntryKind::Tensor, TypeError, "set_at_ of a tensor at ", key.repr(), " which holds ",
           kind_name(kind));
  write_at_named(*level, key.back(), BatchIndex(index, batch_size()), value, [&] { return NestedKey(key); });
  return *this;
}

TensorDict& TensorDict::set_at_(KeyRef key, const at::Tensor& value,
                                std::initializer_list<at::indexing::TensorIndex> index) {
  return set_at_(key, value, c10::ArrayRef<at::indexing::TensorIndex>(index));
}

at::Tensor TensorDict::get_at(KeyRef key, c10::ArrayRef<at::indexing::TensorIndex> index) const {
  at::Tensor leaf = get(key);
  BatchIndex bi(index, batch_size());
  return bi.apply(leaf);
}

at::Tensor TensorDict::get_at(KeyRef key, std::initializer_list<at::indexing::TensorIndex> index) const {
  return get_at(key, c10::ArrayRef<at::indexing::TensorIndex>(index));
}

Entry TensorDict::setdefault(KeyRef key, EntryInit default_value) {
  Entry e = find(key);
  if (e.defined()) return e;
  set(key, std::move(default_value));
  return get_entry(key);
}

}  // namespace tensordict
