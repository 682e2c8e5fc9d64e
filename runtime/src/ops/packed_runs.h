#pragma once
// Note [Packed runs]: one kernel per run of leaves, where one kernel over the whole storage
// (ops/packed.h) does not apply. A run is a list of leaves of one dtype that lie back to back in
// one storage. A consolidated tensordict of mixed dtypes is one run per dtype (consolidate lays
// each dtype's leaves out together); one whose 4-byte leaves Python's layout pads, a subset of
// one (select, exclude) and an op's result over one (a storage per run) are a few runs too.
//
// Padding between two leaves of a run:
// - out of place, over floating or complex leaves, a run covers padding shorter than 8 bytes
//   (Python's alignment): the op reads those bytes, which cannot trap for these dtypes, and its
//   result holds their image where no leaf looks;
// - in place, and for reductions, all(), any() and (a == b).all(), a run never covers a byte
//   outside a leaf: a run stops at padding, which stays as it was and is never read. The one
//   exception is in place over a consolidated root kept intact (Note [Intact runs]): every leaf
//   of its storage is its own, so its runs are written whole, the padding's bytes kept aside
//   and put back after (in_memory::KeptPadding). Reductions over every leaf join the runs that
//   padding splits again as 2-D views that step over it (ops/element_views.h).
// Integer and bool leaves never run over padding: its bytes read as an integer can make a
// division raise (by zero) or trap (INT_MIN by -1), and read as a bool need not be 0 or 1.
//
// An op may read other operands ("partners": `b` of `a + b`, `b` and `c` of `a.addcmul_(b, c)`)
// whose runs lie as the first operand's. Finding runs and the out-of-place ops are in
// packed_runs.cpp, the in-place writes in packed_writes.cpp.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <tensordict/function_ref.h>
#include <tensordict/key.h>

#include <tensordict/tensor_dict.h>

#include "ops/leafwise.h"

namespace tensordict {
namespace ops {

/// Where the leaves of a list lie in their runs.
struct PackedRuns {
  /// One 1-D view per run, from its first leaf's first element to its last leaf's last.
  c10::SmallVector<at::Tensor, 4> flats;
  /// Per leaf, in the list's order: its run, and its storage offset in that run's flat.
  c10::SmallVector<uint32_t, 32> run;
  c10::SmallVector<int64_t, 32> offset;
};

/// A leaf a run may hold: its bytes are its values, in order, and nothing tracks it.
bool runnable(const at::Tensor& t);

/// Whether `leaves` lie in at most 8 storages and at most half as many as leaves: otherwise they
/// are apart (a tensordict never consolidated) and runs gain nothing. Checked first, since it
/// refuses most such trees after their first few leaves, before any sort.
bool in_few_storages(const LeafList& leaves);
/// The same over `n` leaves, leaf(i) the i-th (for a caller holding them otherwise than in a list).
template <typename Leaf>
bool in_few_storages(size_t n, Leaf&& leaf) {
  constexpr size_t kMostStorages = 8;
  c10::SmallVector<const c10::StorageImpl*, kMostStorages> storages;
  const size_t most_storages = std::min(kMostStorages, n / 2);
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& t = leaf(i);
    if (!t.defined() || !t.has_storage()) return false;
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    if (std::find(storages.begin(), storages.end(), storage) == storages.end()) {
      if (storages.size() == most_storages) return false;
      storages.push_back(storage);
    }
  }
  return true;
}

/// Whether a run may cover padding between leaves (Note [Packed runs]).
enum class Padding { Skip, ReadOver };

/// The runs of `leaves`: each contiguous, untracked by autograd, unnamed, not lazily negated or
/// conjugated, none overlapping another. Nullopt otherwise, and where runs would not save
/// kernels (more than one run for two leaves): the per-leaf path is as fast.
std::optional<PackedRuns> packed_runs(const LeafList& leaves, Padding padding);

/// An elementwise write over a run's flat reading each partner's flat of that run (the other
/// operands of an in-place op, in order).
using WriteWith = FunctionRef<void(const at::Tensor& flat, c10::ArrayRef<at::Tensor> partner_flats)>;
/// An elementwise op over a run's flat and each partner's flat of that run.
using MapWith = FunctionRef<at::Tensor(const at::Tensor& flat, c10::ArrayRef<at::Tensor> partner_flats)>;

/// `fn` once per run of `leaves` (Padding::ReadOver: `fn` is elementwise), its results cut into
/// leaves laid out as `leaves` (a storage per run). Nullopt when there are no runs, when `fn`
/// raises a c10::Error (the per-leaf path then names the key), or when a result is too large to
/// make at once (kLargestPackedCpuResult) or views its input.
std::optional<LeafList> map_runs(const LeafList& leaves, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                 size_t result_itemsize = 0);
/// map_runs, its results laid out as `like` (its tensor leaves `leaves`, in key order): leaves
/// made on first access (Note [Lazy leaves]); `filter_empty` and `lock` as packed_result's.
std::optional<TensorDict> map_runs_result(const TensorDictBase& like, const LeafList& leaves,
                                          FunctionRef<at::Tensor(const at::Tensor&)> fn, size_t result_itemsize,
                                          bool filter_empty, bool lock);
/// `fn` once over each storage of an unread result over runs (Note [Intact runs]), its result laid
/// out as `td`; nullopt when `td` is no such result, `fn` raises a c10::Error or a result is too
/// large or views its input.
std::optional<TensorDict> map_intact_runs(const TensorDictBase& td, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                          size_t result_itemsize, bool filter_empty, bool lock);
/// map_intact_runs for a binary elementwise `fn` between the flats of `a` and of `b`, laid out
/// alike (in_memory::runs_laid_out_alike); nullopt otherwise.
std::optional<TensorDict> map_intact_run_pairs(const TensorDictBase& a, const TensorDictBase& b,
                                               FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn,
                                               size_t result_itemsize, bool filter_empty, bool lock);
/// map_intact_run_pairs with any number of partners (`a.addcmul(b, c)`: two), each laid out as `a`.
std::optional<TensorDict> map_intact_run_tuples(const TensorDictBase& a, c10::ArrayRef<const TensorDictBase*> partners,
                                                MapWith fn, size_t result_itemsize, bool filter_empty, bool lock);
/// map_runs_result for a binary elementwise `fn` between leaves `a[i]` and `b[i]`, where b's
/// leaves lie in runs laid out as a's (same offsets in each run, each run one storage and dtype).
std::optional<TensorDict> map_run_pairs_result(const TensorDictBase& like, const LeafList& a, const LeafList& b,
                                               FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn,
                                               size_t result_itemsize, bool filter_empty, bool lock);

/// map_run_pairs_result with any number of partners, each laid out as `a`.
std::optional<TensorDict> map_run_tuples_result(const TensorDictBase& like, const LeafList& a,
                                                c10::ArrayRef<const LeafList*> partners,
                                                MapWith fn, size_t result_itemsize, bool filter_empty, bool lock);

/// An in-place elementwise `write` over the leaves: once over their packed storage
/// (packed_storage, write_over), else once per run (Padding::Skip); then every leaf's version is
/// bumped. False when nothing was written: the per-leaf path then runs and names the key. When
/// a run after the first fails, the runs before it stay written and the error names the leaf
/// that fails (`key_of(i)`, `op`), as the per-leaf path would have, never writing a leaf twice.
bool write_packed(const LeafList& leaves, FunctionRef<void(const at::Tensor& flat)> write,
                  FunctionRef<NestedKey(size_t)> key_of, const char* op);
/// The same for `write(a_flat, b_flat)`, in place over a's leaves, reading b's laid out alike.
bool write_packed(const LeafList& a, const LeafList& b,
                  FunctionRef<void(const at::Tensor& flat, const at::Tensor& partner_flat)> write,
                  FunctionRef<NestedKey(size_t)> key_of, const char* op);

/// write_packed with any number of partners (`a.addcmul_(b, c)`: two), each laid out as `a`.
bool write_packed(const LeafList& a, c10::ArrayRef<const LeafList*> partners, WriteWith write,
                  FunctionRef<NestedKey(size_t)> key_of, const char* op);

/// An in-place elementwise `write(flat, partner_flat)` once over each run of an intact tree
/// `td` (Note [Intact runs]) whose runs may be written whole, reading `partner`'s laid out alike
/// (partner_flat undefined without one), then the version bumps of made leaves with counters of
/// their own. False when nothing was written (no such tree, a partner laid out otherwise or
/// overlapping, a dtype error): the per-leaf path then runs. A failure after a write raises the
/// error of the failing leaf, named under `op`.
bool write_intact_runs(const TensorDict& td, const TensorDict* partner,
                       FunctionRef<void(const at::Tensor& flat, const at::Tensor& partner_flat)> write, const char* op);
/// write_intact_runs with any number of partners, each laid out as `td`.
bool write_intact_runs(const TensorDict& td, c10::ArrayRef<const TensorDict*> partners, WriteWith write,
                       const char* op);

/// The flats of run `r` of each partner (`partners[p][r]`), partners holding one flat per run.
template <typename Partners>
c10::SmallVector<at::Tensor, 2> run_of_each(const Partners& partners, size_t r) {
  c10::SmallVector<at::Tensor, 2> out;
  for (const auto& flats : partners) out.push_back(flats[r]);
  return out;
}

/// Leaf `i` of each partner's leaves.
inline c10::SmallVector<at::Tensor, 2> leaves_of_each(c10::ArrayRef<const LeafList*> partners, size_t i) {
  c10::SmallVector<at::Tensor, 2> out;
  for (const LeafList* leaves : partners) out.push_back((*leaves)[i]);
  return out;
}

/// Each partner's flats laid out as `runs` (partner_flats for each of them, a's leaves `a`);
/// nullopt when one's leaves do not lie so.
std::optional<c10::SmallVector<c10::SmallVector<at::Tensor, 4>, 2>> partners_flats(const PackedRuns& runs,
                                                                                 const LeafList& a,
                                                                                 c10::ArrayRef<const LeafList*> partners);

/// b's runs laid out as `runs` (a's): one flat per run of `runs`; nullopt when b's leaves do not
/// lie so.
std::optional<c10::SmallVector<at::Tensor, 4>> partner_flats(const PackedRuns& runs, const LeafList& a,
                                                             const LeafList& b);

}  // namespace ops
}  // namespace tensordict
