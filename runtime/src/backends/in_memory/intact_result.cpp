#include "backends/in_memory/intact_result.h"

#include <algorithm>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <ATen/core/grad_mode.h>
#include <c10/util/SmallVector.h>

#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "backends/in_memory/intact_runs.h"
#include "backends/in_memory/level_builder.h"
#include "backends/in_memory/level_shape.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "backends/consolidated/rebuild.h"
#include "core/detach_leaf.h"
#include "core/forward_ad.h"

namespace tensordict {
namespace in_memory {

// What every tensordict other than a packed level costs here is two typeid compares.
const TensorDictImpl* packed_level(const TensorDictBase& td) {
  const TensorDictBase* level = &td;
  if (typeid(td) != typeid(TensorDictImpl)) {
    level = detail::consolidated_table(td);
    if (level == nullptr || typeid(*level) != typeid(TensorDictImpl)) return nullptr;
  }
  const auto* impl = static_cast<const TensorDictImpl*>(level);
  return impl->is_packed_result() ? impl : nullptr;
}

namespace {

// Whether a leaf's `dim` sizes and strides are a record's, with no branch per element:
// IntArrayRef's operator== goes through memcmp, and a loop over a dim known only at run time
// costs more than these compares on the common dims (one to three).
inline bool same_geometry(const int64_t* size, const int64_t* stride, const LazyLeaves::Record& r, size_t dim) {
  const int64_t *ms = r.sizes.data(), *mt = r.strides.data();
  switch (dim) {
    case 1:
      return ((size[0] ^ ms[0]) | (stride[0] ^ mt[0])) == 0;
    case 2:
      return ((size[0] ^ ms[0]) | (size[1] ^ ms[1]) | (stride[0] ^ mt[0]) | (stride[1] ^ mt[1])) == 0;
    case 3:
      return ((size[0] ^ ms[0]) | (size[1] ^ ms[1]) | (size[2] ^ ms[2]) | (stride[0] ^ mt[0]) | (stride[1] ^ mt[1]) |
              (stride[2] ^ mt[2])) == 0;
    default: {
      int64_t diff = 0;
      for (size_t d = 0; d < dim; ++d) diff |= (size[d] ^ ms[d]) | (stride[d] ^ mt[d]);
      return diff == 0;
    }
  }
}

// The storage and dtype leaves made from a flat have: one entry per flat of a level.
struct FlatId {
  const c10::StorageImpl* storage;
  caffe2::TypeMeta dtype;
  int64_t offset;  // where the flat starts in its storage: records count from there
};

// Whether the made leaves of `level` are still the views `layout` made (Note [Intact results]).
// Paid per leaf on every op over a tree whose leaves were read. `Several`: the leaves view
// several flats (Note [Intact runs]), each record naming its own; without it, the one flat
// starts its storage (as intact_packed_storage requires).
template <bool Several>
bool leaves_as_made(const TensorDictImpl& level, const LazyLeaves& layout, bool grad_mode) {
  const FlatId first{layout.flat.storage().unsafeGetStorageImpl(), layout.flat.dtype(),
                     Several ? layout.flat.storage_offset() : 0};
  c10::SmallVector<FlatId, 4> more;
  if (Several) {
    for (const at::Tensor& f : layout.more_flats)
      more.push_back(FlatId{f.storage().unsafeGetStorageImpl(), f.dtype(), f.storage_offset()});
  }
  const c10::DispatchKeySet keys = layout.made_keys;
  const TensorDictImpl::Slot* slots = level.built_slots();  // all_intact() found it built
  const int64_t* at = layout.records.data();
  for (const int64_t* const end = at + layout.records.size(); at != end;) {
    const LazyLeaves::Record r = LazyLeaves::read(at);
    const FlatId& flat = !Several || r.storage == 0 ? first : more[r.storage - 1];
    const Entry& e = slots[r.slot].value;
    if (!e.is_tensor()) return false;
    const c10::TensorImpl* t = e.tensor_unchecked().unsafeGetTensorImpl();
    // The key set covers names, lazy negation and conjugation. The storage compare also refuses an
    // undefined tensor (no storage). No leaf may require grad in grad mode: with grad mode off
    // (no_grad, inference mode) an op records no graph per leaf either. Forward tangents exist
    // only while a dual level is open, when no storage is taken.
    // unsafe_storage(): storage() is a virtual call per leaf, and a leaf made here stays a plain
    // strided TensorImpl (one whose storage would throw gives an empty Storage: no match).
    if (t->key_set() != keys || t->dtype() != flat.dtype || t->unsafe_storage().unsafeGetStorageImpl() != flat.storage ||
        t->storage_offset() != (Several ? flat.offset : 0) + r.offset)
      return false;
    const c10::IntArrayRef sizes = t->sizes();
    if (sizes.size() != r.sizes.size() || !same_geometry(sizes.data(), t->strides().data(), r, sizes.size()))
      return false;
    if (grad_mode && t->requires_grad()) return false;  // out of line (a virtual call for a view): last
  }
  return true;
}

}  // namespace

bool made_leaves_intact(const TensorDictImpl& level, const LazyLeaves& layout, bool grad_mode) {
  return layout.more_flats.empty() && layout.flat.storage_offset() == 0 ? leaves_as_made<false>(level, layout, grad_mode)
                                                                       : leaves_as_made<true>(level, layout, grad_mode);
}

namespace {

// What all_intact() gathers over a tree: the storage (the first level's), the elements of every
// leaf, and whether a made leaf has a version counter of its own.
struct Walk {
  const at::Tensor* flat = nullptr;
  int64_t elements = 0;
  bool own_versions = false;
  /// Every leaf, made or not, shares the storage's version counter.
  bool shared_versions = true;
  /// Made leaves requiring grad break the walk (false: they do not, for detach()).
  bool grad_mode = at::GradMode::is_enabled();

  /// Adds `count` elements over `storage`; false when the tree's levels view two storages.
  bool add(const at::Tensor& storage, int64_t count) {
    if (flat == nullptr) flat = &storage;
    else if (!flat->is_same(storage)) return false;
    elements += count;
    return true;
  }
};

// The leaves `layout` records of `level` (built, intact so far): one storage with the walk's,
// and as made.
bool intact_leaves(const TensorDictImpl& level, const LazyLeaves& layout, Walk& walk) {
  if (!walk.add(layout.flat, layout.elements)) return false;
  walk.shared_versions = walk.shared_versions && !layout.own_versions();
  if (level.unmade_leaves() != nullptr) return true;
  // Views autograd knows share the storage's version counter.
  walk.own_versions = walk.own_versions || layout.own_versions();
  // A flat at an offset is a run (Note [Intact runs]); intact_packed_storage refuses it.
  return layout.flat.storage_offset() == 0 && leaves_as_made<false>(level, layout, walk.grad_mode);
}

// Whether `level` and its nested levels are intact, all over one storage. No lock: the records
// and the slots' kinds never change while other threads read (a write is not concurrent with
// reads), and a made leaf is read only after the release that published it (unmade_leaves()).
// A deferred level (Note [Shared shapes]) is intact as its shape says, its leaves not made.
bool all_intact(const TensorDictImpl& level, Walk& walk) {
  if (level.is_deferred()) {
    const LevelShape& shape = *level.shape();
    if (shape.over_runs || !level.deferred_more_flats().empty()) return false;  // a result over runs (Note [Intact runs])
    if (shape.tree_leaves == 0) return true;
    walk.shared_versions = walk.shared_versions && level.deferred_leaves_share_version();
    return walk.add(level.deferred_flat(), shape.tree_elements);
  }
  const LazyLeaves* layout = level.packed_layout();
  // Leaves over several storages, or over a run with padding: Note [Intact runs].
  if (layout != nullptr && (layout->over_runs || !layout->more_flats.empty())) return false;
  if (const LevelShape* shape = level.shape()) {
    // The level is as its shape describes (a write drops the shape): its nested levels are the
    // shape's, its tensor slots the records'.
    const TensorDictImpl::Slot* slots = level.built_slots();
    for (uint32_t i : shape->nested) {
      const TensorDictImpl* child = packed_level(*slots[i].value.tensordict_unchecked().impl());
      if (child == nullptr || !all_intact(*child, walk)) return false;
    }
    return layout == nullptr || intact_leaves(level, *layout, walk);
  }
  size_t tensors = 0;
  bool intact = true;
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    const Entry& e = slot.value;
    if (!intact) return;
    if (e.is_tensor()) {
      ++tensors;
    } else if (e.is_tensordict()) {
      const TensorDictImpl* child = packed_level(*e.tensordict_unchecked().impl());
      intact = child != nullptr && all_intact(*child, walk);
    }
  });
  if (!intact || layout == nullptr) return intact && tensors == 0;
  return tensors == layout->leaves && intact_leaves(level, *layout, walk);
}

}  // namespace

namespace {

// The storage `td` (an intact packed result, found with `walk`) tiles whole, else nullptr.
const at::Tensor* intact_storage(const TensorDictBase& td, Walk& walk) {
  const TensorDictImpl* level = packed_level(td);
  if (level == nullptr || detail::forward_ad_open()) return nullptr;
  if (!all_intact(*level, walk) || walk.flat == nullptr) return nullptr;
  // A nested level of a result is intact too, but its leaves cover only part of the storage; a
  // flat at an offset is one run of several (Note [Intact runs]).
  if (walk.elements != walk.flat->numel() || walk.flat->storage_offset() != 0) return nullptr;
  return walk.flat;
}

}  // namespace

at::Tensor intact_packed_storage(const TensorDictBase& td, bool* own_versions) {
  Walk walk;
  const at::Tensor* flat = intact_storage(td, walk);
  if (flat == nullptr) return at::Tensor();
  if (own_versions != nullptr) *own_versions = walk.own_versions;
  return *flat;
}

namespace {

void bump_level(const TensorDictImpl& level) {
  if (level.is_deferred()) return;  // no leaf made, no nested level built
  const LazyLeaves* layout = level.packed_layout();
  // Views autograd knows share the storage's version counter, which the op bumps itself.
  if (layout != nullptr && level.unmade_leaves() == nullptr && layout->own_versions()) {
    for (size_t i = 0; i < layout->records.size();) {
      const LazyLeaves::Record r = layout->next(i);
      level.slot_at(r.slot).value.tensor_unchecked().unsafeGetTensorImpl()->bump_version();
    }
  }
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    if (!slot.value.is_tensordict()) return;
    if (const TensorDictImpl* child = packed_level(*slot.value.tensordict_unchecked().impl())) bump_level(*child);
  });
}

// What a result's leaves view: `flat` (one storage, whose shape may be shared), or, over several
// (Note [Intact runs]), results[i] where the operand's leaves view storages[i]. An undefined
// result (the op's result viewed its input: `to` its own dtype) makes those leaves `per_leaf`.
struct ResultStorages {
  const at::Tensor* flat = nullptr;
  c10::ArrayRef<at::Tensor> storages, results;
  FunctionRef<at::Tensor(const at::Tensor&)>* per_leaf = nullptr;
  /// Every level lists `storages` as they are, in order (IntactRuns::canonical), and every result
  /// is defined: the result may share the operand's shape over `results`.
  bool shared_runs = false;
  /// The result's leaves get the version counter of the storage they view (LazyLeaves::shared_version).
  bool share_versions = false;

  const at::Tensor& of(const at::Tensor& operand) const {
    if (flat != nullptr) return *flat;
    for (size_t i = 0; i < storages.size(); ++i)
      if (storages[i].is_same(operand)) return results[i];
    TD_THROW(RuntimeError, "a packed result's storage is not the one its operand was found over");
  }
};

constexpr uint32_t kPerLeaf = ~uint32_t{0};  // a flat whose leaves the result makes per leaf

// `outer`: the tensordict `level` is the table of, whose batch size, device and names the result
// takes (a consolidated root keeps its names, not its table).
// `shape`: the level's, when the caller has it already.
TensorDict build_like(const TensorDictImpl& level, const TensorDictBase& outer, const ResultStorages& to,
                      bool filter_empty, bool lock, c10::intrusive_ptr<LevelShape> shape = {}) {
  // One deferred level sharing the operand's shape (Note [Shared shapes]), unless nested levels
  // without entries are to be dropped: over one storage, or over runs every level lists alike.
  if (to.flat != nullptr || to.shared_runs) {
    if (!shape) shape = shape_of(level, outer);
    if (shape && !(filter_empty && shape->has_empty_level)) {
      const at::Tensor& flat = to.flat != nullptr ? *to.flat : to.results.front();
      std::vector<at::Tensor> more;
      if (to.flat == nullptr) more.assign(to.results.begin() + 1, to.results.end());
      return TensorDict(TensorDictImpl::make_deferred(std::move(shape), flat, std::move(more), outer.batch_size(),
                                                      outer.device(), outer.dim_names(), lock, to.share_versions));
    }
  }
  LevelBuilder out(outer.batch_size(), outer.device(), level.num_entries());
  out.mark_packed_result();
  const LazyLeaves* layout = level.packed_layout();
  c10::SmallVector<uint32_t, 4> to_flat;  // per flat of the operand's level: the result's, or kPerLeaf
  if (layout != nullptr) {
    std::vector<at::Tensor> flats;
    const auto add = [&](const at::Tensor& operand) {
      const at::Tensor& result = to.of(operand);
      to_flat.push_back(result.defined() ? static_cast<uint32_t>(flats.size()) : kPerLeaf);
      if (result.defined()) flats.push_back(result);
    };
    add(layout->flat);
    for (const at::Tensor& f : layout->more_flats) add(f);
    if (!flats.empty()) out.copy_lazy(std::move(flats), *layout, to_flat, to.share_versions);
  }
  size_t record = 0;
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    const Entry& e = slot.value;
    switch (e.kind()) {
      case EntryKind::Tensor: {
        require_leaf_record(layout, slot.key);
        const auto flat = static_cast<uint32_t>(static_cast<uint64_t>(layout->records[record]) >> 32);
        if (to_flat[flat] != kPerLeaf) {
          out.append_copied_lazy(slot.key, slot.hash, *layout, record);
          break;
        }
        layout->next(record);
        TD_CHECK(to.per_leaf != nullptr, RuntimeError, "a packed result has no storage for the leaf '", slot.key, "'");
        out.append(slot.key, slot.hash, (*to.per_leaf)(level.get(slot.key).tensor()));  // makes the level's leaves
        break;
      }
      case EntryKind::TensorDict: {
        const TensorDictBase& child_outer = *e.tensordict_unchecked().impl();
        TensorDict result = build_like(operand_child(child_outer, slot.key), child_outer, to, filter_empty, lock);
        if (!filter_empty || result.num_keys() != 0) {
          if (lock) out.add_locked_child(result);
          out.append(slot.key, slot.hash, std::move(result));
        }
        break;
      }
      case EntryKind::NonTensor:
        out.append(slot.key, slot.hash, e.non_tensor());
        break;
      case EntryKind::Undefined:
        break;
    }
  });
  return out.finish_like(outer, lock);
}

}  // namespace

at::Tensor intact_packed_storage_like(const TensorDictBase& td, const TensorDictBase& like,
                                      c10::intrusive_ptr<LevelShape>* like_shape) {
  at::Tensor flat = intact_packed_storage(td);
  const TensorDictImpl *level = packed_level(td), *other = packed_level(like);
  if (!flat.defined() || other == nullptr || level == other) return flat;
  c10::intrusive_ptr<LevelShape> a = shape_of(*other, like);
  const c10::intrusive_ptr<LevelShape> b = shape_of(*level, td);
  if (!a || !b || !same_shape(*a, *b)) return at::Tensor();
  if (like_shape != nullptr) *like_shape = std::move(a);
  return flat;
}

void bump_made_leaf_versions(const TensorDictBase& td) {
  const TensorDictImpl* level = packed_level(td);
  if (level == nullptr) return;
  bump_level(*level);
}

TensorDict intact_packed_like(const TensorDictBase& like, const at::Tensor& flat, bool filter_empty, bool lock,
                              c10::intrusive_ptr<LevelShape> shape) {
  const TensorDictImpl* level = packed_level(like);
  TD_CHECK(level != nullptr, RuntimeError, "intact_packed_like: ", like.type_name(), " is not an in-memory level");
  return build_like(*level, like, ResultStorages{&flat, {}, {}}, filter_empty, lock, std::move(shape));
}

std::optional<TensorDict> intact_detached(const TensorDictBase& td, bool lock) {
  // Where LibTorch's detach() gives each leaf a counter of its own (core/detach_leaf.h).
  if (!detail::detach_direct_allowed()) return std::nullopt;
  Walk walk;
  walk.grad_mode = false;  // what grad a leaf requires, detach() drops
  const at::Tensor* flat = intact_storage(td, walk);
  if (flat != nullptr) {
    if (!walk.shared_versions) return std::nullopt;
    // Shares the storage's version counter, as each leaf's detach() shares its leaf's.
    const at::Tensor detached = flat->detach();
    const ResultStorages to{&detached, {}, {}, nullptr, false, /*share_versions=*/true};
    return build_like(*packed_level(td), td, to, /*filter_empty=*/false, lock);
  }
  // Over runs (Note [Intact runs]): one detach() a run, each leaf sharing its run's counter.
  const std::optional<IntactRuns> runs = intact_runs(td, /*any_grad=*/true);
  if (!runs || !runs->shared_versions) return std::nullopt;
  c10::SmallVector<at::Tensor, 4> detached;
  for (const at::Tensor& run : runs->storages) detached.push_back(run.detach());
  ResultStorages to{nullptr, runs->storages, detached, nullptr, runs->canonical, /*share_versions=*/true};
  return build_like(*packed_level(td), td, to, /*filter_empty=*/false, lock);
}

TensorDict intact_runs_like(const TensorDictBase& like, const IntactRuns& runs, c10::ArrayRef<at::Tensor> results,
                            FunctionRef<at::Tensor(const at::Tensor&)> per_leaf, bool filter_empty, bool lock,
                            c10::intrusive_ptr<LevelShape> shape) {
  const TensorDictImpl* level = packed_level(like);
  TD_CHECK(level != nullptr, RuntimeError, "intact_runs_like: ", like.type_name(), " is not an in-memory level");
  const bool all_defined =
      std::all_of(results.begin(), results.end(), [](const at::Tensor& r) { return r.defined(); });
  return build_like(*level, like,
                    ResultStorages{nullptr, runs.storages, results, &per_leaf, runs.canonical && all_defined},
                    filter_empty, lock, std::move(shape));
}

}  // namespace in_memory
}  // namespace tensordict
