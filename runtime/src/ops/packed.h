#pragma once
// One kernel over a packed storage (ops/packed.cpp): the fast path of elementwise ops over a
// consolidated tensordict.

#include <cstddef>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <tensordict/function_ref.h>

#include "ops/leafwise.h"

namespace tensordict {

class LevelBuilder;
struct LevelShape;

namespace ops {

/// False when two tensor leaves of `td` sit in different storages (a tensordict that is not
/// consolidated), found at the second leaf: a cheap test before collecting every leaf.
bool may_be_packed(const TensorDictBase& td);
/// The flat view of the one storage `leaves` tile exactly (same dtype, contiguous, in storage
/// order, no gap, overlap or foreign byte, no autograd); undefined otherwise.
at::Tensor packed_storage(const LeafList& leaves);
/// The largest CPU result an out-of-place op makes over a whole packed storage; a larger one is
/// made per leaf. glibc's malloc serves a request above its mmap threshold with fresh pages from
/// the kernel, and that threshold stops rising at 32 MiB on 64-bit systems: a larger result is
/// mapped anew on every call and each of its pages faults in zeroed, while 30 results of a few
/// MiB are reused from the heap. Fixture B (30 x 4 MiB, bench/cuda_packed --cpu): one 120 MiB
/// `exp` took 98 ms against 60 ms per leaf, `to(kDouble)` 142 against 42, all of the gap system
/// time. Above this size the dispatches one kernel saves are a vanishing part of the work anyway.
constexpr size_t kLargestPackedCpuResult = size_t{32} << 20;
/// packed_storage(leaves) for an out-of-place op, whose result is new memory of
/// `result_itemsize` bytes an element (0: the leaves' own); undefined also where one result
/// over the whole storage costs more than the kernels it saves (a large CPU result, packed.cpp).
at::Tensor packed_storage_for_result(const LeafList& leaves, size_t result_itemsize = 0);
/// Runs `write`, an in-place kernel over the packed storage `flat`, and says whether it ran. False
/// when `flat` is undefined; when it is an inference tensor outside inference mode (PyTorch raises
/// that error only after writing, so the per-leaf path would write again); or when `write` raised
/// a c10::Error, which the kernels raise before writing (a dtype error): the per-leaf path then
/// runs and names the key. `write` runs below autograd (Note [Below autograd], packed.cpp): it may
/// read only `flat`, a partner's packed storage and scalars.
bool write_over(const at::Tensor& flat, FunctionRef<void()> write);
/// write_over() for an intact packed result `td` (Note [Intact results]): `write(flat)` over its
/// storage, then the version bumps of its made leaves that have counters of their own; or over
/// each of its runs (write_intact_runs, Note [Intact runs]), a failure after a write named under
/// `op`. False when `td` is no intact result or nothing was written.
bool write_over_intact(const TensorDict& td, FunctionRef<void(const at::Tensor& flat)> write, const char* op);
/// The same for a binary op: also false unless `partner` is an intact result laid out as `td`
/// (intact_partner), whose storage `write` gets second.
bool write_over_intact(const TensorDict& td, const TensorDict& partner,
                       FunctionRef<void(const at::Tensor& flat, const at::Tensor& partner_flat)> write, const char* op);
/// The same with any number of partners, each an intact result laid out as `td`, whose storages
/// `write` gets in order (`a.addcmul_(b, c)`: two).
bool write_over_intact(const TensorDict& td, c10::ArrayRef<const TensorDict*> partners,
                       FunctionRef<void(const at::Tensor& flat, c10::ArrayRef<at::Tensor> partner_flats)> write,
                       const char* op);
/// After an in-place op over packed_storage(leaves): bumps each leaf's version, as the op on each
/// leaf would have (the storage's flat view has a version counter of its own), so autograd
/// refuses a backward through a leaf saved before the change.
void bump_versions(const LeafList& leaves);
/// True when `a[i]` and `b[i]` sit at the same element offset with the same shape, for every i:
/// an elementwise op between their packed storages pairs the right elements.
bool same_layout(const LeafList& a, const LeafList& b);
/// An elementwise result over packed_storage(leaves), cut into leaves laid out as `leaves`.
LeafList unpack_like(const at::Tensor& flat, const LeafList& leaves);
/// rebuild(like, unpack_like(flat, leaves)) with like's batch sizes, whose leaves are made on
/// first access (Note [Lazy leaves]): a result dropped, or consumed whole by the next op, never
/// pays for them. `leaves` are like's tensor leaves in key order; `filter_empty` drops nested
/// levels without entries, as RebuildOptions::filter_empty; `lock` builds it locked, as lock_()
/// would leave it (keep_lock then has nothing to do).
TensorDict packed_result(const TensorDictBase& like, const at::Tensor& flat, const LeafList& leaves,
                         bool filter_empty = false, bool lock = false);

/// A tree shaped like `like` (its batch sizes, dim names, nested levels and non-tensor entries),
/// whose tensor leaves `add_leaf(level, key)` adds, in key order (depth first): the frame of every
/// packed result. `filter_empty` drops nested levels left without entries, `lock` builds it
/// locked; `packed` marks its levels as a packed op's result (Note [Intact results]). `reshaped`,
/// when given, sets the batch sizes as rebuild() does (RebuildOptions::batch_size and
/// nested_extra_dims; a level keeps its dim names only where its batch size stays).
TensorDict result_like(const TensorDictBase& like, FunctionRef<void(LevelBuilder& level, const std::string& key)> add_leaf,
                       bool filter_empty, bool lock, bool packed, const RebuildOptions* reshaped = nullptr);

/// fn(flat), an out-of-place op over a whole packed storage, for a result laid out like the
/// operand; undefined when `flat` is undefined, when `fn` raises a c10::Error (the per-leaf path
/// then names the leaf), or when the result views `flat`'s storage (`to` of the same dtype,
/// `detach`): per leaf such an op returns the leaves themselves, or views sharing their version
/// counters, where new leaves over the same storage would not see each other's in-place changes.
/// As write_over(), `fn` runs below autograd and may read only `flat`, a partner's packed storage
/// and scalars.
at::Tensor run_over(const at::Tensor& flat, FunctionRef<at::Tensor(const at::Tensor&)> fn);
/// `fn` once over the packed storage of `leaves` (like's tensor leaves in key order, as
/// packed_storage_for_result), its result laid out as `like` (packed_result); nullopt when they
/// are not packed or `fn` raised a c10::Error (the per-leaf path then names the leaf).
std::optional<TensorDict> map_packed(const TensorDictBase& like, const LeafList& leaves,
                                     FunctionRef<at::Tensor(const at::Tensor&)> fn, size_t result_itemsize = 0,
                                     bool filter_empty = false, bool lock = false);

/// The storage of an intact packed result (in_memory::intact_packed_storage, Note [Intact
/// results]) that an out-of-place op of `result_itemsize` bytes an element (0: the leaves' own)
/// may run over whole, as packed_storage_for_result; undefined otherwise.
at::Tensor intact_storage_for_result(const TensorDictBase& td, size_t result_itemsize = 0);
/// The storage of `b` when `a` and `b` are intact packed results of one batch size laid out alike
/// (in_memory::intact_packed_storage_like), `fa` being `a`'s storage (undefined: none): then a binary op
/// between them is one kernel over `fa` and this. Undefined otherwise. `a_shape`, when given,
/// receives a's shape where it was made, for the result (in_memory::intact_packed_like).
at::Tensor intact_partner(const at::Tensor& fa, const TensorDict& a, const TensorDict& b,
                          c10::intrusive_ptr<LevelShape>* a_shape = nullptr);
/// `fn` once over the storage of an intact packed result, its result laid out as `td`
/// (in_memory::intact_packed_like); nullopt when `td` is no such result or `fn` raised a
/// c10::Error (the per-leaf path then names the leaf).
std::optional<TensorDict> map_intact(const TensorDictBase& td, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                     size_t result_itemsize = 0, bool filter_empty = false, bool lock = false);

}  // namespace ops
}  // namespace tensordict
