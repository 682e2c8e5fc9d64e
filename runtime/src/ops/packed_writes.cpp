// In-place ops over packed runs (Note [Packed runs], packed_runs.h): `write(flat, partner flats)`
// once per run of the written leaves, reading the runs of any partners (the other operands of
// `a.add_(b)`, `a.addcmul_(b, c)`) laid out alike.

#include "ops/packed_runs.h"

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/InferenceMode.h>

#include <tensordict/errors.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/intact_runs.h"
#include "ops/kernel.h"
#include "ops/packed.h"

namespace tensordict {
namespace ops {

namespace {

// Each partner's flat of one run (at most a few partners: no heap).
using RunPartners = c10::SmallVector<at::Tensor, 2>;

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
// is written twice. `partners`: the other operands' leaves, matched with a's.
[[noreturn]] void name_failing_leaf(const at::Tensor& flat, const LeafList& a, c10::ArrayRef<const LeafList*> partners,
                                    FunctionRef<bool(size_t)> in_flat, WriteWith write,
                                    FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (!in_flat(i)) continue;
    try {
      const at::AutoDispatchBelowADInplaceOrView below_autograd;  // Note [Below autograd], packed.cpp
      write(a[i].clone(), leaves_of_each(partners, i));
    } catch (...) {
      rethrow_leaf_error(op, [&] { return key_of(i); });
    }
  }
  TD_THROW(RuntimeError, op, " failed over the leaves of dtype ", c10::toString(flat.scalar_type()),
           " but over none of them alone");
}

// Whether runs may be written in place, checked before any write: none is an inference tensor
// outside inference mode (as write_over), and no partner run overlaps another of a's.
bool runs_writable(c10::ArrayRef<at::Tensor> flats, c10::ArrayRef<c10::ArrayRef<at::Tensor>> partners) {
  for (size_t r = 0; r < flats.size(); ++r) {
    if (flats[r].is_inference() && !c10::InferenceMode::is_enabled()) return false;
    for (const auto& partner : partners) {
      for (size_t s = 0; s < flats.size(); ++s)
        if (overlaps(partner[r], flats[s], s == r)) return false;
    }
  }
  return true;
}

// Whether `write` raises over an empty slice of `flat` (and of its partners): a dtype error, or a
// kernel missing for the dtype, comes before any element is written; a division by zero does not.
bool fails_before_writing(const at::Tensor& flat, c10::ArrayRef<at::Tensor> partners, WriteWith write) {
  try {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;  // Note [Below autograd], packed.cpp
    RunPartners empty;
    for (const at::Tensor& p : partners) empty.push_back(p.narrow(0, 0, 0));
    write(flat.narrow(0, 0, 0), empty);
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

// `write(flat, partner flats)` over each run. False when nothing was written and the per-leaf path
// is to name the key, as Python's `_foreach` loop does after writing the leaves before it:
// - Over several runs, each partner's run must have its run's dtype; the per-leaf path takes
//   any other mix.
// - The runs go in the order a cast error meets them first: lowest category first, or, with
//   partners, most below its highest partner's, then the run with the lowest category among it
//   and its partners, then the storage's order. A cast error, or an integer kernel refused
//   (`addcdiv` of integers, a true division into integers), then fails the first run, before
//   anything is written.
// - A later run of a dtype many kernels lack is tried over an empty slice before any run is
//   written: a kernel missing for it fails there.
// - A first run of integers or bools may fail midway (a division by zero): an empty slice tells
//   the two apart, on the error path only.
// After a failure midway, or a later run's failure none of this foresaw (a bitwise op on floats
// after integers), `name_failure(r)` raises the failing leaf's error; the runs before it stay
// written. Trying every run over an empty slice first would cost a dispatch a run (about 7,000
// instructions) on every in-place op that succeeds.
bool write_each_run(c10::ArrayRef<at::Tensor> flats, c10::ArrayRef<c10::ArrayRef<at::Tensor>> partners,
                    WriteWith write, FunctionRef<void(size_t)> name_failure) {
  // Over several runs, a partner of another dtype than its run's may make the op fail in a way
  // no order foresees (`addcdiv` of integer partners into floats, a cast LibTorch asserts on):
  // the per-leaf path then writes exactly the leaves before the failing key.
  if (flats.size() > 1) {
    for (const auto& partner : partners) {
      for (size_t r = 0; r < flats.size(); ++r)
        if (partner[r].scalar_type() != flats[r].scalar_type()) return false;
    }
  }
  // An insertion sort, stable: std::stable_sort would take a heap buffer for these few runs.
  c10::SmallVector<std::pair<std::pair<int, int>, uint32_t>, 8> order;  // ((rank, lowest), run)
  for (size_t r = 0; r < flats.size(); ++r) {
    const int own = type_category(flats[r].scalar_type());
    int highest = 0, lowest = own;
    for (const auto& partner : partners) {
      const int category = type_category(partner[r].scalar_type());
      highest = std::max(highest, category);
      lowest = std::min(lowest, category);
    }
    const std::pair<int, int> rank{own - highest, lowest};
    size_t at = order.size();
    order.emplace_back(rank, static_cast<uint32_t>(r));
    for (; at > 0 && order[at - 1].first > rank; --at) std::swap(order[at - 1], order[at]);
  }
  for (size_t i = 1; i < order.size(); ++i) {
    const size_t r = order[i].second;
    if (often_refused(flats[r].scalar_type()) && fails_before_writing(flats[r], run_of_each(partners, r), write))
      return false;
  }
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t r = order[i].second;
    const at::Tensor& flat = flats[r];
    const RunPartners run_partners = run_of_each(partners, r);
    if (write_over(flat, [&] { write(flat, run_partners); })) continue;
    // Nothing written yet: the per-leaf path names the key.
    if (i == 0 && (!may_fail_midway(flat) || fails_before_writing(flat, run_partners, write))) return false;
    name_failure(r);  // runs before this one, or part of it, are written
  }
  return true;
}

// In place over the runs of `a` (and the partners' laid out alike); see write_packed.
bool write_runs(const LeafList& a, c10::ArrayRef<const LeafList*> partners, WriteWith write,
                FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  const std::optional<PackedRuns> runs = packed_runs(a, Padding::Skip);
  if (!runs) return false;
  const auto partner_runs = partners_flats(*runs, a, partners);
  if (!partner_runs) return false;
  const c10::SmallVector<c10::ArrayRef<at::Tensor>, 2> partner_refs(partner_runs->begin(), partner_runs->end());
  if (!runs_writable(runs->flats, partner_refs)) return false;
  const bool written = write_each_run(runs->flats, partner_refs, write, [&](size_t r) {
    // Name the failing leaf without writing any leaf twice.
    bump_versions(a);
    name_failing_leaf(runs->flats[r], a, partners, [&](size_t i) { return runs->run[i] == r; }, write, key_of, op);
  });
  if (written) bump_versions(a);
  return written;
}

}  // namespace

bool write_intact_runs(const TensorDict& td, c10::ArrayRef<const TensorDict*> partners, WriteWith write,
                       const char* op) {
  const auto runs = in_memory::intact_runs(*td.impl());
  if (!runs || !runs->writable) return false;
  c10::SmallVector<const TensorDictBase*, 2> partner_levels;
  for (const TensorDict* partner : partners) partner_levels.push_back(partner->impl());
  c10::SmallVector<in_memory::IntactRuns, 2> others;
  if (!in_memory::partners_laid_out_alike(*td.impl(), *runs, partner_levels, others)) return false;
  const auto& flats = runs->storages;
  c10::SmallVector<c10::ArrayRef<at::Tensor>, 2> partner_runs;
  for (const auto& other : others) partner_runs.emplace_back(other.storages);
  if (!runs_writable(flats, partner_runs)) return false;
  // Python's padding of a consolidated root is written with its runs, then put back (when this
  // goes out of scope, also on an error).
  in_memory::KeptPadding padding;
  if (!runs->exact && !padding.keep(*td.impl(), *runs)) return false;
  const bool written = write_each_run(flats, partner_runs, write, [&](size_t r) {
    // The failing leaf is named from the leaves, made now, without writing any twice.
    if (runs->own_versions) in_memory::bump_made_leaf_versions(*td.impl());
    const at::Tensor& flat = flats[r];
    const LeafList a = leaves_of(td);
    c10::SmallVector<LeafList, 2> partner_leaves;
    for (const TensorDict* partner : partners) partner_leaves.push_back(leaves_of(*partner));
    c10::SmallVector<const LeafList*, 2> partner_ptrs;
    for (const LeafList& l : partner_leaves) partner_ptrs.push_back(&l);
    const int64_t begin = flat.storage_offset(), end = begin + flat.numel();
    name_failing_leaf(
        flat, a, partner_ptrs,
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

bool write_intact_runs(const TensorDict& td, const TensorDict* partner,
                       FunctionRef<void(const at::Tensor& flat, const at::Tensor& partner_flat)> write, const char* op) {
  const auto write_with = [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor> p) {
    write(flat, p.empty() ? at::Tensor() : p[0]);
  };
  if (partner == nullptr) return write_intact_runs(td, c10::ArrayRef<const TensorDict*>(), write_with, op);
  return write_intact_runs(td, c10::ArrayRef<const TensorDict*>(partner), write_with, op);
}

bool write_packed(const LeafList& a, c10::ArrayRef<const LeafList*> partners, WriteWith write,
                  FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  if (const at::Tensor fa = packed_storage(a); fa.defined()) {
    RunPartners flats;
    for (const LeafList* b : partners) {
      at::Tensor fb = packed_storage(*b);
      if (!fb.defined() || !same_layout(a, *b)) break;
      flats.push_back(std::move(fb));
    }
    if (flats.size() == partners.size()) {
      if (write_over(fa, [&] { write(fa, flats); })) {
        bump_versions(a);
        return true;
      }
      // An integer kernel may have written part of the storage (a division by zero); a dtype
      // error comes before any element, and the per-leaf path then bumps no version either.
      if (may_fail_midway(fa) && !(fa.is_inference() && !c10::InferenceMode::is_enabled()) &&
          !fails_before_writing(fa, flats, write)) {
        bump_versions(a);
        name_failing_leaf(fa, a, partners, [](size_t) { return true; }, write, key_of, op);
      }
      return false;  // nothing written: the per-leaf path names the key
    }
  }
  return write_runs(a, partners, write, key_of, op);
}

bool write_packed(const LeafList& leaves, FunctionRef<void(const at::Tensor& flat)> write,
                  FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  return write_packed(
      leaves, c10::ArrayRef<const LeafList*>(), [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor>) { write(flat); },
      key_of, op);
}

bool write_packed(const LeafList& a, const LeafList& b,
                  FunctionRef<void(const at::Tensor& flat, const at::Tensor& partner_flat)> write,
                  FunctionRef<NestedKey(size_t)> key_of, const char* op) {
  const LeafList* partner = &b;
  return write_packed(
      a, c10::ArrayRef<const LeafList*>(partner),
      [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor> p) { write(flat, p[0]); }, key_of, op);
}

}  // namespace ops
}  // namespace tensordict
