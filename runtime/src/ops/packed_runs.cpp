// Packed runs (Note [Packed runs], packed_runs.h): one kernel per run of same-dtype leaves that
// lie back to back in one storage.

#include "ops/packed_runs.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/InferenceMode.h>

#include <tensordict/errors.h>
#include <tensordict/tensor_dict_base.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/intact_runs.h"
#include "backends/in_memory/level_builder.h"
#include "backends/in_memory/level_shape.h"
#include "core/forward_ad.h"
#include "core/padding.h"
#include "core/strided_view.h"
#include "ops/kernel.h"
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

std::optional<TensorDict> map_intact_run_pairs(const TensorDictBase& a, const TensorDictBase& b,
                                               FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn,
                                               size_t result_itemsize, bool filter_empty, bool lock) {
  const auto ra = in_memory::intact_runs(a);
  if (!ra) return std::nullopt;
  const auto rb = in_memory::intact_runs(b);
  c10::intrusive_ptr<LevelShape> shape;  // a's, when the layouts were compared through shapes
  if (!rb || !in_memory::runs_laid_out_alike(a, *ra, b, *rb, &shape)) return std::nullopt;
  const auto results = run_each(ra->storages, result_itemsize,
                                [&](size_t r, const at::Tensor& flat) { return fn(flat, rb->storages[r]); });
  if (!results) return std::nullopt;
  for (const at::Tensor& result : *results) {
    if (!result.defined()) return std::nullopt;  // a result viewing a's run: per leaf (whose partner it needs)
  }
  return in_memory::intact_runs_like(a, *ra, *results, [](const at::Tensor& t) { return t; }, filter_empty, lock,
                                     std::move(shape));
}

std::optional<TensorDict> map_run_pairs_result(const TensorDictBase& like, const LeafList& a, const LeafList& b,
                                               FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn,
                                               size_t result_itemsize, bool filter_empty, bool lock) {
  const std::optional<PackedRuns> runs = packed_runs(a, Padding::ReadOver);
  if (!runs) return std::nullopt;
  const auto partner = partner_flats(*runs, a, b);
  if (!partner) return std::nullopt;
  const auto results = run_each(runs->flats, result_itemsize,
                                [&](size_t r, const at::Tensor& flat) { return fn(flat, (*partner)[r]); });
  if (!results) return std::nullopt;
  try {
    return runs_result(like, *runs, *results, a, [&](size_t i) { return fn(a[i], b[i]); }, filter_empty, lock);
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

namespace {

// Whether a partner's run `x` shares bytes with a's run `y`, other than being its own run's very
// bytes (`a op= a`): written in storage order, one run would read what another already wrote,
// where leaf by leaf the reads come in key order.
bool overlaps(const at::Tensor& x, const at::Tensor& y, bool own_run) {
  if (!x.storage().is_alias_of(y.storage())) return false;
  const auto xi = static_cast<int64_t>(x.element_size()), yi = static_cast<int64_t>(y.element_size());
  const int64_t xb = x.storage_offset() * xi, xe = xb + x.numel() * xi;
  const int64_t yb = y.storage_offset() * yi, ye = yb + y.numel() * yi;
  if (own_run && xb == yb && xe == ye && xi == yi) return false;
  return xb < ye && yb < xe;
}

// Integer and bool kernels check values inside their loop (a division by zero): they may raise
// after writing part of the storage, so their failure is never followed by the per-leaf path.
bool may_fail_midway(const at::Tensor& flat) { return at::isIntegralType(flat.scalar_type(), /*includeBool=*/true); }

// After `write` failed over `flat`, which holds the leaves of `a` for which `in_flat(i)`: raises
// the error of the first of them, in key order, that fails alone, tried on copies so that no leaf
// is written twice.
[[noreturn]] void name_failing_leaf(const at::Tensor& flat, const LeafList& a, const LeafList* b,
                                    FunctionRef<bool(size_t)> in_flat,
                                    FunctionRef<void(const at::Tensor&, const at::Tensor&)> write,
                                    FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!in_flat(i)) continue;
    try {
      const at::AutoDispatchBelowADInplaceOrView below_autograd;  // Note [Below autograd], packed.cpp
      write(a[i].clone(), b != nullptr ? (*b)[i] : at::Tensor());
    } catch (...) {
      rethrow_leaf_error(op, [&] { return key_of(i); });
    }
  }
  TD_THROW(RuntimeError, op, " failed over the leaves of dtype ", c10::toString(flat.scalar_type()),
           " but over none of them alone");
}

// Whether runs may be written in place, checked before any write: none is an inference tensor
// outside inference mode (as write_over), and no partner run overlaps another of a's.
bool runs_writable(c10::ArrayRef<at::Tensor> flats, c10::ArrayRef<at::Tensor> partner) {
  for (size_t r = 0; r < flats.size(); ++r) {
    if (flats[r].is_inference() && !c10::InferenceMode::is_enabled()) return false;
    if (partner.empty()) continue;
    for (size_t s = 0; s < flats.size(); ++s)
      if (overlaps(partner[r], flats[s], s == r)) return false;
  }
  return true;
}

// Whether `write` raises over an empty slice of `flat` (and of its partner): a dtype error, or a
// kernel missing for the dtype, comes before any element is written; a division by zero does not.
bool fails_before_writing(const at::Tensor& flat, const at::Tensor& partner,
                          FunctionRef<void(const at::Tensor&, const at::Tensor&)> write) {
  try {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;  // Note [Below autograd], packed.cpp
    write(flat.narrow(0, 0, 0), partner.defined() ? partner.narrow(0, 0, 0) : at::Tensor());
    return false;
  } catch (const c10::Error&) {
    return true;
  }
}

// bool < integer < floating < complex: an in-place op's result cast back into a run fails when its
// type is of a higher category than the run's (a float scalar into an integer run, a complex
// partner into a float run).
int type_category(at::ScalarType t) {
  if (t == at::kBool) return 0;
  if (at::isIntegralType(t, /*includeBool=*/false)) return 1;
  return at::isComplexType(t) ? 3 : 2;
}

// Dtypes many kernels lack (complex: clamp, floor, remainder...; half precision on the CPU).
bool often_refused(at::ScalarType t) { return at::isComplexType(t) || t == at::kHalf || t == at::kBFloat16; }

// `write(flat, partner flat)` over each run. False when nothing was written and the per-leaf path
// is to name the key, as Python's `_foreach` loop does after writing the leaves before it:
// - The runs go in the order a cast error meets them first: lowest category first, or, with a
//   partner, most below its partner's (stable: the storage's order otherwise). A cast error then
//   fails the first run, before anything is written.
// - A later run of a dtype many kernels lack is tried over an empty slice before any run is
//   written: a kernel missing for it fails there.
// - A first run of integers or bools may fail midway (a division by zero): an empty slice tells
//   the two apart, on the error path only.
// After a failure midway, or a later run's failure none of this foresaw (a bitwise op on floats
// after integers), `name_failure(r)` raises the failing leaf's error; the runs before it stay
// written. Trying every run over an empty slice first would cost a dispatch a run (about 7,000
// instructions) on every in-place op that succeeds.
bool write_each_run(c10::ArrayRef<at::Tensor> flats, c10::ArrayRef<at::Tensor> partner,
                    FunctionRef<void(const at::Tensor&, const at::Tensor&)> write,
                    FunctionRef<void(size_t)> name_failure) {
  const auto partner_of = [&](size_t r) { return partner.empty() ? at::Tensor() : partner[r]; };
  // An insertion sort, stable: std::stable_sort would take a heap buffer for these few runs.
  c10::SmallVector<std::pair<int, uint32_t>, 8> order;  // (rank, run)
  for (size_t r = 0; r < flats.size(); ++r) {
    const int rank =
        type_category(flats[r].scalar_type()) - (partner.empty() ? 0 : type_category(partner[r].scalar_type()));
    size_t at = order.size();
    order.emplace_back(rank, static_cast<uint32_t>(r));
    for (; at > 0 && order[at - 1].first > rank; --at) std::swap(order[at - 1], order[at]);
  }
  for (size_t i = 1; i < order.size(); ++i) {
    const size_t r = order[i].second;
    if (often_refused(flats[r].scalar_type()) && fails_before_writing(flats[r], partner_of(r), write)) return false;
  }
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t r = order[i].second;
    const at::Tensor& flat = flats[r];
    if (write_over(flat, [&] { write(flat, partner_of(r)); })) continue;
    // Nothing written yet: the per-leaf path names the key.
    if (i == 0 && (!may_fail_midway(flat) || fails_before_writing(flat, partner_of(r), write))) return false;
    name_failure(r);  // runs before this one, or part of it, are written
  }
  return true;
}

// In place over the runs of `a` (and b's laid out alike); see write_packed.
bool write_runs(const LeafList& a, const LeafList* b, FunctionRef<void(const at::Tensor&, const at::Tensor&)> write,
                FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  const std::optional<PackedRuns> runs = packed_runs(a, Padding::Skip);
  if (!runs) return false;
  std::optional<c10::SmallVector<at::Tensor, 4>> partner;
  if (b != nullptr && !(partner = partner_flats(*runs, a, *b))) return false;
  const c10::ArrayRef<at::Tensor> partner_runs = partner ? c10::ArrayRef<at::Tensor>(*partner) : c10::ArrayRef<at::Tensor>();
  if (!runs_writable(runs->flats, partner_runs)) return false;
  const bool written = write_each_run(runs->flats, partner_runs, write, [&](size_t r) {
    // Name the failing leaf without writing any leaf twice.
    bump_versions(a);
    name_failing_leaf(runs->flats[r], a, b, [&](size_t i) { return runs->run[i] == r; }, write, key_of, op);
  });
  if (written) bump_versions(a);
  return written;
}

}  // namespace

bool write_intact_runs(const TensorDict& td, const TensorDict* partner,
                       FunctionRef<void(const at::Tensor& flat, const at::Tensor& partner_flat)> write, const char* op) {
  const auto runs = in_memory::intact_runs(*td.impl());
  if (!runs || !runs->writable) return false;
  std::optional<in_memory::IntactRuns> other;
  if (partner != nullptr) {
    other = in_memory::intact_runs(*partner->impl());
    if (!other || !in_memory::runs_laid_out_alike(*td.impl(), *runs, *partner->impl(), *other)) return false;
  }
  const auto& flats = runs->storages;
  const c10::ArrayRef<at::Tensor> partner_runs = other ? c10::ArrayRef<at::Tensor>(other->storages) : c10::ArrayRef<at::Tensor>();
  if (!runs_writable(flats, partner_runs)) return false;
  // Python's padding of a consolidated root is written with its runs, then put back (when this
  // goes out of scope, also on an error).
  in_memory::KeptPadding padding;
  if (!runs->exact && !padding.keep(*td.impl(), *runs)) return false;
  const bool written = write_each_run(flats, partner_runs, write, [&](size_t r) {
    // The failing leaf is named from the leaves, made now, without writing any twice.
    if (runs->own_versions) in_memory::bump_made_leaf_versions(*td.impl());
    const at::Tensor& flat = flats[r];
    const LeafList a = leaves_of(td), b = partner != nullptr ? leaves_of(*partner) : LeafList();
    const int64_t begin = flat.storage_offset(), end = begin + flat.numel();
    name_failing_leaf(
        flat, a, partner != nullptr ? &b : nullptr,
        [&](size_t i) {
          const int64_t at = a[i].storage_offset();
          return a[i].scalar_type() == flat.scalar_type() && a[i].storage().is_alias_of(flat.storage()) &&
                 at >= begin && (at < end || (at == end && a[i].numel() == 0));
        },
        write, LeafKeys{*td.impl()}, op);
  });
  if (written && runs->own_versions) in_memory::bump_made_leaf_versions(*td.impl());
  return written;
}

bool write_packed(const LeafList& leaves, FunctionRef<void(const at::Tensor& flat)> write,
                  FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  const auto write2 = [&](const at::Tensor& flat, const at::Tensor&) { write(flat); };
  if (const at::Tensor flat = packed_storage(leaves); flat.defined()) {
    if (write_over(flat, [&] { write(flat); })) {
      bump_versions(leaves);
      return true;
    }
    if (may_fail_midway(flat) && !(flat.is_inference() && !c10::InferenceMode::is_enabled())) {
      bump_versions(leaves);
      name_failing_leaf(flat, leaves, nullptr, [](size_t) { return true; }, write2, key_of, op);
    }
    return false;  // nothing written: the per-leaf path names the key
  }
  return write_runs(leaves, nullptr, write2, key_of, op);
}

bool write_packed(const LeafList& a, const LeafList& b,
                  FunctionRef<void(const at::Tensor& flat, const at::Tensor& partner_flat)> write,
                  FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  if (const at::Tensor fa = packed_storage(a); fa.defined()) {
    const at::Tensor fb = packed_storage(b);
    if (fb.defined() && same_layout(a, b)) {
      if (write_over(fa, [&] { write(fa, fb); })) {
        bump_versions(a);
        return true;
      }
      if (may_fail_midway(fa) && !(fa.is_inference() && !c10::InferenceMode::is_enabled())) {
        bump_versions(a);
        name_failing_leaf(fa, a, &b, [](size_t) { return true; }, write, key_of, op);
      }
      return false;  // nothing written: the per-leaf path names the key
    }
  }
  return write_runs(a, &b, write, key_of, op);
}

}  // namespace ops
}  // namespace tensordict
