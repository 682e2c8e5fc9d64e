#pragma once
// LevelBuilder: how the runtime makes in-memory levels (operation results, snapshots,
// constructors), entry by entry, without going through the checks of `set`. One allocation for
// the level and its `capacity` entries.

#include <iterator>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <c10/util/SmallVector.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/tensor_dict_impl.h"

namespace tensordict {

class LevelBuilder {
 public:
  LevelBuilder(c10::IntArrayRef batch_size, std::optional<at::Device> device, size_t capacity = 0)
      : impl_(TensorDictImpl::make(batch_size, device, capacity)), capacity_(capacity) {}

  /// Adds an entry. The key must not be in the level yet (callers copy keys from a level,
  /// where they are distinct); `value` is anything Entry accepts, stored as it is. A level of
  /// more than 16 keys gets its index once, in finish().
  template <typename K, typename V>
  void append(K&& key, V&& value) {
    impl_->append_unindexed(std::forward<K>(key), std::forward<V>(value));
  }
  /// The same, with the key's hash known (a key copied from another in-memory level).
  template <typename K, typename V>
  void append(K&& key, uint32_t hash, V&& value) {
    impl_->append_unindexed(std::forward<K>(key), hash, std::forward<V>(value));
  }
  /// Adds the entry unless the key is already there (then returns false, `key` untouched);
  /// hashes the key once. `key` is a std::string (moved in when added) or a std::string_view.
  template <typename K, typename V>
  bool try_append(K&& key, V&& value) {
    const std::string_view view(key);
    const uint32_t hash = in_memory::key_hash(view);
    if (impl_->find_slot(view, hash) >= 0) return false;
    impl_->append_unchecked(std::forward<K>(key), hash, std::forward<V>(value));
    return true;
  }
  /// Adds a tensor leaf made on first access (Note [Lazy leaves]): a view of `flat` (a whole
  /// storage, 1-D: a packed op's result) laid out as `like` (a leaf of its packed operand).
  void append_lazy(std::string_view key, const at::Tensor& flat, const at::Tensor& like) {
    LazyLeaves& lazy = lazy_leaves(flat, like.dim());
    const c10::TensorImpl* t = like.unsafeGetTensorImpl();
    lazy.add(next_slot(), t->storage_offset(), t->sizes(), t->strides(), lazy.flat_index(flat));
    impl_->append_unindexed(key, at::Tensor());
  }
  /// The same, laid out at `offset` elements into `flat`'s storage with `sizes` and `strides`,
  /// made as views autograd knows (LazyLeaves::autograd_views): a consolidated tensordict's,
  /// whose leaves may view several flats (one per run of a dtype, Note [Packed runs]).
  void append_lazy_view(std::string_view key, const at::Tensor& flat, int64_t offset, c10::IntArrayRef sizes,
                        c10::IntArrayRef strides) {
    LazyLeaves& lazy = lazy_leaves(flat, static_cast<int64_t>(sizes.size()));
    lazy.autograd_views = true;
    lazy.add(next_slot(), offset - flat.storage_offset(), sizes, strides, lazy.flat_index(flat));
    impl_->append_unindexed(key, at::Tensor());
  }
  /// The same, laid out at `offset` elements into `flat` with `sizes` and `strides`; the leaves of
  /// one level may view several flats (a result over packed runs, Note [Packed runs]).
  void append_lazy_at(std::string_view key, const at::Tensor& flat, int64_t offset, c10::IntArrayRef sizes,
                      c10::IntArrayRef strides) {
    LazyLeaves& lazy = lazy_leaves(flat, static_cast<int64_t>(sizes.size()));
    lazy.add(next_slot(), offset - flat.storage_offset(), sizes, strides, lazy.flat_index(flat));
    impl_->append_unindexed(key, at::Tensor());
  }
  /// Lazy leaves viewing `flats` (one at least), laid out as leaves of another level whose flat k
  /// (0: its `flat`, then its `more_flats`) maps to flats[to_flat[k]]: append_copied_lazy() adds
  /// them, in slot order. Called before any append_lazy. `shared_version`: LazyLeaves'.
  void copy_lazy(std::vector<at::Tensor> flats, const LazyLeaves& like, c10::ArrayRef<uint32_t> to_flat,
                 bool shared_version = false) {
    lazy_ = std::make_unique<LazyLeaves>();
    lazy_->shared_version = shared_version;
    // A run dropped (its leaves made per leaf) may leave one flat its leaves tile.
    lazy_->over_runs = like.over_runs && flats.size() == 1 + like.more_flats.size();
    lazy_->records.reserve(like.records.size());
    lazy_->flat = std::move(flats.front());
    lazy_->more_flats.assign(std::make_move_iterator(flats.begin() + 1), std::make_move_iterator(flats.end()));
    to_flat_.assign(to_flat.begin(), to_flat.end());
  }
  /// Adds a slot for the leaf of `like` whose record starts at `record` (moved to the next), laid
  /// out as there over the flat copy_lazy() maps its flat to.
  void append_copied_lazy(std::string_view key, uint32_t hash, const LazyLeaves& like, size_t& record) {
    const size_t at = record;
    const LazyLeaves::Record r = like.next(record);
    const size_t mine = lazy_->records.size();
    lazy_->records.insert(lazy_->records.end(), like.records.begin() + at, like.records.begin() + record);
    // The same slot as in `like` unless an entry before it was dropped.
    lazy_->records[mine] = static_cast<int64_t>(next_slot() | (static_cast<uint64_t>(to_flat_[r.storage]) << 32));
    lazy_->count(to_flat_[r.storage], c10::multiply_integers(r.sizes));
    impl_->append_unindexed(key, hash, at::Tensor());
  }
  /// The flats every lazy leaf of this level views one of, in the order the whole tree lists
  /// them (Note [Intact runs]): the level's records then number flats as the tree does, even
  /// where its own leaves view only some. `flats` outlives the build; called before any append_lazy.
  void list_flats(c10::ArrayRef<at::Tensor> flats, bool over_runs) {
    listed_ = flats;
    over_runs_ = over_runs;
  }
  /// The level is part of a packed op's result (TensorDictImpl::mark_packed_result).
  void mark_packed_result() { impl_->mark_packed_result(); }
  bool contains(std::string_view key) const { return impl_->has(key); }
  size_t size() const { return impl_->num_entries(); }
  /// The level being built (what values are validated against).
  const TensorDictBase& level() const { return *impl_; }
  void set_locked(bool locked) { impl_->set_locked(locked); }
  /// A nested level (built locked, and appended) whose lock parent the finished level becomes,
  /// as lock_() registers it: a result built locked needs no second walk.
  void add_locked_child(const TensorDict& child) { locked_children_.push_back(child.impl()); }
  /// The finished level; the builder is empty afterwards.
  TensorDict finish() {
    impl_->index_appended();
    if (lazy_) impl_->set_lazy_leaves(std::move(lazy_));
    TensorDict level(std::move(impl_));
    for (TensorDictBase* child : locked_children_) child->add_lock_parent(level.impl_ptr());
    return level;
  }
  /// finish() for a level built like `like` (an op's operand): its dim names, locked if `lock`.
  TensorDict finish_like(const TensorDictBase& like, bool lock) {
    if (lock) set_locked(true);
    TensorDict level = finish();
    if (C10_UNLIKELY(!like.dim_names().empty())) level.impl()->set_dim_names(like.dim_names());
    return level;
  }

 private:
  uint32_t next_slot() const { return static_cast<uint32_t>(impl_->num_entries()); }  // no tombstones while built
  LazyLeaves& lazy_leaves(const at::Tensor& flat, int64_t dim) {
    if (!lazy_) {
      lazy_ = std::make_unique<LazyLeaves>();
      lazy_->flat = listed_.empty() ? flat : listed_.front();
      lazy_->over_runs = over_runs_;
      if (listed_.size() > 1) lazy_->more_flats.assign(listed_.begin() + 1, listed_.end());
      lazy_->records.reserve(capacity_ * static_cast<size_t>(3 + 2 * dim));  // leaves of one rank: one allocation
    }
    return *lazy_;
  }

  c10::intrusive_ptr<TensorDictImpl> impl_;
  size_t capacity_;
  std::unique_ptr<LazyLeaves> lazy_;
  c10::SmallVector<uint32_t, 4> to_flat_;  // copy_lazy's
  c10::ArrayRef<at::Tensor> listed_;      // list_flats'
  bool over_runs_ = false;
  c10::SmallVector<TensorDictBase*, 4> locked_children_;
};

}  // namespace tensordict
