// Packed runs (Note [Packed runs], packed_runs.h): one kernel per run of same-dtype leaves that
// lie back to back in one storage.

#include "ops/packed_runs.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <tensordict/tensor_dict_base.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/intact_runs.h"
#include "backends/in_memory/level_builder.h"
#include "backends/in_memory/level_shape.h"
#include "core/forward_ad.h"
#include "core/padding.h"
#include "core/strided_view.h"
#include "ops/packed.h"

namespace tensordict {
namespace ops {

bool runnable(const at::Tensor& t) {
  return t.defined() && t.has_storage() && !t.requires_grad() && t.is_contiguous() && !t.is_nested() &&
         !t.has_names() && !t.is_neg() && !t.is_conj() && !t.is_quantized();
}

namespace {


// A leaf's bytes in its storage.
struct Span {
  const c10::StorageImpl* storage;
  int64_t begin, end;
  uint32_t leaf;
};

at::Tensor flat_view(const at::Tensor& like, int64_t offset, int64_t numel) {
  const int64_t size[] = {numel}, stride[] = {1};
  return detail::strided_view(like, size, stride, offset);
}

bool too_large(const at::Tensor& flat, size_t result_itemsize) {
  const size_t itemsize = result_itemsize != 0 ? result_itemsize : flat.element_size();
  return flat.is_cpu() && static_cast<size_t>(flat.numel()) * itemsize > kLargestPackedCpuResult;
}

// A result over a run's flat that can be cut into its leaves.
bool fits(const at::Tensor& out, const at::Tensor& flat) {
  return out.defined() && out.dim() == 1 && out.numel() == flat.numel() && out.is_contiguous();
}

// `over_run(r, flat)` once per run: its results (undefined for a run whose result views its own
// bytes, `to` its own dtype or `detach`: per leaf such an op returns the leaf or a view sharing
// its version counter, which new views of the run would not, so those leaves take the op one by
// one). Nullopt when a call raises a c10::Error (the per-leaf path then names the key) or a
// result is too large (kLargestPackedCpuResult).
std::optional<c10::SmallVector<at::Tensor, 4>> run_each(c10::ArrayRef<at::Tensor> flats, size_t result_itemsize,
                                                        FunctionRef<at::Tensor(size_t, const at::Tensor&)> over_run) {
  c10::SmallVector<at::Tensor, 4> results;
  for (size_t r = 0; r < flats.size(); ++r) {
    const at::Tensor& flat = flats[r];
    if (too_large(flat, result_itemsize)) return std::nullopt;
    at::Tensor out;
    try {
      const at::AutoDispatchBelowADInplaceOrView below_autograd;  // Note [Below autograd], packed.cpp
      out = over_run(r, flat);
    } catch (const c10::Error&) {
      return std::nullopt;
    }
    if (out.has_storage() && out.storage().is_alias_of(flat.storage())) {
      out = at::Tensor();
    } else if (!fits(out, flat)) {
      return std::nullopt;
    }
    results.push_back(std::move(out));
  }
  return results;
}

// The results cut into leaves laid out as `leaves`; `over_leaf(i)` for a leaf of a run without one.
LeafList cut_runs(const PackedRuns& runs, c10::ArrayRef<at::Tensor> results, const LeafList& leaves,
                  FunctionRef<at::Tensor(size_t)> over_leaf) {
  LeafList out;
  out.reserve(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    const at::Tensor& result = results[runs.run[i]];
    out.push_back(result.defined() ? detail::strided_view(result, leaves[i].sizes(), leaves[i].strides(),
                                                          result.storage_offset() + runs.offset[i])
                                   : over_leaf(i));
  }
  return out;
}

// A result shaped like `like` whose leaves are made on first access (Note [Lazy leaves]): leaf i
// a view of its run's result, laid out as `leaves[i]` (like's tensor leaves in key order).
TensorDict runs_result(const TensorDictBase& like, const PackedRuns& runs, c10::ArrayRef<at::Tensor> results,
                       const LeafList& leaves, FunctionRef<at::Tensor(size_t)> over_leaf, bool filter_empty, bool lock) {
  size_t next = 0;
  const bool all_runs = std::all_of(results.begin(), results.end(), [](const at::Tensor& r) { return r.defined(); });
  // Runs holding padding, or several, are no storage the leaves tile (LazyLeaves::over_runs).
  bool over_runs = results.size() > 1;
  if (!over_runs) {
    int64_t held = 0;
    for (const at::Tensor& t : leaves) held += t.numel();
    over_runs = held != runs.flats.front().numel();
  }
  return result_like(
      like,
      [&](LevelBuilder& out, const std::string& key) {
        if (all_runs) out.list_flats(results, over_runs);  // every level numbers the runs alike (Note [Intact runs])
        const size_t i = next++;
        const at::Tensor& result = results[runs.run[i]];
        if (result.defined()) {
          out.append_lazy_at(key, result, result.storage_offset() + runs.offset[i], leaves[i].sizes(),
                             leaves[i].strides());
        } else {
          out.append(key, over_leaf(i));
        }
      },
      filter_empty, lock, /*packed=*/true);  // a write drops its records (Note [Intact runs])
}

}  // namespace

bool in_few_storages(const LeafList& leaves) {
  return in_few_storages(leaves.size(), [&](size_t i) -> const at::Tensor& { return leaves[i]; });
}

std::optional<PackedRuns> packed_runs(const LeafList& leaves, Padding padding) {
  const size_t n = leaves.size();
  if (n < 2 || n > std::numeric_limits<uint32_t>::max()) return std::nullopt;
  if (!in_few_storages(leaves)) return std::nullopt;
  c10::SmallVector<Span, 32> spans;
  spans.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& t = leaves[i];
    if (!runnable(t)) return std::nullopt;
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    const auto item = static_cast<int64_t>(t.element_size());
    const int64_t begin = t.storage_offset() * item;
    spans.push_back(Span{storage, begin, begin + t.numel() * item, static_cast<uint32_t>(i)});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) {
    return std::tie(x.storage, x.begin, x.end) < std::tie(y.storage, y.begin, y.end);
  });
  PackedRuns out;
  out.run.resize(n);
  out.offset.resize(n);
  // The open run: its first leaf, storage, dtype and bytes [begin, end); `covered`: the end of
  // the last byte of its storage any leaf so far holds.
  const at::Tensor* first = nullptr;
  const c10::StorageImpl* storage = nullptr;
  int64_t begin = 0, end = 0, item = 1, covered = 0;
  auto close = [&] { out.flats.push_back(flat_view(*first, begin / item, (end - begin) / item)); };
  for (const Span& s : spans) {
    const at::Tensor& t = leaves[s.leaf];
    const bool empty = s.begin == s.end;
    bool joins = false;
    if (first != nullptr && s.storage == storage) {
      if (s.begin < covered && !empty) return std::nullopt;  // overlaps a leaf: the per-leaf path keeps its semantics
      if (t.scalar_type() == first->scalar_type()) {
        if (s.begin <= end) {
          joins = true;  // next to the run, or an empty leaf inside it
        } else {
          // Padding is covered only up to a leaf with elements: an empty one past the run's end
          // starts a run of its own rather than stretch this one over bytes no leaf follows.
          // (and only where no other leaf holds the gap: an empty leaf may open a run inside one).
          joins = !empty && padding == Padding::ReadOver && detail::may_read_padding(t.scalar_type()) &&
                  covered <= end && s.begin - end < 8;
        }
      }
    } else {
      covered = 0;  // a new storage
    }
    if (!joins) {
      if (first != nullptr) close();
      if (2 * (out.flats.size() + 1) > n) return std::nullopt;  // as many runs as pairs of leaves: no gain
      first = &t;
      storage = s.storage;
      item = static_cast<int64_t>(t.element_size());
      begin = end = s.begin;
    }
    out.run[s.leaf] = static_cast<uint32_t>(out.flats.size());
    out.offset[s.leaf] = (s.begin - begin) / item;
    end = std::max(end, s.end);
    covered = std::max(covered, s.end);
  }
  close();
  // Checked last, as packed_storage does: one lock, paid only where the leaves are in runs.
  if (detail::forward_ad_open()) return std::nullopt;
  return out;
}

std::optional<c10::SmallVector<at::Tensor, 4>> partner_flats(const PackedRuns& runs, const LeafList& a,
                                                             const LeafList& b) {
  if (a.size() != b.size()) return std::nullopt;
  const size_t k = runs.flats.size();
  c10::SmallVector<const at::Tensor*, 4> first(k, nullptr);
  c10::SmallVector<std::optional<int64_t>, 4> base(k);  // b's storage offset of each run's start
  for (size_t i = 0; i < b.size(); ++i) {
    const at::Tensor& x = b[i];
    if (!runnable(x) || x.sizes() != a[i].sizes()) return std::nullopt;
    const uint32_t r = runs.run[i];
    if (first[r] == nullptr) {
      first[r] = &x;
    } else if (!x.storage().is_alias_of(first[r]->storage()) || x.scalar_type() != first[r]->scalar_type()) {
      return std::nullopt;
    }
    if (x.numel() == 0) continue;  // pairs no element: its offset does not matter
    const int64_t at = x.storage_offset() - runs.offset[i];
    if (base[r] && *base[r] != at) return std::nullopt;
    base[r] = at;
  }
  c10::SmallVector<at::Tensor, 4> flats;
  for (size_t r = 0; r < k; ++r) {
    const int64_t start = base[r].value_or(0), numel = runs.flats[r].numel();
    const auto capacity = static_cast<int64_t>(first[r]->storage().nbytes() / first[r]->element_size());
    if (start < 0 || start + numel > capacity) return std::nullopt;
    flats.push_back(flat_view(*first[r], start, numel));
  }
  return flats;
}

std::optional<c10::SmallVector<c10::SmallVector<at::Tensor, 4>, 2>> partners_flats(const PackedRuns& runs,
                                                                                 const LeafList& a,
                                                                                 c10::ArrayRef<const LeafList*> partners) {
  c10::SmallVector<c10::SmallVector<at::Tensor, 4>, 2> out;
  for (const LeafList* b : partners) {
    auto flats = partner_flats(runs, a, *b);
    if (!flats) return std::nullopt;
    out.push_back(std::move(*flats));
  }
  return out;
}

std::optional<LeafList> map_runs(const LeafList& leaves, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                 size_t result_itemsize) {
  const std::optional<PackedRuns> runs = packed_runs(leaves, Padding::ReadOver);
  if (!runs) return std::nullopt;
  const auto results = run_each(runs->flats, result_itemsize, [&](size_t, const at::Tensor& flat) { return fn(flat); });
  if (!results) return std::nullopt;
  try {
    return cut_runs(*runs, *results, leaves, [&](size_t i) { return fn(leaves[i]); });
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

std::optional<TensorDict> map_runs_result(const TensorDictBase& like, const LeafList& leaves,
                                          FunctionRef<at::Tensor(const at::Tensor&)> fn, size_t result_itemsize,
                                          bool filter_empty, bool lock) {
  const std::optional<PackedRuns> runs = packed_runs(leaves, Padding::ReadOver);
  if (!runs) return std::nullopt;
  const auto results = run_each(runs->flats, result_itemsize, [&](size_t, const at::Tensor& flat) { return fn(flat); });
  if (!results) return std::nullopt;
  try {
    return runs_result(like, *runs, *results, leaves, [&](size_t i) { return fn(leaves[i]); }, filter_empty, lock);
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

std::optional<TensorDict> map_intact_runs(const TensorDictBase& td, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                          size_t result_itemsize, bool filter_empty, bool lock) {
  const auto runs = in_memory::intact_runs(td);
  if (!runs) return std::nullopt;
  // Undefined where a result views its run: those leaves take the op one by one (run_each).
  const auto results =
      run_each(runs->storages, result_itemsize, [&](size_t, const at::Tensor& flat) { return fn(flat); });
  if (!results) return std::nullopt;
  try {
    return in_memory::intact_runs_like(td, *runs, *results, fn, filter_empty, lock);
  } catch (const c10::Error&) {
    return std::nullopt;  // the per-leaf path names the key
  }
}

std::optional<TensorDict> map_intact_run_tuples(const TensorDictBase& a, c10::ArrayRef<const TensorDictBase*> partners,
                                                MapWith fn, size_t result_itemsize, bool filter_empty, bool lock) {
  const auto ra = in_memory::intact_runs(a);
  if (!ra) return std::nullopt;
  c10::intrusive_ptr<LevelShape> shape;  // a's, when the layouts were compared through shapes
  c10::SmallVector<in_memory::IntactRuns, 2> others;
  if (!in_memory::partners_laid_out_alike(a, *ra, partners, others, &shape)) return std::nullopt;
  c10::SmallVector<c10::ArrayRef<at::Tensor>, 2> partner_runs;
  for (const auto& rb : others) partner_runs.emplace_back(rb.storages);
  const auto results = run_each(ra->storages, result_itemsize, [&](size_t r, const at::Tensor& flat) {
    return fn(flat, run_of_each(partner_runs, r));
  });
  if (!results) return std::nullopt;
  for (const at::Tensor& result : *results) {
    if (!result.defined()) return std::nullopt;  // a result viewing a's run: per leaf (whose partners it needs)
  }
  return in_memory::intact_runs_like(a, *ra, *results, [](const at::Tensor& t) { return t; }, filter_empty, lock,
                                     std::move(shape));
}

std::optional<TensorDict> map_intact_run_pairs(const TensorDictBase& a, const TensorDictBase& b,
                                               FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn,
                                               size_t result_itemsize, bool filter_empty, bool lock) {
  const TensorDictBase* partner = &b;
  return map_intact_run_tuples(
      a, c10::ArrayRef<const TensorDictBase*>(partner),
      [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor> p) { return fn(flat, p[0]); }, result_itemsize,
      filter_empty, lock);
}

std::optional<TensorDict> map_run_tuples_result(const TensorDictBase& like, const LeafList& a,
                                                c10::ArrayRef<const LeafList*> partners, MapWith fn,
                                                size_t result_itemsize, bool filter_empty, bool lock) {
  const std::optional<PackedRuns> runs = packed_runs(a, Padding::ReadOver);
  if (!runs) return std::nullopt;
  const auto partner_runs = partners_flats(*runs, a, partners);
  if (!partner_runs) return std::nullopt;
  const auto results = run_each(runs->flats, result_itemsize, [&](size_t r, const at::Tensor& flat) {
    return fn(flat, run_of_each(*partner_runs, r));
  });
  if (!results) return std::nullopt;
  try {
    return runs_result(
        like, *runs, *results, a,
        [&](size_t i) { return fn(a[i], leaves_of_each(partners, i)); },
        filter_empty, lock);
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

std::optional<TensorDict> map_run_pairs_result(const TensorDictBase& like, const LeafList& a, const LeafList& b,
                                               FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn,
                                               size_t result_itemsize, bool filter_empty, bool lock) {
  const LeafList* partner = &b;
  return map_run_tuples_result(
      like, a, c10::ArrayRef<const LeafList*>(partner),
      [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor> p) { return fn(flat, p[0]); }, result_itemsize,
      filter_empty, lock);
}

}  // namespace ops
}  // namespace tensordict
