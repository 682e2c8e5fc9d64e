#pragma once
// Note [Lazy leaves]: the result of an elementwise op over a packed storage (a consolidated
// tensordict, ops/packed.cpp) is one new storage whose leaves are views laid out as the
// operand's. Making those views is most of such an op's cost on small leaves (a TensorImpl each,
// made and, when the result is dropped or consumed by the next op, destroyed), so a level of such
// a result keeps, instead of its leaves, the storage and where each leaf lies in it: its slots
// hold undefined tensors until the first read of one of its tensor entries (get, peek), a walk
// of its entries (for_each) or any write makes every leaf of the level at once. Key and kind
// queries (keys, has, kind, for_each_key, num_entries) and reads of a nested level or of
// non-tensor data answer without making them. Making them is thread-safe: concurrent
// first readers wait for one of them, and later readers pay one atomic load.
//
// The records outlive the making of the leaves: they stay with the level until something is
// written to it (Note [Intact results], intact_result.h), so a result whose leaves were read
// still offers its storage to the next op, which checks each made leaf against its record.

#include <algorithm>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/SmallVector.h>
#include <c10/util/accumulate.h>

namespace tensordict {

/// What the leaves of a level (or of a tree) hold in each flat they view, by the flat's index in
/// their records: counted as records are added, so a walk over runs (Note [Intact runs]) reads
/// a few sums instead of every record.
struct FlatCounts {
  c10::SmallVector<int64_t, 4> elements;
  c10::SmallVector<int64_t, 4> leaves;

  void add(size_t flat, int64_t flat_elements, int64_t flat_leaves) {
    if (elements.size() <= flat) {
      elements.resize(flat + 1, 0);
      leaves.resize(flat + 1, 0);
    }
    elements[flat] += flat_elements;
    leaves[flat] += flat_leaves;
  }
  size_t size() const { return elements.size(); }
};

/// A level's leaves not made yet: views of `flat` (a whole storage, 1-D, offset 0), or of one of
/// `more_flats`.
struct LazyLeaves {
  at::Tensor flat;
  /// Further storages, for a result over packed runs (Note [Packed runs], ops/packed_runs.h):
  /// a leaf views `flat` or one of these, as its record says. Such a level is never an intact
  /// result of one storage (all_intact refuses it), only of several (Note [Intact runs]).
  std::vector<at::Tensor> more_flats;
  /// Made with as_strided (views autograd knows, sharing `flat`'s version counter), as a
  /// consolidated tensordict's leaves always were; else built directly (core/strided_view.h).
  bool autograd_views = false;
  /// Built directly, then given `flat`'s version counter (a detach() result, whose leaves share
  /// the counter of the leaves they detach, as each leaf's detach() would): no counter of their own.
  bool shared_version = false;
  /// Whether a made leaf has a version counter of its own, which an in-place op over the flat
  /// leaves as it was (bump_made_leaf_versions).
  bool own_versions() const { return !autograd_views && !shared_version; }
  /// The flats are runs (Note [Intact runs]) that the tree's leaves do not tile as one storage
  /// (several, or one with padding): the one-storage walk (Note [Intact results]) stops here
  /// rather than check every made leaf first.
  bool over_runs = false;
  /// Per leaf, in slot order: slot (and flat index), offset in elements from its flat's start,
  /// dim, then its sizes and strides. Counted from the flat, not the storage, records do not
  /// depend on where a flat starts: a consolidated tensordict's runs (typed views at an offset
  /// into its bytes) and an op's results over them (new storages) share them (Note [Shared shapes]).
  std::vector<int64_t> records;
  /// How many leaves the records hold, and their elements together; and by flat.
  size_t leaves = 0;
  int64_t elements = 0;
  FlatCounts per_flat;
  /// The key set the leaves were made with (set when they are made): a leaf given names, or
  /// negated or conjugated in place since, has another.
  c10::DispatchKeySet made_keys;

  /// Where a leaf lies in its storage: `flat` when `storage` is 0, else more_flats[storage - 1].
  struct Record {
    uint32_t slot;
    int64_t offset;
    c10::IntArrayRef sizes, strides;
    uint32_t storage;
  };

  /// `storage`: which flat the leaf views (flat_index).
  void add(uint32_t slot, int64_t offset, c10::IntArrayRef sizes, c10::IntArrayRef strides, uint32_t storage = 0) {
    // Appended field by field: the records are reserved for the level's leaves, so each append
    // is a store (a resize would zero-fill first, and copying a leaf's few sizes call memmove).
    const size_t dim = sizes.size();
    records.push_back(static_cast<int64_t>(slot | (static_cast<uint64_t>(storage) << 32)));
    records.push_back(offset);
    records.push_back(static_cast<int64_t>(dim));
    int64_t elements_of_leaf = 1;
    for (const int64_t s : sizes) {
      records.push_back(s);
      elements_of_leaf *= s;
    }
    for (const int64_t s : strides) records.push_back(s);
    count(storage, elements_of_leaf);
  }
  /// Counts a leaf of `leaf_elements` over flat `storage` (add, or records copied whole).
  void count(uint32_t storage, int64_t leaf_elements) {
    ++leaves;
    elements += leaf_elements;
    per_flat.add(storage, leaf_elements, 1);
  }
  /// The record starting at `records[i]`; `i` moves to the next one.
  Record next(size_t& i) const {
    const int64_t* r = records.data() + i;
    const Record record = read(r);
    i = static_cast<size_t>(r - records.data());
    return record;
  }
  /// The record starting at `r`, a position in `records`; `r` moves to the next one. For walks
  /// paid per leaf on every op (intact_result.cpp), over [records.data(), + records.size()).
  static Record read(const int64_t*& r) {
    const auto dim = static_cast<size_t>(r[2]);
    const Record record{static_cast<uint32_t>(r[0]), r[1], c10::IntArrayRef(r + 3, dim), c10::IntArrayRef(r + 3 + dim, dim),
                        static_cast<uint32_t>(static_cast<uint64_t>(r[0]) >> 32)};
    r += 3 + 2 * dim;
    return record;
  }
  /// A record's first field (slot and flat index) with another slot.
  static int64_t with_slot(int64_t field, uint32_t slot) {
    return static_cast<int64_t>((static_cast<uint64_t>(field) & ~uint64_t{0xffffffff}) | slot);
  }
  /// The flat a record's leaf views.
  const at::Tensor& flat_of(const Record& r) const { return r.storage == 0 ? flat : more_flats[r.storage - 1]; }
  /// The index (for add) of `f`, one of this level's flats, added if new.
  uint32_t flat_index(const at::Tensor& f) {
    if (f.is_same(flat)) return 0;
    for (size_t i = 0; i < more_flats.size(); ++i)
      if (f.is_same(more_flats[i])) return static_cast<uint32_t>(i + 1);
    more_flats.push_back(f);
    return static_cast<uint32_t>(more_flats.size());
  }
};

}  // namespace tensordict
