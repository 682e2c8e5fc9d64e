#include "backends/in_memory/unread_result.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <typeinfo>
#include <utility>

#include <c10/util/SmallVector.h>
#include <c10/util/accumulate.h>

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

// (storage offset, elements) of each leaf, in elements of the storage's dtype.
using Spans = c10::SmallVector<std::pair<int64_t, int64_t>, 32>;

// Whether `level` and its nested levels hold only unmade leaves, all of one `flat` (the first
// level's, set here), adding where each lies to `spans`: under lazy_mutex().
bool all_unmade(const TensorDictImpl& level, const at::Tensor*& flat, Spans& spans) {
  const LazyLeaves* lazy = level.unmade_leaves();
  if (lazy != nullptr) {
    if (flat == nullptr) flat = &lazy->flat;
    else if (!flat->is_same(lazy->flat)) return false;
    for (size_t i = 0; i < lazy->records.size();) {
      const LazyLeaves::Record r = lazy->next(i);  // a packed op's leaves are contiguous
      spans.emplace_back(r.offset, c10::multiply_integers(r.sizes));
    }
  }
  bool unmade = true;
  level.for_each_unmade([&](const TensorDictImpl::Slot& slot) {
    const Entry& e = slot.value;
    if (!unmade) return;
    if (e.is_tensor()) {
      unmade = lazy != nullptr && !e.tensor_unchecked().defined();
    } else if (e.is_tensordict()) {
      const TensorDictImpl* child = packed_result_level(*e.tensordict_unchecked().impl());
      unmade = child != nullptr && all_unmade(*child, flat, spans);
    }
  });
  return unmade;
}

bool same_level(const TensorDictImpl& a, const TensorDictImpl& b) {
  if (&a == &b) return true;
  if (a.num_entries() != b.num_entries() || a.batch_size() != b.batch_size()) return false;
  const LazyLeaves *la = a.unmade_leaves(), *lb = b.unmade_leaves();
  if ((la == nullptr) != (lb == nullptr) || (la != nullptr && la->records != lb->records)) return false;
  c10::SmallVector<std::pair<const std::string*, const Entry*>, 16> theirs;
  b.for_each_unmade([&](const TensorDictImpl::Slot& slot) { theirs.emplace_back(&slot.key, &slot.value); });
  size_t i = 0;
  bool same = true;
  a.for_each_unmade([&](const TensorDictImpl::Slot& slot) {
    const std::string& key = slot.key;
    const Entry& e = slot.value;
    if (!same) return;
    const auto& [their_key, their_entry] = theirs[i++];
    same = key == *their_key && e.kind() == their_entry->kind();
    if (same && e.is_tensordict()) {
      const TensorDictImpl* x = packed_result_level(*e.tensordict_unchecked().impl());
      const TensorDictImpl* y = packed_result_level(*their_entry->tensordict_unchecked().impl());
      same = x != nullptr && y != nullptr && same_level(*x, *y);
    }
  });
  return same;
}

// `outer`: the tensordict `level` is the table of, whose batch size, device and names the result
// takes (a consolidated root keeps its names, not its table).
TensorDict build_like(const TensorDictImpl& level, const TensorDictBase& outer, const at::Tensor& flat,
                      bool filter_empty) {
  LevelBuilder out(outer.batch_size(), outer.device(), level.num_entries());
  out.mark_packed_result();
  const LazyLeaves* lazy = level.unmade_leaves();
  if (lazy != nullptr) out.copy_lazy(flat, *lazy);
  size_t record = 0;
  level.for_each_unmade([&](const TensorDictImpl::Slot& slot) {
    const Entry& e = slot.value;
    switch (e.kind()) {
      case EntryKind::Tensor:
        // Made by another reader since the caller checked (then all of them are): the same
        // layout, read from the leaf.
        if (e.tensor_unchecked().defined()) out.append_lazy(slot.key, flat, e.tensor_unchecked());
        else if (lazy != nullptr) out.append_copied_lazy(slot.key, slot.hash, record);
        else TD_THROW(RuntimeError, "the leaf '", slot.key, "' of an elementwise operation's operand is undefined");
        break;
      case EntryKind::TensorDict: {
        const TensorDictImpl* child = packed_result_level(*e.tensordict_unchecked().impl());
        TD_CHECK(child != nullptr, RuntimeError, "the nested tensordict '", slot.key,
                 "' of an elementwise operation's operand was replaced while the operation read it");
        TensorDict result = build_like(*child, *e.tensordict_unchecked().impl(), flat, filter_empty);
        if (!filter_empty || result.num_keys() != 0) out.append(slot.key, slot.hash, std::move(result));
        break;
      }
      case EntryKind::NonTensor:
        out.append(slot.key, slot.hash, e.non_tensor());
        break;
      case EntryKind::Undefined:
        break;
    }
  });
  TensorDict result = out.finish();
  if (C10_UNLIKELY(!outer.dim_names().empty())) result.impl()->set_dim_names(outer.dim_names());
  return result;
}

}  // namespace

at::Tensor unread_packed_storage(const TensorDictBase& td) {
  const TensorDictImpl* level = packed_result_level(td);
  if (level == nullptr) return at::Tensor();
  if (!level->has_lazy_leaves() && level->has_tensor_entry()) return at::Tensor();  // made: no lock needed
  std::lock_guard<std::recursive_mutex> guard(TensorDictImpl::lazy_mutex());
  const at::Tensor* flat = nullptr;
  Spans spans;
  if (!all_unmade(*level, flat, spans) || flat == nullptr) return at::Tensor();
  // The leaves must tile the storage, each element in one leaf: a root holding only nested levels
  // may have lost one (erased or replaced) or hold one twice (shared), or both at once.
  if (!std::is_sorted(spans.begin(), spans.end())) std::sort(spans.begin(), spans.end());
  int64_t end = 0;
  for (const auto& [offset, numel] : spans) {
    if (offset != end) return at::Tensor();
    end += numel;
  }
  return end == flat->numel() ? *flat : at::Tensor();
}

bool same_unread_layout(const TensorDictBase& a, const TensorDictBase& b) {
  const TensorDictImpl *x = packed_result_level(a), *y = packed_result_level(b);
  if (x == nullptr || y == nullptr) return false;
  std::lock_guard<std::recursive_mutex> guard(TensorDictImpl::lazy_mutex());
  return same_level(*x, *y);
}

TensorDict unread_packed_like(const TensorDictBase& like, const at::Tensor& flat, bool filter_empty) {
  const TensorDictImpl* level = packed_result_level(like);
  TD_CHECK(level != nullptr, RuntimeError, "unread_packed_like: ", like.type_name(), " is not an in-memory level");
  // Held while building: the new levels get their leaves unmade, which takes no lock.
  std::lock_guard<std::recursive_mutex> guard(TensorDictImpl::lazy_mutex());
  return build_like(*level, like, flat, filter_empty);
}

}  // namespace in_memory
}  // namespace tensordict
