// Unread results over packed runs (Note [Intact runs], intact_runs.h).

#include "backends/in_memory/intact_runs.h"

#include <typeinfo>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/entry.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/level_builder.h"
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

// A level shaped like `level`, its lazy leaves over `results` where level's are over `storages`.
TensorDict level_like(const TensorDictImpl& level, c10::ArrayRef<at::Tensor> storages, c10::ArrayRef<at::Tensor> results,
                      bool filter_empty, bool lock) {
  LevelBuilder out(level.batch_size(), level.device(), level.num_entries());
  out.mark_packed_result();
  const LazyLeaves* layout = level.packed_layout();  // its records, made since or not
  auto result_of = [&](const at::Tensor& flat) -> const at::Tensor& {
    for (size_t i = 0; i < storages.size(); ++i)
      if (storages[i].is_same(flat)) return results[i];
    TORCH_INTERNAL_ASSERT(false, "intact_runs_like: a storage intact_runs did not find");
  };
  if (layout != nullptr) {
    std::vector<at::Tensor> more;
    for (const at::Tensor& flat : layout->more_flats) more.push_back(result_of(flat));
    out.copy_lazy(result_of(layout->flat), *layout, std::move(more));
  }
  size_t record = 0;
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    const Entry& e = slot.value;
    switch (e.kind()) {
      case EntryKind::Tensor:
        out.append_copied_lazy(slot.key, slot.hash, record);
        break;
      case EntryKind::TensorDict: {
        TensorDict child = level_like(*packed_level(*e.tensordict_unchecked().impl()), storages, results, filter_empty, lock);
        if (!filter_empty || child.num_keys() != 0) {
          if (lock) out.add_locked_child(child);
          out.append(slot.key, slot.hash, std::move(child));
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
  return out.finish_like(level, lock);
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

TensorDict intact_runs_like(const TensorDictBase& like, c10::ArrayRef<at::Tensor> storages,
                            c10::ArrayRef<at::Tensor> results, bool filter_empty, bool lock) {
  const TensorDictImpl* level = packed_level(like);
  TD_CHECK(level != nullptr, RuntimeError, "intact_runs_like: ", like.type_name(), " is not an in-memory level");
  return level_like(*level, storages, results, filter_empty, lock);
}

}  // namespace in_memory
}  // namespace tensordict
