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

// Whether `level` and its nested levels are as built with their leaves unmade; adds their
// storages to `storages` and the elements their leaves hold in each to `elements`.
bool collect(const TensorDictImpl& level, Storages& storages, std::vector<int64_t>& elements) {
  if (level.is_deferred()) return false;  // a one-storage result's shape: intact_packed_storage's
  size_t tensors = 0;
  bool ok = true;
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    if (!ok) return;
    if (slot.value.is_tensor()) {
      ++tensors;
    } else if (slot.value.is_tensordict()) {
      const TensorDictImpl* child = packed_level(*slot.value.tensordict_unchecked().impl());
      ok = child != nullptr && collect(*child, storages, elements);
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
    if (elements.size() <= at) elements.resize(at + 1, 0);
    elements[at] += c10::multiply_integers(r.sizes);
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
  std::vector<int64_t> elements;
  if (!collect(*level, storages, elements) || storages.empty()) return std::nullopt;
  for (size_t i = 0; i < storages.size(); ++i) {
    const at::Tensor& flat = storages[i];
    const bool padded_ok = at::isFloatingType(flat.scalar_type()) || at::isComplexType(flat.scalar_type());
    // Integer and bool storages hold leaf elements only (Note [Packed runs]: no run of theirs
    // covers padding); anything else is not a result this path made.
    if (flat.dim() != 1 || flat.storage_offset() != 0 || elements[i] > flat.numel() ||
        (!padded_ok && elements[i] != flat.numel()))
      return std::nullopt;
  }
  return storages;
}

}  // namespace in_memory
}  // namespace tensordict
