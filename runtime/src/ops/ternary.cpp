// Ternary arithmetic of TensorDict: lerp with a tensordict weight, addcmul / addcdiv (and their
// in-place forms), self matched with two tensordicts that must each have self's keys. One kernel
// over three packed storages or runs laid out alike where they are (Notes [Intact results] and
// [Packed runs]); out-of-place results keep the lock and drop nested levels left empty, as the
// binary ops' (arithmetic.cpp).

#include <ATen/ATen.h>

#include <tensordict/ops.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/level_shape.h"
#include "ops/kernel.h"
#include "ops/leafwise.h"
#include "ops/packed.h"
#include "ops/packed_runs.h"

namespace tensordict {

using namespace ops;

namespace {

// Ternary ops: self matched with two tensordicts, which must each have self's keys.
struct Ternary {
  MatchedLeaves first, second;
  Ternary(const TensorDict& self, const TensorDict& t1, const TensorDict& t2, bool inplace) {
    first.ignore_extra_rhs = second.ignore_extra_rhs = inplace;
    match_leaves(self, t1, BinaryDefault(), first);
    match_leaves(self, t2, BinaryDefault(), second);
  }
};

}  // namespace

namespace {

using Ternary3 = FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>;

// Out of place, `fn(self, t1, t2)` as one kernel over three packed storages laid out alike, or
// one a run of each (Note [Intact results], [Intact runs]), before matching leaves; nullopt
// otherwise, for the paths after matching.
std::optional<TensorDict> ternary_over_storages(const TensorDict& self, const TensorDict& t1, const TensorDict& t2,
                                                Ternary3 fn) {
  const at::Tensor fa = intact_storage_for_result(*self.impl());
  if (fa.defined()) {
    c10::intrusive_ptr<LevelShape> shape;  // self's, checked once for the layout and the result
    const at::Tensor fb = intact_partner(fa, self, t1, &shape), fc = intact_partner(fa, self, t2);
    if (!fb.defined() || !fc.defined()) return std::nullopt;
    const at::Tensor out = run_over(fa, [&](const at::Tensor& x) { return fn(x, fb, fc); });
    if (!out.defined()) return std::nullopt;
    return in_memory::intact_packed_like(*self.impl(), out, /*filter_empty=*/true, self.is_locked(), std::move(shape));
  }
  const TensorDictBase* partners[] = {t1.impl(), t2.impl()};
  return map_intact_run_tuples(
      *self.impl(), partners, [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor> p) { return fn(flat, p[0], p[1]); },
      0, /*filter_empty=*/true, self.is_locked());
}

// The same after matching: the matched leaves `x`, `y`, `z` of self, t1 and t2 tile three
// storages alike (Note [Packed runs] otherwise: runs laid out alike).
std::optional<TensorDict> ternary_over_leaves(const TensorDict& self_in, const TensorDict& self, const LeafList& x,
                                              const LeafList& y, const LeafList& z, Ternary3 fn) {
  const at::Tensor fa = packed_storage_for_result(x);
  if (fa.defined()) {
    const at::Tensor fb = packed_storage(y), fc = packed_storage(z);
    if (fb.defined() && fc.defined() && same_layout(x, y) && same_layout(x, z)) {
      const at::Tensor out = run_over(fa, [&](const at::Tensor& flat) { return fn(flat, fb, fc); });
      if (out.defined()) return packed_result(*self.impl(), out, x, /*filter_empty=*/true, self_in.is_locked());
    }
  }
  const LeafList* partners[] = {&y, &z};
  return map_run_tuples_result(
      *self.impl(), x, partners, [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor> p) { return fn(flat, p[0], p[1]); },
      0, /*filter_empty=*/true, self_in.is_locked());
}

}  // namespace

TensorDict TensorDict::lerp(const TensorDict& end, const TensorDict& weight) const {
  const auto fn = [](const at::Tensor& x, const at::Tensor& y, const at::Tensor& w) { return at::lerp(x, y, w); };
  if (auto fast = ternary_over_storages(*this, end, weight, fn)) return std::move(*fast);
  const TensorDict self = readable(*this);
  Ternary m(self, readable(end), readable(weight), false);
  if (auto fast = ternary_over_leaves(*this, self, m.first.lhs, m.first.rhs, m.second.rhs, fn)) return std::move(*fast);
  LeafList results = compute(
      m.first.lhs.size(), false, [] { return LeafList(); },
      [&](size_t i) { return fn(m.first.lhs[i], m.first.rhs[i], m.second.rhs[i]); }, LeafKeys{*self.impl()},
      "lerp");
  RebuildOptions options;
  options.filter_empty = true;
  return keep_lock(ops::rebuild(*self.impl(), std::move(results), options), *this);
}

namespace {
TensorDict addc(const TensorDict& self_in, const TensorDict& t1, const TensorDict& t2, const c10::Scalar& value, bool mul) {
  const auto fn = [&](const at::Tensor& x, const at::Tensor& y, const at::Tensor& z) {
    return mul ? at::addcmul(x, y, z, value) : at::addcdiv(x, y, z, value);
  };
  if (auto fast = ternary_over_storages(self_in, t1, t2, fn)) return std::move(*fast);
  const TensorDict self = readable(self_in);
  Ternary m(self, readable(t1), readable(t2), false);
  const LeafList &x = m.first.lhs, &y = m.first.rhs, &z = m.second.rhs;
  if (auto fast = ternary_over_leaves(self_in, self, x, y, z, fn)) return std::move(*fast);
  LeafList results = compute(
      x.size(), foreach_pays(x) && !needs_autograd(y) && !needs_autograd(z),
      [&] { return mul ? at::_foreach_addcmul(x, y, z, value) : at::_foreach_addcdiv(x, y, z, value); },
      [&](size_t i) { return fn(x[i], y[i], z[i]); },
      LeafKeys{*self.impl()}, mul ? "addcmul" : "addcdiv");
  RebuildOptions options;
  options.filter_empty = true;
  return keep_lock(ops::rebuild(*self.impl(), std::move(results), options), self_in);
}

void addc_(const TensorDict& self, const TensorDict& t1, const TensorDict& t2, const c10::Scalar& value, bool mul) {
  const char* op = mul ? "addcmul_" : "addcdiv_";
  const auto write = [&](const at::Tensor& flat, c10::ArrayRef<at::Tensor> p) {
    if (mul) flat.addcmul_(p[0], p[1], value);
    else flat.addcdiv_(p[0], p[1], value);
  };
  // Three intact trees laid out alike: one kernel a storage or run (Note [Intact results]).
  const TensorDict* partners[] = {&t1, &t2};
  if (write_over_intact(self, partners, write, op)) return;
  InPlaceTarget target(self);
  Ternary m(target.tree(), readable(t1), readable(t2), true);
  const LeafList &x = m.first.lhs, &y = m.first.rhs, &z = m.second.rhs;
  // Leaves that tile storages or lie in runs laid out alike: the same; else per leaf below.
  const LeafList* leaf_partners[] = {&y, &z};
  if (write_packed(x, leaf_partners, write, LeafKeys{*target.tree().impl()}, op)) {
    target.commit();
    return;
  }
  compute_(
      x.size(), foreach_inplace_safe(x, y) && foreach_inplace_safe(x, z),
      [&] {
        if (mul) at::_foreach_addcmul_(x, y, z, value);
        else at::_foreach_addcdiv_(x, y, z, value);
        return true;
      },
      [&](size_t i) {
        if (mul) x[i].addcmul_(y[i], z[i], value);
        else x[i].addcdiv_(y[i], z[i], value);
      },
      LeafKeys{*target.tree().impl()}, op);
  target.commit();
}
}  // namespace

TensorDict TensorDict::addcmul(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value) const {
  return addc(*this, tensor1, tensor2, value, true);
}
TensorDict& TensorDict::addcmul_(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value) {
  addc_(*this, tensor1, tensor2, value, true);
  return *this;
}
TensorDict TensorDict::addcdiv(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value) const {
  return addc(*this, tensor1, tensor2, value, false);
}
TensorDict& TensorDict::addcdiv_(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value) {
  addc_(*this, tensor1, tensor2, value, false);
  return *this;
}

}  // namespace tensordict
