#include "ops/shape_groups.h"

#include <algorithm>
#include <functional>

#include <ATen/MemoryOverlap.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/SmallVector.h>

#include <tensordict/errors.h>

#include "backends/in_memory/level_builder.h"
#include "core/forward_ad.h"
#include "core/strided_view.h"
#include "ops/kernel.h"
#include "ops/packed.h"
#include "ops/packed_runs.h"

namespace tensordict {
namespace ops {

namespace {

// A leaf a group may hold: plain strided values, with elements, that nothing tracks (a leaf
// needing grad, named, or lazily negated or conjugated takes the op itself).
bool groupable(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.layout() == at::kStrided && !t.is_nested() && !t.is_quantized() &&
         t.numel() > 0 && !t.requires_grad() && !t.has_names() && !t.is_neg() && !t.is_conj();
}

// The order leaves group in: by storage, dtype, key set, level dims, shape, then place.
// `ld`: each leaf's level dims (a group's leaves share theirs), 0 when not given.
struct GroupOrder {
  const LeafList& leaves;
  c10::ArrayRef<int64_t> level_dims;

  int64_t ld(uint32_t i) const { return level_dims.empty() ? 0 : level_dims[i]; }
  // -1, 0 or 1 as a's signature (all but the place) comes before, equals or follows b's.
  int signature(uint32_t a, uint32_t b) const {
    const c10::TensorImpl* x = leaves[a].unsafeGetTensorImpl();
    const c10::TensorImpl* y = leaves[b].unsafeGetTensorImpl();
    const auto* xs = x->unsafe_storage().unsafeGetStorageImpl();
    const auto* ys = y->unsafe_storage().unsafeGetStorageImpl();
    if (xs != ys) return std::less<const void*>()(xs, ys) ? -1 : 1;
    if (x->dtype() != y->dtype()) return x->dtype().id() < y->dtype().id() ? -1 : 1;
    if (x->key_set() != y->key_set()) return x->key_set().raw_repr() < y->key_set().raw_repr() ? -1 : 1;
    if (ld(a) != ld(b)) return ld(a) < ld(b) ? -1 : 1;
    const c10::IntArrayRef xz = x->sizes(), yz = y->sizes();
    if (xz.size() != yz.size()) return xz.size() < yz.size() ? -1 : 1;
    for (size_t d = 0; d < xz.size(); ++d)
      if (xz[d] != yz[d]) return xz[d] < yz[d] ? -1 : 1;
    const c10::IntArrayRef xt = x->strides(), yt = y->strides();
    for (size_t d = 0; d < xt.size(); ++d)
      if (xt[d] != yt[d]) return xt[d] < yt[d] ? -1 : 1;
    return 0;
  }
  bool operator()(uint32_t a, uint32_t b) const {
    const int c = signature(a, b);
    return c != 0 ? c < 0 : leaves[a].storage_offset() < leaves[b].storage_offset();
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
  for (size_t i = 0; i < leaves.size(); ++i)
    if (groupable(leaves[i])) order.push_back(static_cast<uint32_t>(i));
  const GroupOrder by{leaves, level_dims};
  // Usually in order already (one dtype, keys in storage order): checked first, in one pass.
  if (!std::is_sorted(order.begin(), order.end(), by)) std::sort(order.begin(), order.end(), by);
  c10::SmallVector<Group, 8> groups;
  for (size_t i = 0; i < order.size();) {
    Group g{i, 1, 0};
    for (size_t j = i + 1; j < order.size() && by.signature(order[i], order[j]) == 0; ++j) {
      const int64_t step = leaves[order[j]].storage_offset() - leaves[order[j - 1]].storage_offset();
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

}  // namespace

std::optional<TensorDict> map_shape_groups(const TensorDictBase& like, const LeafList& leaves, GroupFn group_fn,
                                           FunctionRef<at::Tensor(size_t)> per_leaf, const RebuildOptions& options,
                                           c10::ArrayRef<int64_t> level_dims) {
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
  c10::SmallVector<int64_t, 6> sizes, strides;
  try {
    for (const Group& group : groups) {
      const uint32_t first_leaf = order[group.begin];
      const at::Tensor& first = leaves[first_leaf];
      sizes.assign({static_cast<int64_t>(group.count)});
      strides.assign({group.spacing});
      sizes.append(first.sizes().begin(), first.sizes().end());
      strides.append(first.strides().begin(), first.strides().end());
      at::Tensor out = group_fn(detail::strided_view(first, sizes, strides, first.storage_offset()), first_leaf);
      // Leaves made from the records are plain views (core/strided_view.h): not of a result
      // autograd tracks, nor of one viewing the operands.
      if (out.dim() < 1 || out.size(0) != static_cast<int64_t>(group.count) || out.requires_grad() ||
          out.is_alias_of(first))
        return std::nullopt;
      const auto index = static_cast<int32_t>(g.outs.size());
      for (size_t k = 0; k < group.count; ++k) {
        const uint32_t leaf = order[group.begin + k];
        g.group_of[leaf] = index;
        g.offset[leaf] = out.storage_offset() + static_cast<int64_t>(k) * out.stride(0);
      }
      g.outs.push_back(std::move(out));
    }
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

TensorDict map_leaves_grouped(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                              GroupFn group_fn, const RebuildOptions& options) {
  const TensorDict src = readable(td);
  const LeafList leaves = leaves_of(src);
  const auto per_leaf = [&](size_t i) { return fn(leaves[i]); };
  if (auto grouped = map_shape_groups(*src.impl(), leaves, group_fn, per_leaf, options)) return std::move(*grouped);
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

bool write_shape_groups(const LeafList& leaves, FunctionRef<void(const at::Tensor& group)> write,
                        FunctionRef<void(size_t)> write_leaf, const at::Tensor& reads) {
  if (leaves.size() < 2 || !in_few_storages(leaves) || detail::forward_ad_open()) return false;
  const bool inference_mode = c10::InferenceMode::is_enabled();
  const c10::StorageImpl* read_storage =
      reads.defined() && reads.has_storage() ? reads.storage().unsafeGetStorageImpl() : nullptr;
  for (const at::Tensor& t : leaves) {
    if (!writable(t, leaves.front(), inference_mode)) return false;
    if (t.storage().unsafeGetStorageImpl() == read_storage) return false;  // the mask is a leaf
  }
  c10::SmallVector<uint32_t, 32> order;
  const c10::SmallVector<Group, 8> groups = find_groups(leaves, {}, order);
  if (groups.empty()) return false;
  // A group's leaves must not overlap each other: its view would write some elements twice.
  for (const Group& group : groups)
    if (group.spacing < extent(leaves[order[group.begin]])) return false;
  std::vector<bool> grouped(leaves.size(), false);
  c10::SmallVector<int64_t, 6> sizes, strides;
  bool wrote = false;
  const auto bump_grouped = [&] {
    for (size_t i = 0; i < leaves.size(); ++i)
      if (grouped[i]) leaves[i].unsafeGetTensorImpl()->bump_version();
  };
  try {
    for (const Group& group : groups) {
      const at::Tensor& first = leaves[order[group.begin]];
      sizes.assign({static_cast<int64_t>(group.count)});
      strides.assign({group.spacing});
      sizes.append(first.sizes().begin(), first.sizes().end());
      strides.append(first.strides().begin(), first.strides().end());
      write(detail::strided_view(first, sizes, strides, first.storage_offset()));
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
    TD_THROW(RuntimeError, "an in-place write over groups of leaves failed after some were written: ",
             e.what_without_backtrace());
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
