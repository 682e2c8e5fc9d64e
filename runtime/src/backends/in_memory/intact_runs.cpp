// Trees over a few runs, kept intact (Note [Intact runs], intact_runs.h).

#include "backends/in_memory/intact_runs.h"

#include <algorithm>
#include <cstring>
#include <typeinfo>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <tensordict/entry.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/level_shape.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "core/forward_ad.h"
#include "core/padding.h"

namespace tensordict {
namespace in_memory {

namespace {

// The index of `flat` in `storages`, added if new.
uint32_t run_index(c10::SmallVector<at::Tensor, 4>& storages, const at::Tensor& flat) {
  for (size_t i = 0; i < storages.size(); ++i)
    if (storages[i].is_same(flat)) return static_cast<uint32_t>(i);
  storages.push_back(flat);
  return static_cast<uint32_t>(storages.size() - 1);
}

// What the leaves of a tree hold in one of its storages.
struct RunHeld {
  int64_t elements = 0;
  int64_t leaves = 0;
};

struct RunsWalk {
  IntactRuns& out;
  c10::SmallVector<RunHeld, 4> held;
  bool grad_mode = at::GradMode::is_enabled();
  size_t listed = 0;  // how many flats the first level with leaves lists (IntactRuns::canonical)

  // Adds the flats a level lists; what its records number k is then storages[level_flats[first + k]].
  size_t list(const at::Tensor& flat, c10::ArrayRef<at::Tensor> more) {
    const size_t first = out.level_flats.size();
    out.level_flats.push_back(run_index(out.storages, flat));
    for (const at::Tensor& f : more) out.level_flats.push_back(run_index(out.storages, f));
    const size_t count = out.level_flats.size() - first;
    if (listed == 0) listed = count;
    for (size_t k = 0; k < count; ++k) out.canonical = out.canonical && out.level_flats[first + k] == k;
    out.canonical = out.canonical && count == listed;
    return first;
  }
  // Keeps the records of a deferred level's shape and its nested shapes: a tree over runs
  // numbers its flats alike at every level, so each level's records number the flats listed
  // from `first` (Note [Intact runs]).
  void keep_records(const LevelShape& shape, size_t first) {
    if (shape.leaves > 0) out.records.push_back(IntactRuns::LevelRecords{&shape.records, first});
    for (uint32_t i : shape.nested) keep_records(*shape.fields[i].child, first);
  }
  // Adds what a level's leaves hold in each flat it lists from `first` (its records' flat k is
  // storages[level_flats[first + k]]).
  void hold_all(size_t first, const FlatCounts& counts) {
    // A level's counts (a deferred one's: its whole shape's) name no flat past those it listed.
    TORCH_INTERNAL_ASSERT_DEBUG_ONLY(first + counts.size() <= out.level_flats.size());
    for (size_t k = 0; k < counts.size(); ++k) {
      const uint32_t at = out.level_flats[first + k];
      if (held.size() <= at) held.resize(at + 1);
      held[at].elements += counts.elements[k];
      held[at].leaves += counts.leaves[k];
    }
  }
};

// Whether `level` and its nested levels are as built, their made leaves as made; adds their
// flats to the walk and what their leaves hold in each.
bool collect_runs(const TensorDictImpl& level, RunsWalk& walk) {
  if (level.is_deferred()) {
    // An unread result: its shape holds what its leaves hold in each flat. (One storage its
    // leaves tile is intact_packed_storage's, refused below; one with padding is a run.)
    const LevelShape& shape = *level.shape();
    if (shape.tree_leaves == 0) return true;
    walk.out.shared_versions = walk.out.shared_versions && level.deferred_leaves_share_version();
    const size_t first = walk.list(level.deferred_flat(), level.deferred_more_flats());
    walk.hold_all(first, shape.tree_per_flat);
    walk.keep_records(shape, first);
    return true;
  }
  size_t tensors = 0;
  if (const LevelShape* shape = level.shape()) {
    // The level is as its shape describes (a write drops the shape): its nested levels are the
    // shape's, its tensor slots the records'.
    const TensorDictImpl::Slot* slots = level.built_slots();
    for (uint32_t i : shape->nested) {
      const TensorDictImpl* child = packed_level(*slots[i].value.tensordict_unchecked().impl());
      if (child == nullptr || !collect_runs(*child, walk)) return false;
    }
    tensors = shape->leaves;
  } else {
    bool ok = true;
    level.for_each_slot([&](const TensorDictImpl::Slot& slot) {
      if (!ok) return;
      if (slot.value.is_tensor()) {
        ++tensors;
      } else if (slot.value.is_tensordict()) {
        const TensorDictImpl* child = packed_level(*slot.value.tensordict_unchecked().impl());
        ok = child != nullptr && collect_runs(*child, walk);
      }
    });
    if (!ok) return false;
  }
  if (tensors == 0) return true;
  const LazyLeaves* layout = level.packed_layout();
  if (layout == nullptr || tensors != layout->leaves) return false;
  walk.out.shared_versions = walk.out.shared_versions && !layout->own_versions();
  if (level.unmade_leaves() == nullptr) {
    // Views autograd knows share their flat's version counter; others have their own.
    walk.out.own_versions = walk.out.own_versions || layout->own_versions();
    if (!made_leaves_intact(level, *layout, walk.grad_mode)) return false;
  }
  const size_t first = walk.list(layout->flat, layout->more_flats);
  walk.hold_all(first, layout->per_flat);
  walk.out.records.push_back(IntactRuns::LevelRecords{&layout->records, first});
  return true;
}

// intact_runs into `runs` (a new IntactRuns), false for nullopt: filled in place, as an
// IntactRuns is large to move.
bool find_intact_runs(const TensorDictBase& td, IntactRuns& runs, bool any_grad) {
  const TensorDictImpl* level = packed_level(td);
  if (level == nullptr || detail::forward_ad_open()) return false;
  // A consolidated root holds every leaf of its storage: its padding is nobody's.
  const bool consolidated_root = typeid(td) != typeid(TensorDictImpl);
  RunsWalk walk{runs, {}};
  walk.grad_mode = walk.grad_mode && !any_grad;
  if (!collect_runs(*level, walk) || runs.storages.empty()) return false;
  runs.canonical = runs.canonical && walk.listed == runs.storages.size();
  walk.held.resize(runs.storages.size());  // a flat a level lists but no leaf views holds nothing
  for (size_t i = 0; i < runs.storages.size(); ++i) {
    const at::Tensor& flat = runs.storages[i];
    const bool padded_ok = detail::may_read_padding(flat.scalar_type());
    // The leaves cover their flats but for padding: less than 8 bytes a leaf, and only in
    // floating or complex ones (Note [Packed runs]). More is another tree's bytes (the nested
    // level of a result, whose parent's leaves hold the rest): an op over it would compute, and
    // keep, all of them.
    const int64_t gap = flat.numel() - walk.held[i].elements;
    if (flat.dim() != 1 || gap < 0 || (!padded_ok && gap != 0) ||
        gap * static_cast<int64_t>(flat.element_size()) >= 8 * walk.held[i].leaves)
      return false;
    // The padding of a nested level's runs may be a sibling's small leaf.
    runs.writable = runs.writable && (gap == 0 || consolidated_root);
    runs.exact = runs.exact && gap == 0;
  }
  // One storage its leaves tile from its start is intact_packed_storage's.
  if (runs.storages.size() == 1 && runs.storages[0].storage_offset() == 0 && walk.held[0].elements == runs.storages[0].numel())
    return false;
  return true;
}

}  // namespace

std::optional<IntactRuns> intact_runs(const TensorDictBase& td, bool any_grad) {
  IntactRuns runs;
  if (!find_intact_runs(td, runs, any_grad)) return std::nullopt;
  return runs;
}

void leaf_spans(const IntactRuns& runs, c10::SmallVector<LeafSpan, 32>& out) {
  for (const IntactRuns::LevelRecords& level : runs.records) {
    const int64_t* at = level.records->data();
    for (const int64_t* const end = at + level.records->size(); at != end;) {
      const LazyLeaves::Record r = LazyLeaves::read(at);
      out.push_back(LeafSpan{runs.level_flats[level.first + r.storage], r.offset, r.offset + c10::multiply_integers(r.sizes)});
    }
  }
}

bool KeptPadding::keep(const TensorDictBase& td, const IntactRuns& runs) {
  if (typeid(td) == typeid(TensorDictImpl)) return false;
  c10::SmallVector<LeafSpan, 32> spans;
  leaf_spans(runs, spans);
  std::sort(spans.begin(), spans.end(),
            [](const LeafSpan& x, const LeafSpan& y) { return x.run != y.run ? x.run < y.run : x.begin < y.begin; });
  size_t s = 0;
  for (uint32_t r = 0; r < runs.storages.size(); ++r) {
    const at::Tensor& flat = runs.storages[r];
    const auto item = static_cast<int64_t>(flat.element_size());
    char* base = nullptr;
    int64_t covered = 0;  // elements from the run's start held by the leaves so far
    for (;; ++s) {
      const bool last = s == spans.size() || spans[s].run != r;
      const int64_t next = last ? flat.numel() : spans[s].begin;
      if (next > covered) {
        const int64_t bytes = (next - covered) * item;
        if (!flat.is_cpu() || bytes >= 8) return false;  // Python's padding is under 8 bytes a leaf
        if (base == nullptr) base = static_cast<char*>(flat.data_ptr());
        Gap gap{base + covered * item, static_cast<uint8_t>(bytes), {}};
        std::memcpy(gap.bytes, gap.at, static_cast<size_t>(bytes));
        gaps_.push_back(gap);
      }
      if (last) break;
      covered = std::max(covered, spans[s].end);
    }
  }
  return true;
}

KeptPadding::~KeptPadding() {
  for (const Gap& gap : gaps_) std::memcpy(gap.at, gap.bytes, gap.size);
}

bool runs_laid_out_alike(const TensorDictBase& a, const IntactRuns& ra, const TensorDictBase& b, const IntactRuns& rb,
                         c10::intrusive_ptr<LevelShape>* a_shape) {
  // Trees that list their runs alike at every level (IntactRuns::canonical) number them alike
  // whether a level is built or deferred; others compare level by level.
  if (ra.storages.size() != rb.storages.size() || a.batch_size() != b.batch_size() ||
      !((ra.canonical && rb.canonical) || ra.level_flats == rb.level_flats))
    return false;
  for (size_t i = 0; i < ra.storages.size(); ++i) {
    if (ra.storages[i].numel() != rb.storages[i].numel()) return false;  // records count from a flat's start
  }
  const TensorDictImpl *la = packed_level(a), *lb = packed_level(b);
  if (la == lb) return true;
  c10::intrusive_ptr<LevelShape> sa = shape_of(*la, a);
  const c10::intrusive_ptr<LevelShape> sb = shape_of(*lb, b);
  if (!sa || !sb || !same_shape(*sa, *sb)) return false;
  if (a_shape != nullptr) *a_shape = std::move(sa);
  return true;
}

bool partners_laid_out_alike(const TensorDictBase& a, const IntactRuns& ra, c10::ArrayRef<const TensorDictBase*> partners,
                             c10::SmallVector<IntactRuns, 2>& out, c10::intrusive_ptr<LevelShape>* a_shape) {
  for (const TensorDictBase* b : partners) {
    const bool first = out.empty();
    out.emplace_back();
    if (!find_intact_runs(*b, out.back(), false) || !runs_laid_out_alike(a, ra, *b, out.back(), first ? a_shape : nullptr))
      return false;
  }
  return true;
}

}  // namespace in_memory
}  // namespace tensordict
