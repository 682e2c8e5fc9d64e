// Unread results over packed runs (Note [Intact runs], intact_runs.h).

#include "backends/in_memory/intact_runs.h"

#include <typeinfo>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/entry.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "core/forward_ad.h"

namespace tensordict {
namespace in_memory {

namespace {

using Storages = c10::SmallVector<at::Tensor, 4>;

// The index of `flat` in `storages`, added if new.
size_t index_of(Storages& storages, const at::Tensor& flat) {
  for (size_t i = 0; i < storages.size(); ++i)
    if (storages[i].is_same(flat)) return i;
  storages.push_back(flat);
  return storages.size() - 1;
}

// What the leaves of a tree hold in one of its storages.
struct Held {
  int64_t elements = 0;
  int64_t leaves = 0;
};

// Whether `level` and its nested levels are as built with their leaves unmade; adds their
// storages to `storages` and what their leaves hold in each to `held`.
bool collect(const TensorDictImpl& level, Storages& storages, std::vector<Held>& held) {
  if (level.is_deferred()) return false;  // a one-storage result's shape: intact_packed_storage's
  size_t tensors = 0;
  bool ok = true;
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    if (!ok) return;
    if (slot.value.is_tensor()) {
      ++tensors;
    } else if (slot.value.is_tensordict()) {
      const TensorDictImpl* child = packed_level(*slot.value.tensordict_unchecked().impl());
      ok = child != nullptr && collect(*child, storages, held);
    }
  });
  if (!ok) return false;
  if (tensors == 0) return true;
  const LazyLeaves* layout = level.packed_layout();
  if (layout == nullptr || level.unmade_leaves() == nullptr || tensors != layout->leaves || layout->autograd_views)
    return false;
  for (size_t i = 0; i < layout->records.size();) {
    const LazyLeaves::Record r = layout->next(i);
    const size_t at = index_of(storages, layout->flat_of(r));
    if (held.size() <= at) held.resize(at + 1);
    held[at].elements += c10::multiply_integers(r.sizes);
    ++held[at].leaves;
  }
  return true;
}

}  // namespace

std::optional<Storages> intact_runs(const TensorDictBase& td) {
  // A plain in-memory root only (a consolidated root's table is a one-storage intact result).
  if (typeid(td) != typeid(TensorDictImpl)) return std::nullopt;
  const TensorDictImpl* level = packed_level(td);
  if (level == nullptr || detail::forward_ad_open()) return std::nullopt;
  Storages storages;
  std::vector<Held> held;
  if (!collect(*level, storages, held) || storages.empty()) return std::nullopt;
  for (size_t i = 0; i < storages.size(); ++i) {
    const at::Tensor& flat = storages[i];
    const bool padded_ok = at::isFloatingType(flat.scalar_type()) || at::isComplexType(flat.scalar_type());
    // The leaves cover their storages but for padding: less than 8 bytes a leaf, and only in
    // floating or complex storages (Note [Packed runs]). More is another tree's bytes (the
    // nested level of a result, whose parent's leaves hold the rest): an op over it would
    // compute, and keep, all of them.
    const int64_t gap = flat.numel() - held[i].elements;
    if (flat.dim() != 1 || flat.storage_offset() != 0 || gap < 0 || (!padded_ok && gap != 0) ||
        gap * static_cast<int64_t>(flat.element_size()) >= 8 * held[i].leaves)
      return std::nullopt;
  }
  return storages;
}

}  // namespace in_memory
}  // namespace tensordict
