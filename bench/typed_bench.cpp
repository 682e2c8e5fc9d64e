// Typed field access (generated accessors over the in-memory backend) against a plain struct
// holding at::Tensor members, and against the string-keyed TensorDict::get. Issue 5's target:
// typed access within 1.1x of the struct. Three levels of work per read, so the fixed cost of
// the accessor (a pointer and a version compare) is seen against what a read is used for:
//   Ref   - the tensor by reference, only its impl pointer used (the accessor's cost alone);
//   Copy  - the tensor copied into a local at::Tensor (refcount up and down), the usual
//           `at::Tensor r = x.reward();`;
//   Op    - a small in-place op on the tensor (reward.add_(1) on 32 floats).
// Run: build/bench/typed_bench [--benchmark_filter=Read]

#include <benchmark/benchmark.h>

#include <ATen/ATen.h>

#include "rl_transition.td.h"

namespace {

constexpr int64_t kBatch = 32;

struct PlainTransition {
  at::Tensor done, step_count, action, reward;
};

PlainTransition make_plain() {
  return PlainTransition{at::zeros({kBatch}, at::kBool), at::zeros({kBatch}, at::kLong), at::zeros({kBatch, 4}),
                         at::zeros({kBatch})};
}

rl::Transition make_typed() {
  rl::Transition t;
  t.set_batch_size({kBatch});
  t.set_done(at::zeros({kBatch}, at::kBool))
      .set_step_count(at::zeros({kBatch}, at::kLong))
      .set_obs(rl::Observation({{"pixels", at::zeros({kBatch, 84, 84, 3}, at::kByte)}, {"state", at::zeros({kBatch, 8})}},
                               {kBatch}))
      .set_action(at::zeros({kBatch, 4}))
      .set_reward(at::zeros({kBatch}));
  return t;
}

// ---- One field by reference ------------------------------------------------------------------
void BM_ReadRef_PlainStruct(benchmark::State& state) {
  PlainTransition s = make_plain();
  for (auto _ : state) benchmark::DoNotOptimize(s.reward.unsafeGetTensorImpl());
}
BENCHMARK(BM_ReadRef_PlainStruct);

void BM_ReadRef_Typed(benchmark::State& state) {
  rl::Transition t = make_typed();
  for (auto _ : state) benchmark::DoNotOptimize(t.reward().unsafeGetTensorImpl());
}
BENCHMARK(BM_ReadRef_Typed);

void BM_ReadRef_TensorDictGet(benchmark::State& state) {
  tensordict::TensorDict td = make_typed();
  for (auto _ : state) {
    at::Tensor r = td.get("reward");
    benchmark::DoNotOptimize(r.unsafeGetTensorImpl());
  }
}
BENCHMARK(BM_ReadRef_TensorDictGet);

// ---- Four fields, copied into locals ---------------------------------------------------------
void BM_ReadCopy4_PlainStruct(benchmark::State& state) {
  PlainTransition s = make_plain();
  for (auto _ : state) {
    at::Tensor a = s.done, b = s.step_count, c = s.action, d = s.reward;
    benchmark::DoNotOptimize(a.unsafeGetTensorImpl());
    benchmark::DoNotOptimize(b.unsafeGetTensorImpl());
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
    benchmark::DoNotOptimize(d.unsafeGetTensorImpl());
  }
}
BENCHMARK(BM_ReadCopy4_PlainStruct);

void BM_ReadCopy4_Typed(benchmark::State& state) {
  rl::Transition t = make_typed();
  for (auto _ : state) {
    at::Tensor a = t.done(), b = t.step_count(), c = t.action(), d = t.reward();
    benchmark::DoNotOptimize(a.unsafeGetTensorImpl());
    benchmark::DoNotOptimize(b.unsafeGetTensorImpl());
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
    benchmark::DoNotOptimize(d.unsafeGetTensorImpl());
  }
}
BENCHMARK(BM_ReadCopy4_Typed);

void BM_ReadCopy4_TensorDictGet(benchmark::State& state) {
  tensordict::TensorDict td = make_typed();
  for (auto _ : state) {
    at::Tensor a = td.get("done"), b = td.get("step_count"), c = td.get("action"), d = td.get("reward");
    benchmark::DoNotOptimize(a.unsafeGetTensorImpl());
    benchmark::DoNotOptimize(b.unsafeGetTensorImpl());
    benchmark::DoNotOptimize(c.unsafeGetTensorImpl());
    benchmark::DoNotOptimize(d.unsafeGetTensorImpl());
  }
}
BENCHMARK(BM_ReadCopy4_TensorDictGet);

// ---- A small op on the field -----------------------------------------------------------------
void BM_ReadOp_PlainStruct(benchmark::State& state) {
  PlainTransition s = make_plain();
  for (auto _ : state) s.reward.add_(1);
  benchmark::DoNotOptimize(s.reward.unsafeGetTensorImpl());
}
BENCHMARK(BM_ReadOp_PlainStruct);

void BM_ReadOp_Typed(benchmark::State& state) {
  rl::Transition t = make_typed();
  for (auto _ : state) t.reward().add_(1);
  benchmark::DoNotOptimize(t.reward().unsafeGetTensorImpl());
}
BENCHMARK(BM_ReadOp_Typed);

// ---- Writes (checked setter vs member assignment) ---------------------------------------------
void BM_Write_PlainStruct(benchmark::State& state) {
  PlainTransition s = make_plain();
  at::Tensor value = at::ones({kBatch});
  for (auto _ : state) {
    s.reward = value;
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Write_PlainStruct);

void BM_Write_Typed(benchmark::State& state) {
  rl::Transition t = make_typed();
  at::Tensor value = at::ones({kBatch});
  for (auto _ : state) {
    t.set_reward(value);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Write_Typed);

}  // namespace

BENCHMARK_MAIN();
