#include "backends/in_memory/level_shape.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <tensordict/errors.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/tensor_dict_impl.h"

namespace tensordict {

// ---- Deferred levels (the TensorDictImpl side of Note [Shared shapes]) ----------------------

c10::intrusive_ptr<TensorDictImpl> TensorDictImpl::make_deferred(c10::intrusive_ptr<LevelShape> shape, at::Tensor flat,
                                                                 std::vector<at::Tensor> more_flats,
                                                                 c10::IntArrayRef batch_size,
                                                                 std::optional<at::Device> device,
                                                                 const DimNames& names, bool locked,
                                                                 bool leaves_share_version) {
  auto impl = c10::make_intrusive<TensorDictImpl>(batch_size, device);
  impl->packed_result_ = true;
  impl->live_ = static_cast<uint32_t>(shape->fields.size());  // num_entries() without building
  impl->flat_ = std::move(flat);
  impl->more_flats_ = std::move(more_flats);
  impl->shape_.store(shape.get(), std::memory_order_relaxed);
  impl->shape_owner_ = std::move(shape);
  impl->pending_.store(kDeferred, std::memory_order_relaxed);  // published with the handle
  if (!names.empty()) impl->set_dim_names(names);
  if (locked) impl->set_locked(true);
  impl->built_locked_ = locked;
  impl->leaves_share_version_ = leaves_share_version;
  return impl;
}

void TensorDictImpl::materialize() const {
  // As make_lazy_leaves: once per level, under the one lock; concurrent readers wait here.
  std::lock_guard<std::recursive_mutex> guard(lazy_mutex());
  if (!(pending_.load(std::memory_order_relaxed) & kDeferred)) return;
  auto* self = const_cast<TensorDictImpl*>(this);
  const LevelShape& shape = *shape_owner_;
  const auto n = static_cast<uint32_t>(shape.fields.size());
  if (n > capacity_) self->grow(n);
  // Nested levels as the eager build made them at the op: locked, their lock parent registered,
  // when this level was made locked (a lock_() or unlock_() since walks them after this).
  const bool locked = built_locked_;
  c10::intrusive_ptr<TensorDictBase> parent;
  uint32_t i = 0;
  try {
    for (; i < n; ++i) {
      const LevelShape::Field& f = shape.fields[i];
      if (f.kind == EntryKind::Tensor) {
        new (slots_ + i) Slot(f.key, at::Tensor(), f.hash);  // made on first access (Note [Lazy leaves])
      } else if (f.kind == EntryKind::TensorDict) {
        auto child =
            make_deferred(f.child, flat_, more_flats_, f.child->batch_size, f.child->device, f.child->names, locked,
                          leaves_share_version_);
        if (locked) {
          if (!parent) parent = c10::intrusive_ptr<TensorDictBase>::unsafe_reclaim_from_nonowning(self);
          child->add_lock_parent(parent);
        }
        new (slots_ + i) Slot(f.key, TensorDict(std::move(child)), f.hash);
      } else {
        new (slots_ + i) Slot(f.key, f.value, f.hash);
      }
    }
  } catch (...) {
    while (i > 0) slots_[--i].~Slot();  // still deferred: the next access tries again
    throw;
  }
  self->size_ = n;
  if (shape.leaves > 0) {
    auto lazy = std::make_unique<LazyLeaves>();
    lazy->flat = flat_;
    lazy->more_flats = more_flats_;
    lazy->over_runs = shape.over_runs;
    lazy->shared_version = leaves_share_version_;
    lazy->records = shape.records;
    lazy->leaves = shape.leaves;
    lazy->elements = shape.elements;
    lazy->per_flat = shape.per_flat;
    self->layout_ = std::move(lazy);
    lazy_.store(self->layout_.get(), std::memory_order_release);
  }
  // Built, its index left to the first lookup by key.
  pending_.store(n > kLinearScanLimit ? kIndexPending : 0, std::memory_order_release);
}

void TensorDictImpl::cache_shape(const c10::intrusive_ptr<LevelShape>& shape) const {
  std::lock_guard<std::recursive_mutex> guard(lazy_mutex());
  if (shape_.load(std::memory_order_relaxed) == shape.get()) return;  // another op kept it first
  if (shape_owner_) {
    // A deferred level's own shape is what materialize() builds from; a kept one that no longer
    // fits is retired, not freed: a concurrent op may be reading it unlocked.
    if (is_deferred() || retired_shapes_.size() >= kMaxRetiredShapes) return;
    retired_shapes_.push_back(std::move(shape_owner_));
  }
  shape_owner_ = shape;
  shape_.store(shape.get(), std::memory_order_release);
}

namespace in_memory {
namespace {

bool same_outer(const TensorDictBase& outer, const LevelShape& shape) {
  return outer.batch_size() == c10::IntArrayRef(shape.batch_size) && outer.device() == shape.device &&
         outer.dim_names() == shape.names;
}

// Whether `shape`, made from `level` (whose batch size, device and names are `outer`'s), still
// describes it. Keys, kinds, records and nested levels change only by writes, which drop the
// shape; what a nested level's handle changes without one is compared here.
bool fits(const TensorDictImpl& level, const TensorDictBase& outer, const LevelShape& shape) {
  if (!same_outer(outer, shape)) return false;
  if (level.is_deferred()) return level.shape() == &shape;
  for (uint32_t i : shape.nested) {
    const LevelShape::Field& f = shape.fields[i];
    const Entry& e = level.slot_at(i).value;  // a packed level has no tombstones
    if (!e.is_tensordict()) return false;
    const TensorDictBase& child_outer = *e.tensordict_unchecked().impl();
    const TensorDictImpl* child = packed_level(child_outer);
    if (child == nullptr || !fits(*child, child_outer, *f.child)) return false;
  }
  return true;
}

// A new shape of `level`; nullptr when the level holds what no shape describes (an undefined
// entry). Nested levels give theirs (kept ones when they fit).
c10::intrusive_ptr<LevelShape> make_shape(const TensorDictImpl& level, const TensorDictBase& outer) {
  auto shape = c10::make_intrusive<LevelShape>();
  shape->batch_size.assign(outer.batch_size().begin(), outer.batch_size().end());
  shape->device = outer.device();
  shape->names = outer.dim_names();
  const LazyLeaves* layout = level.packed_layout();
  if (layout != nullptr) {
    shape->over_runs = layout->over_runs;
    shape->records = layout->records;
    shape->leaves = layout->leaves;
    shape->elements = layout->elements;
    shape->per_flat = layout->per_flat;
    shape->tree_per_flat = layout->per_flat;
  }
  shape->tree_elements = shape->elements;
  shape->tree_leaves = shape->leaves;
  shape->fields.reserve(level.num_entries());
  bool describable = true;
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    const Entry& e = slot.value;
    LevelShape::Field f{slot.key, slot.hash, e.kind(), {}, {}};
    switch (e.kind()) {
      case EntryKind::Tensor:
        require_leaf_record(layout, slot.key);
        break;
      case EntryKind::TensorDict: {
        const TensorDictBase& child_outer = *e.tensordict_unchecked().impl();
        f.child = shape_of(operand_child(child_outer, slot.key), child_outer);
        if (!f.child) {
          describable = false;
          return;
        }
        shape->nested.push_back(static_cast<uint32_t>(shape->fields.size()));
        shape->tree_elements += f.child->tree_elements;
        shape->tree_leaves += f.child->tree_leaves;
        const FlatCounts& below = f.child->tree_per_flat;
        for (size_t k = 0; k < below.size(); ++k) shape->tree_per_flat.add(k, below.elements[k], below.leaves[k]);
        shape->has_empty_level = shape->has_empty_level || f.child->fields.empty() || f.child->has_empty_level;
        shape->has_non_tensor_stack = shape->has_non_tensor_stack || f.child->has_non_tensor_stack;
        break;
      }
      case EntryKind::NonTensor:
        f.value = e;
        shape->has_non_tensor_stack = shape->has_non_tensor_stack || e.non_tensor().is_stack();
        break;
      case EntryKind::Undefined:
        describable = false;
        return;
    }
    shape->fields.push_back(std::move(f));
  });
  return describable ? shape : c10::intrusive_ptr<LevelShape>();
}

// ---- Interning ----------------------------------------------------------------------------
// Shapes by structural hash, held weakly: equal trees share one shape while any level holds it.

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x9E3779B97F4A7C15ULL + (h >> 29); }

uint64_t structural_hash(const LevelShape& s) {
  uint64_t h = s.fields.size();
  for (const LevelShape::Field& f : s.fields) {
    h = mix(h, (uint64_t{f.hash} << 8) | static_cast<uint64_t>(f.kind));
    h = mix(h, reinterpret_cast<uintptr_t>(f.child.get()));  // children are interned first
  }
  for (int64_t r : s.records) h = mix(h, static_cast<uint64_t>(r));
  for (int64_t b : s.batch_size) h = mix(h, static_cast<uint64_t>(b));
  return h;
}

// Everything materialize() and fits() read. Nested shapes are interned, so compared by pointer.
bool identical(const LevelShape& a, const LevelShape& b) {
  if (a.fields.size() != b.fields.size() || a.records != b.records || a.batch_size != b.batch_size ||
      a.device != b.device || a.names != b.names || a.leaves != b.leaves || a.elements != b.elements ||
      a.over_runs != b.over_runs)
    return false;
  for (size_t i = 0; i < a.fields.size(); ++i) {
    const LevelShape::Field &x = a.fields[i], &y = b.fields[i];
    if (x.hash != y.hash || x.kind != y.kind || x.child != y.child || !key_equals(x.key, y.key)) return false;
  }
  return true;
}

struct ShapeTable {
  std::mutex mutex;
  std::unordered_multimap<uint64_t, c10::weak_intrusive_ptr<LevelShape>> shapes;
  size_t sweep_at = 64;  // entries whose shape is gone are dropped when the table reaches this
};

ShapeTable& shape_table() {
  static auto* table = new ShapeTable();  // never destroyed: levels may drop shapes at exit
  return *table;
}

c10::intrusive_ptr<LevelShape> intern(c10::intrusive_ptr<LevelShape> fresh) {
  for (const LevelShape::Field& f : fresh->fields) {
    if (f.kind == EntryKind::NonTensor) return fresh;  // values are not compared: not shared
  }
  const uint64_t h = structural_hash(*fresh);
  ShapeTable& table = shape_table();
  std::lock_guard<std::mutex> guard(table.mutex);
  auto range = table.shapes.equal_range(h);
  for (auto it = range.first; it != range.second;) {
    c10::intrusive_ptr<LevelShape> kept = it->second.lock();
    if (!kept) {
      it = table.shapes.erase(it);
      continue;
    }
    if (identical(*kept, *fresh)) return kept;
    ++it;
  }
  if (table.shapes.size() >= table.sweep_at) {
    for (auto it = table.shapes.begin(); it != table.shapes.end();) {
      it = it->second.expired() ? table.shapes.erase(it) : std::next(it);
    }
    table.sweep_at = std::max<size_t>(64, 2 * table.shapes.size());
  }
  table.shapes.emplace(h, c10::weak_intrusive_ptr<LevelShape>(fresh));
  return fresh;
}

}  // namespace

c10::intrusive_ptr<LevelShape> shape_of(const TensorDictImpl& level, const TensorDictBase& outer) {
  if (LevelShape* kept = level.shape(); kept != nullptr && fits(level, outer, *kept))
    return c10::intrusive_ptr<LevelShape>::unsafe_reclaim_from_nonowning(kept);
  c10::intrusive_ptr<LevelShape> made = make_shape(level, outer);
  if (!made) return made;
  made = intern(std::move(made));
  level.cache_shape(made);  // in place of a kept one that no longer fits
  return made;
}

c10::intrusive_ptr<LevelShape> intern_shape(c10::intrusive_ptr<LevelShape> fresh) { return intern(std::move(fresh)); }

void require_leaf_record(const LazyLeaves* layout, const std::string& key) {
  TD_CHECK(layout != nullptr, RuntimeError, "the leaf '", key,
           "' of an elementwise operation's operand was written while the operation read it");
}

const TensorDictImpl& operand_child(const TensorDictBase& child, const std::string& key) {
  const TensorDictImpl* level = packed_level(child);
  TD_CHECK(level != nullptr, RuntimeError, "the nested tensordict '", key,
           "' of an elementwise operation's operand was replaced while the operation read it");
  return *level;
}

bool same_shape(const LevelShape& a, const LevelShape& b) {
  if (&a == &b) return true;
  if (a.fields.size() != b.fields.size() || a.records != b.records) return false;
  for (size_t i = 0; i < a.fields.size(); ++i) {
    const LevelShape::Field &x = a.fields[i], &y = b.fields[i];
    if (x.hash != y.hash || x.kind != y.kind || !key_equals(x.key, y.key)) return false;
    if (x.kind == EntryKind::TensorDict &&
        (x.child->batch_size != y.child->batch_size || !same_shape(*x.child, *y.child)))
      return false;
  }
  return true;
}

}  // namespace in_memory
}  // namespace tensordict
