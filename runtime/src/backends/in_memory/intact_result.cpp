#include "backends/in_memory/intact_result.h"

#include <string>
#include <typeinfo>
#include <utility>

#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "backends/in_memory/level_builder.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "backends/table_backend.h"

namespace tensordict {
namespace in_memory {

namespace {

// The level when it is an in-memory level built as a packed op's result (or the table of a
// consolidated root whose leaves were laid out so), else nullptr: what every other tensordict
// costs here (typeid of a final class and a flag; a dynamic_cast for other backends).
const TensorDictImpl* packed_result_level(const TensorDictBase& td) {
  const TensorDictBase* level = &td;
  if (typeid(td) != typeid(TensorDictImpl)) {
    const auto* table = dynamic_cast<const TableBackend*>(&td);
    if (table == nullptr) return nullptr;
    level = &table->table();
    if (typeid(*level) != typeid(TensorDictImpl)) return nullptr;
  }
  const auto* impl = static_cast<const TensorDictImpl*>(level);
  return impl->is_packed_result() ? impl : nullptr;
}

// Sizes and strides against a record, in one loop: IntArrayRef's operator== goes through memcmp,
// most of this check's cost on leaves of two or three dims.
bool same_geometry(const c10::TensorImpl& t, const LazyLeaves::Record& r) {
  const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
  if (sizes.size() != r.sizes.size()) return false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != r.sizes[d] || strides[d] != r.strides[d]) return false;
  }
  return true;
}

// Whether the made leaves of `level` are still the views `layout` made (Note [Intact results]).
bool leaves_as_made(const TensorDictImpl& level, const LazyLeaves& layout) {
  const c10::StorageImpl* storage = layout.flat.storage().unsafeGetStorageImpl();
  const caffe2::TypeMeta dtype = layout.flat.dtype();
  for (size_t i = 0; i < layout.records.size();) {
    const LazyLeaves::Record r = layout.next(i);
    const Entry& e = level.slot_at(r.slot).value;
    if (!e.is_tensor() || !e.tensor_unchecked().defined()) return false;
    const c10::TensorImpl* t = e.tensor_unchecked().unsafeGetTensorImpl();
    // The key set covers names, lazy negation and conjugation; autograd metadata is there for
    // views autograd knows, which must not require grad.
    if (t->key_set() != layout.made_keys || t->dtype() != dtype || t->storage().unsafeGetStorageImpl() != storage ||
        t->storage_offset() != r.offset || !same_geometry(*t, r) ||
        (t->autograd_meta() != nullptr && t->requires_grad()))
      return false;
  }
  return true;
}

// What all_intact() gathers over a tree: the storage (the first level's), the elements of every
// leaf, and whether a made leaf has a version counter of its own.
struct Walk {
  const at::Tensor* flat = nullptr;
  int64_t elements = 0;
  bool own_versions = false;
};

// Whether `level` and its nested levels are intact, all over one storage. No lock: the records
// and the slots' kinds never change while other threads read (a write is not concurrent with
// reads), and a made leaf is read only after the release that published it (unmade_leaves()).
bool all_intact(const TensorDictImpl& level, Walk& walk) {
  size_t tensors = 0;
  bool intact = true;
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    const Entry& e = slot.value;
    if (!intact) return;
    if (e.is_tensor()) {
      ++tensors;
    } else if (e.is_tensordict()) {
      const TensorDictImpl* child = packed_result_level(*e.tensordict_unchecked().impl());
      intact = child != nullptr && all_intact(*child, walk);
    }
  });
  const LazyLeaves* layout = level.packed_layout();
  if (!intact || layout == nullptr) return intact && tensors == 0;
  if (tensors != layout->leaves) return false;
  if (walk.flat == nullptr) walk.flat = &layout->flat;
  else if (!walk.flat->is_same(layout->flat)) return false;
  walk.elements += layout->elements;
  if (level.unmade_leaves() != nullptr) return true;
  // Views autograd knows share the storage's version counter.
  walk.own_versions = walk.own_versions || !layout->autograd_views;
  return leaves_as_made(level, *layout);
}

void bump_level(const TensorDictImpl& level) {
  const LazyLeaves* layout = level.packed_layout();
  // Views autograd knows share the storage's version counter, which the op bumps itself.
  if (layout != nullptr && level.unmade_leaves() == nullptr && !layout->autograd_views) {
    for (size_t i = 0; i < layout->records.size();) {
      const LazyLeaves::Record r = layout->next(i);
      level.slot_at(r.slot).value.tensor_unchecked().unsafeGetTensorImpl()->bump_version();
    }
  }
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    if (!slot.value.is_tensordict()) return;
    if (const TensorDictImpl* child = packed_result_level(*slot.value.tensordict_unchecked().impl())) bump_level(*child);
  });
}

// Two intact levels (no tombstones: a level erased from is no longer a packed result).
bool same_level(const TensorDictImpl& a, const TensorDictImpl& b) {
  if (&a == &b) return true;
  if (a.num_entries() != b.num_entries() || a.batch_size() != b.batch_size()) return false;
  const LazyLeaves *la = a.packed_layout(), *lb = b.packed_layout();
  if ((la == nullptr) != (lb == nullptr) || (la != nullptr && la->records != lb->records)) return false;
  for (size_t i = 0, n = a.num_entries(); i < n; ++i) {
    const TensorDictImpl::Slot &x = a.slot_at(i), &y = b.slot_at(i);
    if (x.hash != y.hash || x.value.kind() != y.value.kind() || !key_equals(x.key, y.key)) return false;
    if (x.value.is_tensordict()) {
      const TensorDictImpl* cx = packed_result_level(*x.value.tensordict_unchecked().impl());
      const TensorDictImpl* cy = packed_result_level(*y.value.tensordict_unchecked().impl());
      if (cx == nullptr || cy == nullptr || !same_level(*cx, *cy)) return false;
    }
  }
  return true;
}

// `outer`: the tensordict `level` is the table of, whose batch size, device and names the result
// takes (a consolidated root keeps its names, not its table).
TensorDict build_like(const TensorDictImpl& level, const TensorDictBase& outer, const at::Tensor& flat,
                      bool filter_empty, bool lock) {
  LevelBuilder out(outer.batch_size(), outer.device(), level.num_entries());
  out.mark_packed_result();
  const LazyLeaves* layout = level.packed_layout();
  if (layout != nullptr) out.copy_lazy(flat, *layout);
  size_t record = 0;
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    const Entry& e = slot.value;
    switch (e.kind()) {
      case EntryKind::Tensor:
        TD_CHECK(layout != nullptr, RuntimeError, "the leaf '", slot.key,
                 "' of an elementwise operation's operand was written while the operation read it");
        out.append_copied_lazy(slot.key, slot.hash, record);
        break;
      case EntryKind::TensorDict: {
        const TensorDictImpl* child = packed_result_level(*e.tensordict_unchecked().impl());
        TD_CHECK(child != nullptr, RuntimeError, "the nested tensordict '", slot.key,
                 "' of an elementwise operation's operand was replaced while the operation read it");
        TensorDict result = build_like(*child, *e.tensordict_unchecked().impl(), flat, filter_empty, lock);
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

at::Tensor intact_packed_storage(const TensorDictBase& td, bool* own_versions) {
  const TensorDictImpl* level = packed_result_level(td);
  if (level == nullptr) return at::Tensor();
  Walk walk;
  if (!all_intact(*level, walk) || walk.flat == nullptr) return at::Tensor();
  // A nested level of a result is intact too, but its leaves cover only part of the storage.
  if (walk.elements != walk.flat->numel()) return at::Tensor();
  if (own_versions != nullptr) *own_versions = walk.own_versions;
  return *walk.flat;
}

void bump_made_leaf_versions(const TensorDictBase& td) {
  const TensorDictImpl* level = packed_result_level(td);
  if (level == nullptr) return;
  bump_level(*level);
}

bool same_intact_layout(const TensorDictBase& a, const TensorDictBase& b) {
  const TensorDictImpl *x = packed_result_level(a), *y = packed_result_level(b);
  if (x == nullptr || y == nullptr) return false;
  return same_level(*x, *y);
}

TensorDict intact_packed_like(const TensorDictBase& like, const at::Tensor& flat, bool filter_empty, bool lock) {
  const TensorDictImpl* level = packed_result_level(like);
  TD_CHECK(level != nullptr, RuntimeError, "intact_packed_like: ", like.type_name(), " is not an in-memory level");
  return build_like(*level, like, flat, filter_empty, lock);
}

}  // namespace in_memory
}  // namespace tensordict
