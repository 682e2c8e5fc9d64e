// Pointwise unary math of TensorDict (semantics 1.12): abs, exp, ..., clamp and pow with a
// scalar. Out-of-place forms run one `_foreach_*` call over all leaves where LibTorch has one and
// rebuild the structure (empty nested levels dropped, as Python's math ops do); in-place forms
// change the leaves (allowed on locked tensordicts) and write copies back through the backend.

#include <ATen/ATen.h>

#include "ops/kernel.h"
#include "ops/leafwise.h"
#include "ops/packed.h"
#include "ops/packed_runs.h"
#include "ops/pointwise.h"

namespace tensordict {

using namespace ops;

namespace ops {

TensorDict map_unary(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> loop,
                     FunctionRef<LeafList(const LeafList&)> foreach) {
  // An intact packed result (Note [Intact results]), or a packed storage (a consolidated
  // tensordict): one kernel over all of it.
  if (auto intact = map_intact(*td.impl(), loop, 0, /*filter_empty=*/true, td.is_locked())) return std::move(*intact);
  TensorDict src = readable(td);
  LeafList leaves = leaves_of(src);
  if (auto packed = map_packed(*src.impl(), leaves, loop, 0, /*filter_empty=*/true, td.is_locked()))
    return std::move(*packed);
  LeafList results = compute(
        leaves.size(), foreach_pays(leaves), [&] { return foreach(leaves); }, [&](size_t i) { return loop(leaves[i]); },
        LeafKeys{*src.impl()}, op);
  RebuildOptions options;
  options.filter_empty = true;
  return keep_lock(rebuild(*src.impl(), std::move(results), options), td);
}

namespace {
bool all_floating(const LeafList& leaves) {
  for (const auto& t : leaves) {
    if (!at::isFloatingType(t.scalar_type())) return false;
  }
  return true;
}
}  // namespace

void map_unary_(const TensorDict& td, const char* op, FunctionRef<void(const at::Tensor&)> loop,
                FunctionRef<bool(const LeafList&)> foreach) {
  // An intact packed result: its leaves view what this changes.
  if (write_over_intact(td, loop, op)) return;
  InPlaceTarget target(td);
  LeafList leaves = leaves_of(target.tree());
  // One kernel over the packed storage or its runs; else the per-leaf path below names the
  // failing key.
  if (write_packed(leaves, loop, LeafKeys{*target.tree().impl()}, op)) {
    target.commit();
    return;
  }
  // The foreach kernel for floating leaves (which in-place unary math cannot fail on), a loop
  // naming the failing key otherwise.
  compute_(
      leaves.size(), all_floating(leaves) && foreach_pays(leaves), [&] { return foreach(leaves); },
      [&](size_t i) { loop(leaves[i]); }, LeafKeys{*target.tree().impl()}, op);
  target.commit();
}

LeafList no_foreach(const LeafList&) { return LeafList(); }
bool no_foreach_(const LeafList&) { return false; }

}  // namespace ops

#define TENSORDICT_UNARY_WITH_FOREACH(name)                                                            \
  TensorDict TensorDict::name() const {                                                                \
    return map_unary(                                                                                  \
        *this, #name, [](const at::Tensor& t) { return t.name(); },                                    \
        [](const LeafList& l) { return at::_foreach_##name(l); });                                     \
  }                                                                                                    \
  TensorDict& TensorDict::name##_() {                                                                  \
    map_unary_(                                                                                        \
        *this, #name "_", [](const at::Tensor& t) { t.name##_(); },                                     \
        [](const LeafList& l) {                                                                        \
          at::_foreach_##name##_(l);                                                                   \
          return true;                                                                                 \
        });                                                                                            \
    return *this;                                                                                      \
  }

#define TENSORDICT_UNARY_LOOP(name)                                                                    \
  TensorDict TensorDict::name() const {                                                                \
    return map_unary(*this, #name, [](const at::Tensor& t) { return t.name(); }, no_foreach);          \
  }                                                                                                    \
  TensorDict& TensorDict::name##_() {                                                                  \
    map_unary_(*this, #name "_", [](const at::Tensor& t) { t.name##_(); }, no_foreach_);               \
    return *this;                                                                                      \
  }

// LibTorch 1.13 has no _foreach_sign; every other unary op of the list has a foreach kernel.
#define TENSORDICT_DEFINE_UNARY(name) TENSORDICT_UNARY_WITH_FOREACH(name)
TENSORDICT_FORALL_UNARY_OPS_WITH_FOREACH(TENSORDICT_DEFINE_UNARY)
#undef TENSORDICT_DEFINE_UNARY
TENSORDICT_UNARY_LOOP(sign)

#undef TENSORDICT_UNARY_WITH_FOREACH
#undef TENSORDICT_UNARY_LOOP

namespace {
// LibTorch 1.13 spells optionals c10::optional.
c10::optional<c10::Scalar> to_c10(const std::optional<c10::Scalar>& v) {
  return v ? c10::optional<c10::Scalar>(*v) : c10::nullopt;
}
}  // namespace

TensorDict TensorDict::clamp(const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max) const {
  TD_CHECK(min.has_value() || max.has_value(), ValueError, "clamp: at least one of min and max must be given");
  const auto lo = to_c10(min), hi = to_c10(max);
  return map_unary(*this, "clamp", [&](const at::Tensor& t) { return at::clamp(t, lo, hi); }, no_foreach);
}
TensorDict& TensorDict::clamp_(const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max) {
  TD_CHECK(min.has_value() || max.has_value(), ValueError, "clamp_: at least one of min and max must be given");
  const auto lo = to_c10(min), hi = to_c10(max);
  map_unary_(*this, "clamp_", [&](const at::Tensor& t) { t.clamp_(lo, hi); }, no_foreach_);
  return *this;
}
TensorDict TensorDict::clamp_min(const c10::Scalar& min) const {
  return map_unary(*this, "clamp_min", [&](const at::Tensor& t) { return at::clamp_min(t, min); }, no_foreach);
}
TensorDict& TensorDict::clamp_min_(const c10::Scalar& min) {
  map_unary_(*this, "clamp_min_", [&](const at::Tensor& t) { t.clamp_min_(min); }, no_foreach_);
  return *this;
}
TensorDict TensorDict::clamp_max(const c10::Scalar& max) const {
  return map_unary(*this, "clamp_max", [&](const at::Tensor& t) { return at::clamp_max(t, max); }, no_foreach);
}
TensorDict& TensorDict::clamp_max_(const c10::Scalar& max) {
  map_unary_(*this, "clamp_max_", [&](const at::Tensor& t) { t.clamp_max_(max); }, no_foreach_);
  return *this;
}
TensorDict TensorDict::pow(const c10::Scalar& exponent) const {
  return map_unary(*this, "pow", [&](const at::Tensor& t) { return at::pow(t, exponent); }, no_foreach);
}
TensorDict& TensorDict::pow_(const c10::Scalar& exponent) {
  map_unary_(*this, "pow_", [&](const at::Tensor& t) { t.pow_(exponent); }, no_foreach_);
  return *this;
}

}  // namespace tensordict
