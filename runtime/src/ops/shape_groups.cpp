#include "ops/shape_groups.h"

#include <algorithm>
#include <functional>

#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/SmallVector.h>

#include <tensordict/errors.h>

#include "backends/in_memory/grouped_result.h"
#include "backends/in_memory/level_builder.h"
#include "core/forward_ad.h"
#include "core/strided_view.h"
#include "ops/kernel.h"
#include "ops/packed.h"
#include "ops/packed_runs.h"

namespace tensordict {
namespace ops {

namespace {

// A leaf a group may hold: plain contiguous values, with elements, that nothing tracks (a leaf
// needing grad, named, or lazily negated or conjugated takes the op itself). Three more rules
// keep the group's result the per-leaf one exactly:
// - at least one dim: next to a 0-dim operand, a 0-dim leaf's dtype promotes as the operand's
//   kind, a group's (1-dim) as a dimensioned tensor's;
// - contiguous, with the standard strides even on dims of size 1: LibTorch lays an elementwise
//   result out in its input's stride order, so a group of interleaved leaves (or of leaves with
//   another stride on a size-1 dim) would give results laid out otherwise than each leaf's;
// - fewer elements than LibTorch splits a reduction over threads at (GRAIN_SIZE), or one
//   thread: a leaf reduced to one value in parallel sums in another order than a group's row.
//   Dispatch costs little next to leaves that large anyway.
bool groupable(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.layout() == at::kStrided && !t.is_nested() && !t.is_quantized() &&
         t.dim() > 0 && t.numel() > 0 && detail::has_standard_strides(t.sizes(), t.strides()) && !t.requires_grad() &&
         !t.has_names() && !t.is_neg() && !t.is_conj() &&
         (t.numel() < at::internal::GRAIN_SIZE || at::get_num_threads() == 1);
}

// What a group's leaves share (all but their place), read once a leaf; ordered by storage,
// dtype, key set, level dims, then shape.
struct Signature {
  const c10::StorageImpl* storage;
  uint64_t keys;   // the key set's bits
  int64_t dtype;   // its ScalarType
  int64_t level_dims;
  c10::IntArrayRef sizes, strides;
  int64_t offset;  // the place: not part of the signature

  explicit Signature(const at::Tensor& t, int64_t ld) {
    const c10::TensorImpl* x = t.unsafeGetTensorImpl();
    storage = x->unsafe_storage().unsafeGetStorageImpl();
    keys = x->key_set().raw_repr();
    dtype = static_cast<int64_t>(t.scalar_type());
    level_dims = ld;
    sizes = x->sizes();
    strides = x->strides();
    offset = x->storage_offset();
  }
  // -1, 0 or 1 as this signature comes before, equals or follows `o`'s.
  int compare(const Signature& o) const {
    if (storage != o.storage) return std::less<const void*>()(storage, o.storage) ? -1 : 1;
    if (keys != o.keys) return keys < o.keys ? -1 : 1;
    if (dtype != o.dtype) return dtype < o.dtype ? -1 : 1;
    if (level_dims != o.level_dims) return level_dims < o.level_dims ? -1 : 1;
    if (sizes.size() != o.sizes.size()) return sizes.size() < o.sizes.size() ? -1 : 1;
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] != o.sizes[d]) return sizes[d] < o.sizes[d] ? -1 : 1;
    for (size_t d = 0; d < strides.size(); ++d)
      if (strides[d] != o.strides[d]) return strides[d] < o.strides[d] ? -1 : 1;
    return 0;
  }
};

// A group: order[begin, begin + count) are its leaves' indices, by place in their storage.
struct Group {
  size_t begin;
  size_t count;
  int64_t spacing;  // elements from one leaf's start to the next's
};

// The groups of two or more leaves alike and evenly spaced in one storage, wherever they sit in
// key order (consolidate lays each dtype's leaves out together, whatever the key order).
c10::SmallVector<Group, 8> find_groups(const LeafList& leaves, c10::ArrayRef<int64_t> level_dims,
                                       c10::SmallVector<uint32_t, 32>& order) {
  c10::SmallVector<Signature, 32> sig;  // of order[k], once sorted
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!groupable(leaves[i])) continue;
    order.push_back(static_cast<uint32_t>(i));
    sig.emplace_back(leaves[i], level_dims.empty() ? 0 : level_dims[i]);
  }
  const auto before = [&](size_t a, size_t b) {
    const int c = sig[a].compare(sig[b]);
    return c != 0 ? c < 0 : sig[a].offset < sig[b].offset;
  };
  // Usually in order already (one dtype, keys in storage order): checked first, in one pass.
  bool sorted = true;
  for (size_t k = 1; k < order.size() && sorted; ++k) sorted = !before(k, k - 1);
  if (!sorted) {
    c10::SmallVector<uint32_t, 32> by(order.size());
    for (size_t k = 0; k < by.size(); ++k) by[k] = static_cast<uint32_t>(k);
    std::sort(by.begin(), by.end(), before);
    c10::SmallVector<uint32_t, 32> sorted_order;
    c10::SmallVector<Signature, 32> sorted_sig;
    for (uint32_t k : by) {
      sorted_order.push_back(order[k]);
      sorted_sig.push_back(sig[k]);
    }
    order = std::move(sorted_order);
    sig = std::move(sorted_sig);
  }
  c10::SmallVector<Group, 8> groups;
  for (size_t i = 0; i < order.size();) {
    Group g{i, 1, 0};
    for (size_t j = i + 1; j < order.size() && sig[i].compare(sig[j]) == 0; ++j) {
      const int64_t step = sig[j].offset - sig[j - 1].offset;
      if (step <= 0 || (g.count > 1 && step != g.spacing)) break;
      g.spacing = step;
      ++g.count;
    }
    if (g.count > 1) groups.push_back(g);
    i += g.count;
  }
  return groups;
}

// What the groups gave: per leaf, its result (a leaf in no group) or its group and place there.
struct Grouped {
  LeafList made;                          // per leaf: its result when in no group
  c10::SmallVector<at::Tensor, 4> outs;   // per group of two or more: group_fn's result
  std::vector<int32_t> group_of;          // per leaf: index into outs, or -1
  std::vector<int64_t> offset;            // per grouped leaf: its entry's storage offset
};

// The view of a group's leaves (order[group.begin, group.begin + count) of `leaves`): [count,
// *leaf sizes] with strides [spacing, *leaf strides].
at::Tensor group_view(const LeafList& leaves, c10::ArrayRef<uint32_t> order, const Group& group) {
  const at::Tensor& first = leaves[order[group.begin]];
  c10::SmallVector<int64_t, 6> sizes{static_cast<int64_t>(group.count)}, strides{group.spacing};
  sizes.append(first.sizes().begin(), first.sizes().end());
  strides.append(first.strides().begin(), first.strides().end());
  return detail::strided_view(first, sizes, strides, first.storage_offset());
}

// The same view over each leaf's partner (the other operand's leaf at its key), when they are
// of one rank with the leaves and, in the group's order, alike and evenly spaced in one storage;
// undefined otherwise (the group's leaves then go per leaf).
at::Tensor partner_view(const LeafList& leaves, const LeafList& partners, c10::ArrayRef<uint32_t> order,
                        const Group& group) {
  const at::Tensor& first = partners[order[group.begin]];
  if (!groupable(first) || first.dim() != leaves[order[group.begin]].dim()) return at::Tensor();
  const Signature like(first, 0);
  int64_t spacing = 0;
  for (size_t k = 1; k < group.count; ++k) {
    const at::Tensor& p = partners[order[group.begin + k]];
    if (!groupable(p)) return at::Tensor();
    const Signature next(p, 0);
    const int64_t step = next.offset - partners[order[group.begin + k - 1]].storage_offset();
    if (like.compare(next) != 0 || step <= 0 || (k > 1 && step != spacing)) return at::Tensor();
    spacing = step;
  }
  return group_view(partners, order, Group{group.begin, group.count, spacing});
}

// map_shape_groups and map_shape_group_pairs: `partners` null for the first.
std::optional<TensorDict> map_groups(const TensorDictBase& like, const LeafList& leaves, const LeafList* partners,
                                     PairGroupFn group_fn, FunctionRef<at::Tensor(size_t)> per_leaf,
                                     const RebuildOptions& options, c10::ArrayRef<int64_t> level_dims) {
  // Leaves each in a storage of their own (a tensordict never consolidated) are refused after a
  // few leaves, before any group is looked for.
  if (leaves.size() < 2 || !in_few_storages(leaves) || detail::forward_ad_open()) return std::nullopt;
  c10::SmallVector<uint32_t, 32> order;
  const c10::SmallVector<Group, 8> groups = find_groups(leaves, level_dims, order);
  if (groups.empty()) return std::nullopt;
  Grouped g;
  g.made.resize(leaves.size());
  g.group_of.assign(leaves.size(), -1);
  g.offset.assign(leaves.size(), 0);
  try {
    for (const Group& group : groups) {
      const uint32_t first_leaf = order[group.begin];
      at::Tensor partner;
      if (partners != nullptr) {
        partner = partner_view(leaves, *partners, order, group);
        if (!partner.defined()) continue;  // its leaves go per leaf
      }
      at::Tensor out = group_fn(group_view(leaves, order, group), partner, first_leaf);
      // Leaves made from the records are plain views (core/strided_view.h): not of a result
      // autograd tracks, nor of one viewing the operands. Each entry contiguous, as a leaf's
      // own result (the leaves are) would be.
      if (out.dim() < 1 || out.size(0) != static_cast<int64_t>(group.count) || out.requires_grad() ||
          out.is_alias_of(leaves[first_leaf]) || (partner.defined() && out.is_alias_of(partner)) ||
          !detail::has_standard_strides(out.sizes(), out.strides()))
        return std::nullopt;
      const auto index = static_cast<int32_t>(g.outs.size());
      for (size_t k = 0; k < group.count; ++k) {
        const uint32_t leaf = order[group.begin + k];
        g.group_of[leaf] = index;
        g.offset[leaf] = out.storage_offset() + static_cast<int64_t>(k) * out.stride(0);
      }
      g.outs.push_back(std::move(out));
    }
    if (g.outs.empty()) return std::nullopt;
    for (size_t i = 0; i < leaves.size(); ++i)
      if (g.group_of[i] < 0) g.made[i] = per_leaf(i);
  } catch (const c10::Error&) {
    return std::nullopt;
  }
  size_t next = 0;
  return result_like(
      like,
      [&](LevelBuilder& out, const std::string& key) {
        const size_t i = next++;
        if (g.group_of[i] < 0) {
          out.append(key, g.made[i]);
        } else {
          const at::Tensor& o = g.outs[static_cast<size_t>(g.group_of[i])];
          out.append_lazy_at(key, o, g.offset[i], o.sizes().slice(1), o.strides().slice(1));
        }
      },
      options.filter_empty, /*lock=*/false, /*packed=*/false, &options);
}

}  // namespace

std::optional<TensorDict> map_shape_groups(const TensorDictBase& like, const LeafList& leaves, GroupFn group_fn,
                                           FunctionRef<at::Tensor(size_t)> per_leaf, const RebuildOptions& options,
                                           c10::ArrayRef<int64_t> level_dims) {
  return map_groups(
      like, leaves, nullptr, [&](const at::Tensor& g, const at::Tensor&, size_t first) { return group_fn(g, first); },
      per_leaf, options, level_dims);
}

std::optional<TensorDict> map_shape_group_pairs(const TensorDictBase& like, const LeafList& leaves,
                                                const LeafList& partners, PairGroupFn group_fn,
                                                FunctionRef<at::Tensor(size_t)> per_leaf,
                                                const RebuildOptions& options) {
  if (partners.size() != leaves.size()) return std::nullopt;
  return map_groups(like, leaves, &partners, group_fn, per_leaf, options, {});
}

TensorDict map_leaves_grouped(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                              FunctionRef<at::Tensor(const at::Tensor& group)> group_fn,
                              const RebuildOptions& options, bool lock) {
  const TensorDict src = readable(td);
  const in_memory::GroupedResult how{options.batch_size.value_or(src.batch_size()), options.nested_extra_dims,
                                     options.filter_empty, lock};
  if (auto grouped =
          in_memory::map_intact_groups(*src.impl(), [&](const at::Tensor& g, int64_t) { return group_fn(g); }, how))
    return std::move(*grouped);
  const LeafList leaves = leaves_of(src);
  const auto per_leaf = [&](size_t i) { return fn(leaves[i]); };
  if (auto grouped = map_shape_groups(
          *src.impl(), leaves, [&](const at::Tensor& g, size_t) { return group_fn(g); }, per_leaf, options))
    return std::move(*grouped);
  LeafList results = compute(leaves.size(), false, [] { return LeafList(); }, per_leaf, LeafKeys{*src.impl()}, op);
  return rebuild(*src.impl(), std::move(results), options);
}

namespace {

// How many elements past its first one a leaf reaches, plus one (strides are not negative).
int64_t extent(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return last + 1;
}

// Whether no two leaves share an element (per leaf, each would then see the other's write).
bool apart(const LeafList& leaves) {
  struct Span {
    const c10::StorageImpl* storage;
    int64_t begin, end;
    bool operator<(const Span& o) const {
      return storage != o.storage ? std::less<const void*>()(storage, o.storage) : begin < o.begin;
    }
  };
  c10::SmallVector<Span, 32> spans;
  for (const at::Tensor& t : leaves) {
    if (t.numel() == 0) continue;
    spans.push_back(Span{t.storage().unsafeGetStorageImpl(), t.storage_offset(), t.storage_offset() + extent(t)});
  }
  if (!std::is_sorted(spans.begin(), spans.end())) std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].storage == spans[i - 1].storage && spans[i].begin < spans[i - 1].end) return false;
  return true;
}

// A leaf write_shape_groups may write: as a group's, or without elements; one that overlaps
// itself would make LibTorch refuse the write, an inference tensor outside inference mode too.
bool writable(const at::Tensor& t, const at::Tensor& first, bool inference_mode) {
  if (!t.defined() || !t.has_storage() || t.layout() != at::kStrided || t.is_nested() || t.is_quantized() ||
      t.requires_grad() || t.has_names() || t.is_neg() || t.is_conj())
    return false;
  if (t.scalar_type() != first.scalar_type() || t.device() != first.device()) return false;
  if (t.is_inference() && !inference_mode) return false;
  return at::has_internal_overlap(t) != at::MemOverlap::Yes;
}

}  // namespace

bool write_shape_groups(const LeafList& leaves, FunctionRef<void(const at::Tensor& group, size_t first)> write,
                        FunctionRef<void(size_t)> write_leaf, const at::Tensor& reads) {
  if (leaves.size() < 2 || !in_few_storages(leaves) || detail::forward_ad_open()) return false;
  const bool inference_mode = c10::InferenceMode::is_enabled();
  if (reads.defined() && reads.requires_grad()) return false;  // each leaf would join the graph
  const c10::StorageImpl* read_storage =
      reads.defined() && reads.has_storage() ? reads.storage().unsafeGetStorageImpl() : nullptr;
  for (const at::Tensor& t : leaves) {
    if (!writable(t, leaves.front(), inference_mode)) return false;
    if (t.storage().unsafeGetStorageImpl() == read_storage) return false;  // the operand is a leaf
  }
  if (!apart(leaves)) return false;
  c10::SmallVector<uint32_t, 32> order;
  const c10::SmallVector<Group, 8> groups = find_groups(leaves, {}, order);
  if (groups.empty()) return false;
  std::vector<bool> grouped(leaves.size(), false);
  bool wrote = false;
  const auto bump_grouped = [&] {
    for (size_t i = 0; i < leaves.size(); ++i)
      if (grouped[i]) leaves[i].unsafeGetTensorImpl()->bump_version();
  };
  try {
    for (const Group& group : groups) {
      write(group_view(leaves, order, group), order[group.begin]);
      wrote = true;
      for (size_t k = 0; k < group.count; ++k) grouped[order[group.begin + k]] = true;
    }
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (grouped[i]) continue;
      write_leaf(i);
      wrote = true;
    }
  } catch (const c10::Error& e) {
    if (!wrote) return false;
    // Not expected: every leaf has the first one's dtype and device, so the first kernel would
    // have raised too.
    bump_grouped();
    in_memory::raise_after_group_writes(e);
  }
  bump_grouped();
  return true;
}

at::Tensor group_operand(const at::Tensor& t, const at::Tensor& group) {
  c10::SmallVector<int64_t, 8> shape{1};
  shape.append(t.sizes().begin(), t.sizes().end());
  const int64_t trailing = group.dim() - 1 - t.dim();
  if (trailing > 0) shape.append(static_cast<size_t>(trailing), 1);
  return t.view(shape);
}

}  // namespace ops
}  // namespace tensordict
