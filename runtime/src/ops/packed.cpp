// One kernel over a packed storage (issue 34): when every tensor leaf is a view of one storage
// and together they tile it exactly (a consolidated tensordict of one dtype whose leaves need no
// padding, or the result of an op on one), an elementwise op runs once over the whole storage
// instead of once per leaf, and its result is cut back into leaves laid out the same way, so the
// next op finds a packed storage again. Anything else (mixed dtypes, padding between leaves,
// overlapping or foreign bytes, autograd) takes the per-leaf path: no byte outside the leaves is
// ever read or written.

#include "ops/packed.h"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/SmallVector.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_base.h>

#include "backends/in_memory/level_builder.h"
#include "backends/in_memory/intact_result.h"
#include "core/forward_ad.h"
#include "core/strided_view.h"
#include "core/structure_walk.h"
#include "ops/packed_runs.h"

namespace tensordict {
namespace ops {

namespace {
// Walks leaves until one is in another storage than the first; false then.
bool one_storage_so_far(const TensorDictBase& level, const c10::StorageImpl*& first) {
  bool same = true;
  level.for_each([&](const std::string&, const Entry& e) {
    if (!same) return;
    if (e.is_tensor()) {
      const at::Tensor& t = e.tensor_unchecked();
      if (!t.has_storage()) {
        same = false;
        return;
      }
      const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
      if (first == nullptr) first = s;
      same = s == first;
    } else if (e.is_tensordict()) {
      same = one_storage_so_far(*e.tensordict_unchecked().impl(), first);
    }
  });
  return same;
}
}  // namespace

bool may_be_packed(const TensorDictBase& td) {
  const c10::StorageImpl* first = nullptr;
  return one_storage_so_far(td, first);
}

at::Tensor packed_storage(const LeafList& leaves) {
  if (leaves.size() < 2) return at::Tensor();  // one leaf: the per-leaf path is one kernel already
  const at::Tensor& first = leaves.front();
  const c10::StorageImpl* storage = first.storage().unsafeGetStorageImpl();
  const auto dtype = first.scalar_type();
  // (offset, numel) of each leaf, in elements; the leaves may list in another order than the
  // storage holds them (consolidate lays nested levels out where Python lists them last).
  c10::SmallVector<std::pair<int64_t, int64_t>, 32> spans;
  for (const at::Tensor& t : leaves) {
    if (t.scalar_type() != dtype || t.storage().unsafeGetStorageImpl() != storage || t.requires_grad() ||
        !t.is_contiguous() || t.is_nested() || t.has_names() || t.is_neg() || t.is_conj())
      // names: per-leaf results carry them; a lazily negated or conjugated leaf's bytes are not its values
      return at::Tensor();
    spans.emplace_back(t.storage_offset(), t.numel());
  }
  if (!std::is_sorted(spans.begin(), spans.end())) std::sort(spans.begin(), spans.end());  // mostly in order already
  int64_t end = 0;  // elements covered so far: the spans must tile [0, end) with no gap or overlap
  for (const auto& [offset, numel] : spans) {
    if (offset != end) return at::Tensor();
    end += numel;
  }
  const int64_t itemsize = static_cast<int64_t>(first.element_size());
  if (static_cast<int64_t>(first.storage().nbytes()) != end * itemsize) return at::Tensor();
  // Checked last: one lock, paid only where the leaves are packed.
  if (detail::forward_ad_open()) return at::Tensor();
  const int64_t flat_size[] = {end}, flat_stride[] = {1};
  return detail::strided_view(first, flat_size, flat_stride, 0);
}

namespace {
// `flat` unless one result over it is too large (kLargestPackedCpuResult).
at::Tensor fit_for_result(at::Tensor flat, size_t result_itemsize) {
  if (flat.defined() && flat.is_cpu()) {
    const size_t itemsize = result_itemsize != 0 ? result_itemsize : flat.element_size();
    if (static_cast<size_t>(flat.numel()) * itemsize > kLargestPackedCpuResult) return at::Tensor();
  }
  return flat;
}
}  // namespace

at::Tensor packed_storage_for_result(const LeafList& leaves, size_t result_itemsize) {
  return fit_for_result(packed_storage(leaves), result_itemsize);
}

at::Tensor intact_storage_for_result(const TensorDictBase& td, size_t result_itemsize) {
  return fit_for_result(in_memory::intact_packed_storage(td), result_itemsize);
}

at::Tensor intact_partner(const at::Tensor& fa, const TensorDict& a, const TensorDict& b,
                          c10::intrusive_ptr<LevelShape>* a_shape) {
  if (!fa.defined() || a.batch_size() != b.batch_size()) return at::Tensor();
  at::Tensor fb = in_memory::intact_packed_storage_like(*b.impl(), *a.impl(), a_shape);
  if (!fb.defined() || fb.numel() != fa.numel()) return at::Tensor();
  return fb;
}

// Note [Below autograd]: the kernels over a packed storage run below the autograd and
// ADInplaceOrView dispatch layers, as a custom op's body does. Those layers would find nothing to
// record: packed_storage() and intact_packed_storage() refuse leaves that need grad in grad mode
// (and everything while a forward-AD level is open), and the callers' ops read only the flat
// storages and scalars. What is left of them is the version bump of an in-place op, which
// write_over() does itself. About 450 instructions an op of the ~3,000 that dispatch costs.
at::Tensor run_over(const at::Tensor& flat, FunctionRef<at::Tensor(const at::Tensor&)> fn) {
  if (!flat.defined()) return at::Tensor();
  at::Tensor out;
  try {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;  // Note [Below autograd]
    out = fn(flat);
  } catch (const c10::Error&) {
    return at::Tensor();
  }
  if (out.has_storage() && out.storage().is_alias_of(flat.storage())) return at::Tensor();
  return out;
}

std::optional<TensorDict> map_packed(const TensorDictBase& like, const LeafList& leaves,
                                     FunctionRef<at::Tensor(const at::Tensor&)> fn, size_t result_itemsize,
                                     bool filter_empty, bool lock) {
  const at::Tensor out = run_over(packed_storage_for_result(leaves, result_itemsize), fn);
  if (out.defined()) return packed_result(like, out, leaves, filter_empty, lock);
  // Mixed dtypes, padding, a subset of a storage: one kernel per run (Note [Packed runs]).
  return map_runs_result(like, leaves, fn, result_itemsize, filter_empty, lock);
}

std::optional<TensorDict> map_intact(const TensorDictBase& td, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                     size_t result_itemsize, bool filter_empty, bool lock) {
  const at::Tensor out = run_over(intact_storage_for_result(td, result_itemsize), fn);
  if (out.defined()) return in_memory::intact_packed_like(td, out, filter_empty, lock);
  return map_intact_runs(td, fn, result_itemsize, filter_empty, lock);  // Note [Intact runs]
}

bool write_over(const at::Tensor& flat, FunctionRef<void()> write) {
  if (!flat.defined() || (flat.is_inference() && !c10::InferenceMode::is_enabled())) return false;
  try {
    {
      const at::AutoDispatchBelowADInplaceOrView below_autograd;  // Note [Below autograd]
      write();
    }
    flat.unsafeGetTensorImpl()->bump_version();  // what the skipped ADInplaceOrView kernel does
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

bool write_over_intact(const TensorDict& td, c10::ArrayRef<const TensorDict*> partners, WriteWith write,
                       const char* op) {
  bool own_versions = false;
  const at::Tensor flat = in_memory::intact_packed_storage(*td.impl(), &own_versions);
  if (!flat.defined()) return write_intact_runs(td, partners, write, op);  // Note [Intact runs]
  c10::SmallVector<at::Tensor, 2> others;
  for (const TensorDict* partner : partners) {
    at::Tensor other = intact_partner(flat, td, *partner);
    if (!other.defined()) return false;
    others.push_back(std::move(other));
  }
  if (!write_over(flat, [&] { write(flat, others); })) return false;
  if (own_versions) in_memory::bump_made_leaf_versions(*td.impl());
  return true;
}

bool write_over_intact(const TensorDict& td, FunctionRef<void(const at::Tensor& flat)> write, const char* op) {
  return write_over_intact(
      td, c10::ArrayRef<const TensorDict*>(), [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor>) { write(flat); },
      op);
}

bool write_over_intact(const TensorDict& td, const TensorDict& partner,
                       FunctionRef<void(const at::Tensor& flat, const at::Tensor& partner_flat)> write, const char* op) {
  const TensorDict* partners = &partner;
  return write_over_intact(
      td, c10::ArrayRef<const TensorDict*>(partners),
      [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor> p) { write(flat, p[0]); }, op);
}

void bump_versions(const LeafList& leaves) {
  for (const at::Tensor& t : leaves) t.unsafeGetTensorImpl()->bump_version();
}

bool same_layout(const LeafList& a, const LeafList& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].storage_offset() != b[i].storage_offset() || a[i].sizes() != b[i].sizes()) return false;
  }
  return true;
}

LeafList unpack_like(const at::Tensor& flat, const LeafList& leaves) {
  LeafList out;
  out.reserve(leaves.size());
  for (const at::Tensor& t : leaves) out.push_back(detail::strided_view(flat, t.sizes(), t.strides(), t.storage_offset()));
  return out;
}

namespace {

// result_like over one level: `new_root` and `old_root_dims` as rebuild() takes them, or, when
// `keep` is set, each level's own batch size and names.
TensorDict result_level(const TensorDictBase& like, FunctionRef<void(LevelBuilder&, const std::string&)> add_leaf,
                        bool filter_empty, bool lock, bool packed, bool keep, c10::IntArrayRef new_root,
                        size_t old_root_dims) {
  const BatchSize batch =
      keep ? BatchSize(like.batch_size().begin(), like.batch_size().end())
           : detail::nested_batch(new_root, like.batch_size(), old_root_dims);
  LevelBuilder out(batch, like.device(), like.num_entries());
  if (packed) out.mark_packed_result();
  like.for_each([&](const std::string& key, const Entry& entry) {
    switch (entry.kind()) {
      case EntryKind::Tensor:
        add_leaf(out, key);
        break;
      case EntryKind::TensorDict: {
        TensorDict child = result_level(*entry.tensordict_unchecked().impl(), add_leaf, filter_empty, lock, packed, keep,
                                        new_root, old_root_dims);
        if (!filter_empty || child.num_keys() != 0) {
          if (lock) out.add_locked_child(child);
          out.append(key, std::move(child));
        }
        break;
      }
      case EntryKind::NonTensor:
        out.append(key, entry.non_tensor());
        break;
      case EntryKind::Undefined:
        break;
    }
  });
  if (keep) return out.finish_like(like, lock);
  if (lock) out.set_locked(true);
  TensorDict level = out.finish();
  // As rebuild(): the dim names stay where the batch size does.
  if (C10_UNLIKELY(!like.dim_names().empty()) && c10::IntArrayRef(batch) == like.batch_size())
    level.impl()->set_dim_names(like.dim_names());
  return level;
}

}  // namespace

TensorDict result_like(const TensorDictBase& like, FunctionRef<void(LevelBuilder&, const std::string&)> add_leaf,
                       bool filter_empty, bool lock, bool packed, const RebuildOptions* reshaped) {
  if (reshaped == nullptr) return result_level(like, add_leaf, filter_empty, lock, packed, true, {}, 0);
  const c10::IntArrayRef root = reshaped->batch_size ? *reshaped->batch_size : like.batch_size();
  // An old root rank beyond any level's rank drops every extra dim (rebuild()'s rule).
  const size_t old_dims = reshaped->nested_extra_dims ? like.batch_size().size() : SIZE_MAX / 2;
  return result_level(like, add_leaf, filter_empty, lock, packed, false, root, old_dims);
}

TensorDict packed_result(const TensorDictBase& like, const at::Tensor& flat, const LeafList& leaves,
                         bool filter_empty, bool lock) {
  size_t next = 0;
  return result_like(
      like, [&](LevelBuilder& out, const std::string& key) { out.append_lazy(key, flat, leaves[next++]); }, filter_empty,
      lock, /*packed=*/true);
}

}  // namespace ops
}  // namespace tensordict
