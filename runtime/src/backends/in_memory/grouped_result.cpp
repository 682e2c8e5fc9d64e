#include "backends/in_memory/grouped_result.h"

#include <tensordict/errors.h>

#include <algorithm>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>  // GRAIN_SIZE
#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/SmallVector.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/intact_runs.h"
#include "backends/in_memory/lazy_leaves.h"
#include "backends/in_memory/level_shape.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "core/structure_walk.h"
#include "core/strided_view.h"

namespace tensordict {
namespace in_memory {

namespace {

// Kept per operand shape: more reductions than this of one tree make their result shape each time.
constexpr size_t kMaxDerivedShapes = 8;

// fn(record, level batch dims) for every leaf of the tree `shape` describes, in the walk order
// of GroupPlan.
template <typename Fn>
void for_each_record(const LevelShape& shape, Fn&& fn) {
  const int64_t* r = shape.records.data();
  const int64_t* end = r + shape.records.size();
  const auto level_dims = static_cast<int64_t>(shape.batch_size.size());
  while (r != end) fn(LazyLeaves::read(r), level_dims);
  for (uint32_t i : shape.nested) for_each_record(*shape.fields[i].child, fn);
}

// The groups of the leaves `shape` describes; null when a leaf cannot group (no dims, no
// elements, or other than the standard strides).
std::shared_ptr<const GroupPlan> make_plan(const LevelShape& shape) {
  struct Leaf {
    uint32_t storage;
    int64_t level_dims;
    int64_t offset;
    c10::IntArrayRef sizes, strides;
    uint32_t index;
  };
  std::vector<Leaf> leaves;
  leaves.reserve(shape.tree_leaves);
  bool usable = true;
  for_each_record(shape, [&](const LazyLeaves::Record& r, int64_t level_dims) {
    if (r.sizes.empty() || c10::multiply_integers(r.sizes) == 0 || !detail::has_standard_strides(r.sizes, r.strides))
      usable = false;
    leaves.push_back(Leaf{r.storage, level_dims, r.offset, r.sizes, r.strides, static_cast<uint32_t>(leaves.size())});
  });
  if (!usable || leaves.empty()) return nullptr;
  // A group's leaves share their storage, shape and level batch dims (an op over the features
  // reads where they start).
  const auto alike = [](const Leaf& a, const Leaf& b) {
    return a.storage == b.storage && a.level_dims == b.level_dims && a.sizes == b.sizes;
  };
  std::sort(leaves.begin(), leaves.end(), [](const Leaf& a, const Leaf& b) {
    if (a.storage != b.storage) return a.storage < b.storage;
    if (a.level_dims != b.level_dims) return a.level_dims < b.level_dims;
    if (a.sizes != b.sizes)
      return std::lexicographical_compare(a.sizes.begin(), a.sizes.end(), b.sizes.begin(), b.sizes.end());
    return a.offset < b.offset;
  });
  auto plan = std::make_shared<GroupPlan>();
  plan->group_of.resize(leaves.size());
  plan->place.resize(leaves.size());
  for (size_t i = 0; i < leaves.size();) {
    GroupPlan::Group g;
    g.storage = leaves[i].storage;
    g.level_dims = leaves[i].level_dims;
    g.offset = leaves[i].offset;
    g.count = 1;
    g.sizes = leaves[i].sizes.vec();
    g.strides = leaves[i].strides.vec();
    g.numel = c10::multiply_integers(g.sizes);
    g.spacing = g.numel;  // a group of one: the view's standard stride
    size_t j = i + 1;
    for (; j < leaves.size() && alike(leaves[j], leaves[i]); ++j) {
      const int64_t step = leaves[j].offset - leaves[j - 1].offset;
      if (step <= 0 || (g.count > 1 && step != g.spacing)) break;
      g.spacing = step;
      ++g.count;
    }
    const auto index = static_cast<uint32_t>(plan->groups.size());
    for (size_t k = i; k < j; ++k) {
      plan->group_of[leaves[k].index] = index;
      plan->place[leaves[k].index] = static_cast<uint32_t>(k - i);
    }
    plan->groups.push_back(std::move(g));
    i = j;
  }
  return plan;
}

std::shared_ptr<const GroupPlan> plan_of(const LevelShape& shape) {
  std::lock_guard<std::mutex> guard(shape.derived_mutex);
  if (!shape.plan_made) {
    shape.group_plan = make_plan(shape);
    shape.plan_made = true;
  }
  return shape.group_plan;
}

// What a result's shape is made from: the groups, the sizes of each group's entries, and the
// root's batch size before and after.
struct Derivation {
  const GroupPlan& plan;
  std::vector<std::vector<int64_t>> entry_sizes, entry_strides;  // per group
  std::vector<int64_t> entry_numel;
  const GroupedResult& how;
  size_t old_root_dims;

  std::vector<int64_t> batch_of(c10::IntArrayRef level_batch) const {
    if (!how.nested_extra_dims) return how.root.vec();
    const BatchSize batch = detail::nested_batch(how.root, level_batch, old_root_dims);
    return std::vector<int64_t>(batch.begin(), batch.end());
  }
};

// The result's shape for the level `shape` describes; `leaf` counts the leaves in walk order.
c10::intrusive_ptr<LevelShape> derive(const LevelShape& shape, const Derivation& d, size_t& leaf) {
  auto out = c10::make_intrusive<LevelShape>();
  out->batch_size = d.batch_of(shape.batch_size);
  out->device = shape.device;
  if (out->batch_size == shape.batch_size) out->names = shape.names;  // as rebuild(): names stay with the batch size
  out->over_runs = d.plan.groups.size() > 1;
  out->has_empty_level = shape.has_empty_level;
  out->has_non_tensor_stack = shape.has_non_tensor_stack;
  const int64_t* r = shape.records.data();
  const int64_t* end = r + shape.records.size();
  while (r != end) {
    const LazyLeaves::Record record = LazyLeaves::read(r);
    const uint32_t g = d.plan.group_of[leaf];
    const int64_t numel = d.entry_numel[g];
    const std::vector<int64_t>& sizes = d.entry_sizes[g];
    out->records.push_back(static_cast<int64_t>(record.slot | (static_cast<uint64_t>(g) << 32)));
    out->records.push_back(static_cast<int64_t>(d.plan.place[leaf]) * numel);
    out->records.push_back(static_cast<int64_t>(sizes.size()));
    out->records.insert(out->records.end(), sizes.begin(), sizes.end());
    out->records.insert(out->records.end(), d.entry_strides[g].begin(), d.entry_strides[g].end());
    out->per_flat.add(g, numel, 1);
    ++out->leaves;
    out->elements += numel;
    ++leaf;
  }
  out->tree_per_flat = out->per_flat;
  out->tree_elements = out->elements;
  out->tree_leaves = out->leaves;
  out->fields.reserve(shape.fields.size());
  // Nested levels in slot order, after this level's leaves: the plan's walk order.
  for (size_t i = 0; i < shape.fields.size(); ++i) {
    const LevelShape::Field& f = shape.fields[i];
    LevelShape::Field copy{f.key, f.hash, f.kind, {}, f.value};
    if (f.kind == EntryKind::TensorDict) {
      copy.child = derive(*f.child, d, leaf);
      out->nested.push_back(static_cast<uint32_t>(i));
      out->tree_elements += copy.child->tree_elements;
      out->tree_leaves += copy.child->tree_leaves;
      const FlatCounts& below = copy.child->tree_per_flat;
      for (size_t k = 0; k < below.size(); ++k) out->tree_per_flat.add(k, below.elements[k], below.leaves[k]);
    }
    out->fields.push_back(std::move(copy));
  }
  return intern_shape(std::move(out));
}

// The result shape for `key` (what the reduction did), kept with the operand's shape; made from
// the groups' results `outs` when there is none yet.
c10::intrusive_ptr<LevelShape> derived_shape(const LevelShape& shape, const std::vector<int64_t>& key,
                                             const GroupPlan& plan, c10::ArrayRef<at::Tensor> outs,
                                             const GroupedResult& how, size_t old_root_dims) {
  {
    std::lock_guard<std::mutex> guard(shape.derived_mutex);
    for (const auto& [k, kept] : shape.derived) {
      if (k == key) return kept;
    }
  }
  Derivation d{plan, {}, {}, {}, how, old_root_dims};
  for (const at::Tensor& out : outs) {
    d.entry_sizes.push_back(out.sizes().slice(1).vec());
    d.entry_strides.push_back(out.strides().slice(1).vec());  // the standard ones (checked)
    d.entry_numel.push_back(c10::multiply_integers(out.sizes().slice(1)));
  }
  size_t leaf = 0;
  c10::intrusive_ptr<LevelShape> made = derive(shape, d, leaf);
  std::lock_guard<std::mutex> guard(shape.derived_mutex);
  if (shape.derived.size() < kMaxDerivedShapes) shape.derived.emplace_back(key, made);
  return made;
}

// Group `g` of the plan over `storage`: [entries, *leaf sizes] with strides [spacing, *leaf
// strides] (`entries` below the group's count: a write's trial on none).
at::Tensor plan_group_view(const at::Tensor& storage, const GroupPlan::Group& g, int64_t entries) {
  c10::SmallVector<int64_t, 6> sizes{entries}, strides{g.spacing};
  sizes.append(g.sizes.begin(), g.sizes.end());
  strides.append(g.strides.begin(), g.strides.end());
  return detail::strided_view(storage, sizes, strides, storage.storage_offset() + g.offset);
}

// Leaves that need grad, named, or lazily negated or conjugated take the op itself, as in
// Note [Shape groups].
bool plain_storages(c10::ArrayRef<at::Tensor> storages) {
  for (const at::Tensor& s : storages) {
    if (s.requires_grad() || s.has_names() || s.is_neg() || s.is_conj() || s.layout() != at::kStrided ||
        s.is_quantized())
      return false;
  }
  return true;
}

// The storages of `td` as its records number them, each check of its made leaves included (none
// under forward AD), into `out`; and `partner`'s into `partner_out` where it is laid out as `td`
// (the same shape, storages of the same sizes numbered alike). False otherwise.
bool intact_storages(const TensorDictBase& td, const TensorDictBase* partner, c10::SmallVector<at::Tensor, 4>& out,
                     c10::SmallVector<at::Tensor, 4>& partner_out) {
  if (at::Tensor flat = intact_packed_storage(td); flat.defined()) {
    if (partner != nullptr) {
      at::Tensor other = intact_packed_storage_like(*partner, td);
      if (!other.defined() || other.numel() != flat.numel()) return false;
      partner_out.push_back(std::move(other));
    }
    out.push_back(std::move(flat));
    return true;
  }
  std::optional<IntactRuns> runs = intact_runs(td);
  if (!runs || !runs->canonical) return false;
  if (partner != nullptr) {
    std::optional<IntactRuns> other = intact_runs(*partner);
    if (!other || !runs_laid_out_alike(td, *runs, *partner, *other)) return false;
    partner_out = std::move(other->storages);
  }
  out = std::move(runs->storages);
  return true;
}

}  // namespace

std::optional<TensorDict> map_intact_groups(const TensorDictBase& td,
                                            FunctionRef<at::Tensor(const at::Tensor& group, int64_t level_dims)> group_fn,
                                            const GroupedResult& how) {
  return map_intact_group_pairs(
      td, nullptr, [&](const at::Tensor& g, const at::Tensor&, int64_t level_dims) { return group_fn(g, level_dims); },
      how);
}

std::optional<TensorDict> map_intact_group_pairs(
    const TensorDictBase& td, const TensorDictBase* partner,
    FunctionRef<at::Tensor(const at::Tensor& group, const at::Tensor& partner_group, int64_t level_dims)> group_fn,
    const GroupedResult& how) {
  const TensorDictImpl* level = packed_level(td);
  if (level == nullptr) return std::nullopt;
  c10::SmallVector<at::Tensor, 4> storages, partner_storages;
  if (!intact_storages(td, partner, storages, partner_storages) || !plain_storages(storages) ||
      !plain_storages(partner_storages))
    return std::nullopt;
  const c10::intrusive_ptr<LevelShape> shape = shape_of(*level, td);
  if (!shape || (how.filter_empty && shape->has_empty_level) || (how.indexes_rows && shape->has_non_tensor_stack))
    return std::nullopt;
  const std::shared_ptr<const GroupPlan> plan = plan_of(*shape);
  if (!plan) return std::nullopt;
  for (const GroupPlan::Group& g : plan->groups)
    if (g.storage >= storages.size()) return std::nullopt;
  // A leaf LibTorch reduces over threads sums in another order than a group's row.
  if (at::get_num_threads() > 1) {
    for (const GroupPlan::Group& g : plan->groups)
      if (g.numel >= at::internal::GRAIN_SIZE) return std::nullopt;
  }
  c10::SmallVector<at::Tensor, 4> outs;
  // What the result's shape depends on besides the operand's: the batch sizes, and the sizes of
  // each group's entries.
  std::vector<int64_t> key{how.nested_extra_dims, static_cast<int64_t>(how.root.size())};
  key.insert(key.end(), how.root.begin(), how.root.end());
  try {
    for (const GroupPlan::Group& g : plan->groups) {
      const at::Tensor& flat = storages[g.storage];
      const at::Tensor partner_group =
          partner != nullptr ? plan_group_view(partner_storages[g.storage], g, g.count) : at::Tensor();
      at::Tensor out = group_fn(plan_group_view(flat, g, g.count), partner_group, g.level_dims);
      // Each entry a contiguous tensor of its own, as a leaf's own result is; the results
      // viewed whole as the result's storages.
      if (!out.defined() || out.dim() < 1 || out.size(0) != g.count || out.requires_grad() ||
          out.storage_offset() != 0 || out.is_alias_of(flat) || (partner != nullptr && out.is_alias_of(partner_group)) ||
          !detail::has_standard_strides(out.sizes(), out.strides()) ||
          (!outs.empty() && out.device() != outs.front().device()))
        return std::nullopt;
      key.push_back(out.dim());
      key.insert(key.end(), out.sizes().begin() + 1, out.sizes().end());
      outs.push_back(std::move(out));
    }
  } catch (const c10::Error&) {
    return std::nullopt;
  }
  c10::intrusive_ptr<LevelShape> result = derived_shape(*shape, key, *plan, outs, how, td.batch_size().size());
  std::vector<at::Tensor> flats;
  flats.reserve(outs.size());
  for (const at::Tensor& out : outs) {
    // Its whole storage as one dim (a plain view, as the leaves made from it are).
    const int64_t numel[] = {out.numel()}, one[] = {1};
    flats.push_back(out.dim() == 1 ? out : detail::strided_view(out, numel, one, 0));
  }
  at::Tensor first = std::move(flats.front());
  flats.erase(flats.begin());
  const std::vector<int64_t> root_batch = result->batch_size;
  const DimNames names = result->names;
  return TensorDict(TensorDictImpl::make_deferred(std::move(result), std::move(first), std::move(flats), root_batch,
                                                  td.device(), names, how.lock));
}

bool write_intact_groups(const TensorDictBase& td, FunctionRef<void(const at::Tensor& group)> write,
                         const at::Tensor& reads) {
  const TensorDictImpl* level = packed_level(td);
  if (level == nullptr) return false;
  // Its storage or runs (each check of the made leaves included).
  c10::SmallVector<at::Tensor, 4> storages;
  bool own_versions = false;
  if (at::Tensor flat = intact_packed_storage(td, &own_versions); flat.defined()) {
    storages.push_back(std::move(flat));
  } else {
    std::optional<IntactRuns> runs = intact_runs(td);
    if (!runs || !runs->canonical) return false;
    own_versions = runs->own_versions;
    storages = std::move(runs->storages);
  }
  if (!plain_storages(storages)) return false;
  for (const at::Tensor& s : storages) {
    // PyTorch refuses an inference tensor's write outside inference mode only after writing. An
    // operand that needs grad would join each leaf to the graph; one in the storage changes as
    // the groups are written (per leaf, as the leaves are, in key order).
    if ((s.is_inference() && !c10::InferenceMode::is_enabled()) ||
        (reads.defined() && (reads.requires_grad() || (reads.has_storage() && reads.is_alias_of(s)))))
      return false;
  }
  const c10::intrusive_ptr<LevelShape> shape = shape_of(*level, td);
  if (!shape) return false;
  const std::shared_ptr<const GroupPlan> plan = plan_of(*shape);
  if (!plan) return false;
  for (const GroupPlan::Group& g : plan->groups)
    if (g.storage >= storages.size()) return false;
  const at::AutoDispatchBelowADInplaceOrView below_autograd;  // Note [Below autograd], ops/packed.cpp
  if (storages.size() > 1) {
    // Runs of several dtypes: each group's write tried first on none of its entries, so that a
    // dtype the op refuses raises before anything is written (per leaf, the leaves before the
    // first such one in key order would be written, then the error named: that path runs).
    try {
      for (const GroupPlan::Group& g : plan->groups) write(plan_group_view(storages[g.storage], g, /*entries=*/0));
    } catch (const c10::Error&) {
      return false;
    }
  }
  const auto bump = [&] {
    for (const at::Tensor& s : storages) s.unsafeGetTensorImpl()->bump_version();  // as ADInplaceOrView would
    if (own_versions) bump_made_leaf_versions(td);
  };
  bool wrote = false;
  try {
    for (const GroupPlan::Group& g : plan->groups) {
      write(plan_group_view(storages[g.storage], g, g.count));
      wrote = true;
    }
  } catch (const c10::Error& e) {
    if (!wrote) return false;
    // Not expected: every group's write was tried, or they share the storage's dtype and device.
    bump();
    raise_after_group_writes(e);
  }
  bump();
  return true;
}

void raise_after_group_writes(const c10::Error& e) {
  TD_THROW(RuntimeError, "an in-place write over groups of leaves failed after some were written: ",
           e.what_without_backtrace());
}

}  // namespace in_memory
}  // namespace tensordict
