// Copies, device and dtype conversions (semantics 1.14), in-place fills and pinning.

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/level_builder.h"
#include "core/detach_leaf.h"
#include "core/dim_names.h"
#include "core/plain_copy.h"
#include "core/validate.h"
#include "handle/key_path.h"
#include "ops/kernel.h"
#include "ops/leafwise.h"
#include "ops/packed.h"
#include "ops/packed_runs.h"

namespace tensordict {

using ops::keep_lock;

namespace {
// A copy of the same batch keeps the names (a lazy stack's copy is built from its members').
TensorDict keep_names(TensorDict out, const TensorDictBase& src) {
  if (C10_UNLIKELY(!src.dim_names().empty()) && out.impl()->dim_names().empty() && out.batch_size() == src.batch_size())
    detail::assign_names(*out.impl(), detail::names_of(src));
  return out;
}
}  // namespace

TensorDict TensorDict::to(at::Device device, bool non_blocking) const {
  if (this->device() == device) return *this;
  return keep_names(
      keep_lock(impl_->map_leaves([&](const at::Tensor& t) { return t.to(device, non_blocking); }, device), *this), *impl_);
}

namespace {
// A packed storage (a consolidated tensordict): `fn` once over all of it, the result cut into
// leaves laid out the same way (so it is packed too); undefined when the leaves are not packed.
std::optional<TensorDict> packed_map(const TensorDict& td, FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                     size_t result_itemsize = 0, bool lock = false) {
  if (auto intact = ops::map_intact(*td.impl(), fn, result_itemsize, false, lock))
    return keep_names(std::move(*intact), *td.impl());
  if (!td.impl()->leaves_alias_storage() || !ops::may_be_packed(*td.impl())) return std::nullopt;
  std::optional<TensorDict> packed = ops::map_packed(*td.impl(), ops::leaves_of(td), fn, result_itemsize, false, lock);
  if (packed) return keep_names(std::move(*packed), *td.impl());
  return std::nullopt;
}
}  // namespace

TensorDict TensorDict::to(at::ScalarType dtype) const {
  if (auto packed = packed_map(*this, [&](const at::Tensor& t) { return t.to(dtype); }, c10::elementSize(dtype), is_locked()))
    return *packed;
  // Plain CPU leaves between float and double: converted with no dispatch (Note [Plain copies]).
  return keep_names(
      keep_lock(impl_->map_leaves([&](const at::Tensor& t) { return detail::convert_tensor(t, dtype); }, device()), *this),
      *impl_);
}

TensorDict TensorDict::to(at::Device device, at::ScalarType dtype, bool non_blocking) const {
  return keep_lock(
      impl_->map_leaves([&](const at::Tensor& t) { return t.to(device, dtype, non_blocking); }, device), *this);
}

TensorDict TensorDict::cpu() const { return to(at::Device(at::kCPU)); }

TensorDict TensorDict::clone(bool recurse) const {
  if (recurse) {
    if (auto packed = packed_map(*this, [](const at::Tensor& t) { return t.clone(); })) return *packed;  // one copy
    // Plain CPU leaves copied with no dispatch (Note [Plain copies]).
    return keep_names(impl_->map_leaves(detail::clone_tensor, device()), *impl_);
  }
  return keep_names(impl_->map_leaves([](const at::Tensor& t) { return t; }, device()), *impl_);
}

TensorDict TensorDict::detach() const {
  // A consolidated tensordict: one detach() of its storage, the leaves made on first access.
  if (auto intact = in_memory::intact_detached(*impl_, is_locked())) return keep_names(std::move(*intact), *impl_);
  return keep_names(keep_lock(impl_->map_leaves(detail::detach_leaf, device()), *this), *impl_);
}

TensorDict TensorDict::contiguous() const {
  // A level whose reads are new tensors (a lazy stack, a file) becomes dense here: its snapshot.
  if (!impl_->leaves_alias_storage()) return impl_->snapshot();
  return impl_->map_leaves([](const at::Tensor& t) { return t.contiguous(); }, device());
}

TensorDict& TensorDict::pin_memory_() {
  if (!at::hasCUDA()) return *this;  // no pinned allocator: pin_memory() would copy nothing
  return ops::rebind_leaves(*this, pin_memory(), "pin_memory");
}

TensorDict TensorDict::to_tensordict() const { return ops::readable(*this).clone(); }

TensorDict TensorDict::pin_memory() const {
  // Pinned (page-locked) memory only speeds up copies to CUDA devices, and LibTorch has no
  // pinned allocator without CUDA: there the leaves are returned as they are.
  if (!at::hasCUDA()) return clone(/*recurse=*/false);
  return keep_lock(impl_->map_leaves([](const at::Tensor& t) { return t.is_cpu() ? t.pin_memory() : t; }, device()),
                   *this);
}

namespace {
TensorDict empty_structure(const TensorDictBase& td, bool recurse) {
  LevelBuilder out(td.batch_size(), td.device());
  if (recurse) {
    td.for_each_key([&](const std::string& key, EntryKind kind) {
      if (kind == EntryKind::TensorDict) {
        out.append(key, empty_structure(*td.get(key).tensordict_unchecked().impl(), true));
      }
    });
  }
  return out.finish();
}

// An elementwise in-place change of every leaf (zero_, fill_), written back through the backend
// where leaves are copies; once over a packed storage (a consolidated tensordict).
void update_every_leaf(const TensorDict& td, const char* op, FunctionRef<void(const at::Tensor&)> fn) {
  // An intact packed result (Note [Intact results]): its leaves view what this changes.
  if (ops::write_over_intact(td, fn, op)) return;
  ops::InPlaceTarget target(td);
  ops::LeafList leaves = ops::leaves_of(target.tree());
  // A packed storage or its runs; else the per-leaf path names the failing key.
  if (ops::write_packed(leaves, fn, ops::LeafKeys{*target.tree().impl()}, op)) {
    target.commit();
    return;
  }
  ops::compute_(
      leaves.size(), false, [] { return false; }, [&](size_t i) { fn(leaves[i]); },
      ops::LeafKeys{*target.tree().impl()}, op);
  target.commit();
}
}  // namespace

TensorDict TensorDict::empty(bool recurse) const { return empty_structure(*impl_, recurse); }

TensorDict TensorDict::empty_like() const {
  return impl_->map_leaves([](const at::Tensor& t) { return at::empty_like(t); }, device());
}

TensorDict& TensorDict::zero_() {
  // A plain CPU leaf: one memset (Note [Plain copies]).
  update_every_leaf(*this, "zero_", [](const at::Tensor& t) {
    if (!detail::zero_plain(t)) t.zero_();
  });
  return *this;
}

TensorDict& TensorDict::fill_(const c10::Scalar& value) {
  update_every_leaf(*this, "fill_", [&](const at::Tensor& t) { t.fill_(value); });
  return *this;
}

TensorDict& TensorDict::fill_(KeyRef key, const c10::Scalar& value) {
  detail::check_key(key);
  Entry holder;
  TensorDictBase* level = detail::level_of(impl_.get(), key, holder);
  Entry leaf = level->get(key.back());
  if (!leaf.defined()) detail::throw_missing(*level, key, key.size() - 1);
  TD_CHECK(leaf.is_tensor(), TypeError, "fill_ of ", key.repr(), " which holds ", kind_name(leaf.kind()));
  leaf.tensor_unchecked().fill_(value);
  // A copy was filled: it goes back through the backend.
  if (!level->leaves_alias_storage()) level->write_(key.back(), leaf.tensor_unchecked());
  return *this;
}

}  // namespace tensordict
