// Trees over a few runs, kept intact (Note [Intact runs], intact_runs.h).

#include "backends/in_memory/intact_runs.h"

#include <typeinfo>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <tensordict/entry.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/level_shape.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "core/forward_ad.h"

namespace tensordict {
namespace in_memory {

namespace {

// The index of `flat` in `storages`, added if new.
uint32_t index_of(c10::SmallVector<at::Tensor, 4>& storages, const at::Tensor& flat) {
  for (size_t i = 0; i < storages.size(); ++i)
    if (storages[i].is_same(flat)) return static_cast<uint32_t>(i);
  storages.push_back(flat);
  return static_cast<uint32_t>(storages.size() - 1);
}

// What the leaves of a tree hold in one of its storages.
struct Held {
  int64_t elements = 0;
  int64_t leaves = 0;
};

struct Walk {
  IntactRuns& out;
  std::vector<Held> held;
  bool grad_mode = at::GradMode::is_enabled();
};

// Whether `level` and its nested levels are as built, their made leaves as made; adds their
// flats to the walk and what their leaves hold in each.
bool collect(const TensorDictImpl& level, Walk& walk) {
  if (level.is_deferred()) return false;  // a one-storage result's shape: intact_packed_storage's
  size_t tensors = 0;
  bool ok = true;
  level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
    if (!ok) return;
    if (slot.value.is_tensor()) {
      ++tensors;
    } else if (slot.value.is_tensordict()) {
      const TensorDictImpl* child = packed_level(*slot.value.tensordict_unchecked().impl());
      ok = child != nullptr && collect(*child, walk);
    }
  });
  if (!ok) return false;
  if (tensors == 0) return true;
  const LazyLeaves* layout = level.packed_layout();
  if (layout == nullptr || tensors != layout->leaves) return false;
  if (level.unmade_leaves() == nullptr) {
    // Views autograd knows share their flat's version counter; others have their own.
    walk.out.own_versions = walk.out.own_versions || !layout->autograd_views;
    if (!made_leaves_intact(level, *layout, walk.grad_mode)) return false;
  }
  const size_t first = walk.out.level_flats.size();
  walk.out.level_flats.push_back(index_of(walk.out.storages, layout->flat));
  for (const at::Tensor& f : layout->more_flats) walk.out.level_flats.push_back(index_of(walk.out.storages, f));
  for (size_t i = 0; i < layout->records.size();) {
    const LazyLeaves::Record r = layout->next(i);
    const uint32_t at = walk.out.level_flats[first + r.storage];
    if (walk.held.size() <= at) walk.held.resize(at + 1);
    walk.held[at].elements += c10::multiply_integers(r.sizes);
    ++walk.held[at].leaves;
  }
  return true;
}

}  // namespace

std::optional<IntactRuns> intact_runs(const TensorDictBase& td) {
  const TensorDictImpl* level = packed_level(td);
  if (level == nullptr || detail::forward_ad_open()) return std::nullopt;
  IntactRuns runs;
  Walk walk{runs, {}};
  if (!collect(*level, walk) || runs.storages.empty()) return std::nullopt;
  // A consolidated root holds every leaf of its storage: its padding is nobody's.
  const bool consolidated_root = typeid(td) != typeid(TensorDictImpl);
  for (size_t i = 0; i < runs.storages.size(); ++i) {
    const at::Tensor& flat = runs.storages[i];
    const bool padded_ok = at::isFloatingType(flat.scalar_type()) || at::isComplexType(flat.scalar_type());
    // The leaves cover their flats but for padding: less than 8 bytes a leaf, and only in
    // floating or complex ones (Note [Packed runs]). More is another tree's bytes (the nested
    // level of a result, whose parent's leaves hold the rest): an op over it would compute, and
    // keep, all of them.
    const int64_t gap = flat.numel() - walk.held[i].elements;
    if (flat.dim() != 1 || gap < 0 || (!padded_ok && gap != 0) ||
        gap * static_cast<int64_t>(flat.element_size()) >= 8 * walk.held[i].leaves)
      return std::nullopt;
    // The padding of a nested level's runs may be a sibling's small leaf.
    runs.writable = runs.writable && (gap == 0 || consolidated_root);
  }
  // One storage its leaves tile from its start is intact_packed_storage's.
  if (runs.storages.size() == 1 && runs.storages[0].storage_offset() == 0 && walk.held[0].elements == runs.storages[0].numel())
    return std::nullopt;
  return runs;
}

bool runs_laid_out_alike(const TensorDictBase& a, const IntactRuns& ra, const TensorDictBase& b, const IntactRuns& rb) {
  if (ra.storages.size() != rb.storages.size() || ra.level_flats != rb.level_flats ||
      a.batch_size() != b.batch_size())
    return false;
  for (size_t i = 0; i < ra.storages.size(); ++i) {
    const at::Tensor &x = ra.storages[i], &y = rb.storages[i];
    if (x.numel() != y.numel() || x.storage_offset() != y.storage_offset()) return false;
  }
  const TensorDictImpl *la = packed_level(a), *lb = packed_level(b);
  if (la == lb) return true;
  const c10::intrusive_ptr<LevelShape> sa = shape_of(*la, a), sb = shape_of(*lb, b);
  return sa && sb && same_shape(*sa, *sb);
}

}  // namespace in_memory
}  // namespace tensordict
