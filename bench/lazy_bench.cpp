// Lazy stacks (issue 13) against hand-written LibTorch doing the same work: a std::vector of
// member structures (one tensor per key; shared_ptr where a selection hands out members, as the
// stack shares its members) and at::stack of the members' leaves. Each member holds
// fixture F's leaf set for one row (30 float32 leaves of [16]); the stack has 64 members, and
// index({i}) also runs at 16 and 256 members to show it stays O(1) in the member count.
// Run: scripts/bench.sh (the lazy table), or build-release/bench/lazy_bench

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>

namespace {

constexpr int kLeaves = 30;
constexpr int64_t kWidth = 16;

std::string key(int i) { return "k" + std::to_string(i); }

struct PlainMember {
  std::vector<at::Tensor> leaves;  // leaves[k] is key k's tensor
};

std::vector<PlainMember> plain_members(int64_t n) {
  std::vector<PlainMember> out(static_cast<size_t>(n));
  for (auto& m : out) {
    for (int k = 0; k < kLeaves; ++k) m.leaves.push_back(at::randn({kWidth}));
  }
  return out;
}

tensordict::LazyStackedTensorDict lazy_members(int64_t n) {
  std::vector<tensordict::TensorDict> members;
  for (int64_t i = 0; i < n; ++i) {
    tensordict::TensorDict m;
    for (int k = 0; k < kLeaves; ++k) m.set(key(k), at::randn({kWidth}));
    members.push_back(m);
  }
  return tensordict::lazy_stack(members);
}

void BM_IndexMember_Lazy(benchmark::State& state) {
  auto ls = lazy_members(state.range(0));
  const int64_t i = state.range(0) / 2;
  for (auto _ : state) benchmark::DoNotOptimize(ls.index({i}).impl());
}
BENCHMARK(BM_IndexMember_Lazy)->Arg(16)->Arg(64)->Arg(256);

// The hand-written equivalent of "the member itself": members shared by the stack and its
// users (std::shared_ptr, as the lazy stack holds TensorDict handles), so a selection is a
// handle copy that keeps the member alive.
std::vector<std::shared_ptr<PlainMember>> shared_members(int64_t n) {
  std::vector<std::shared_ptr<PlainMember>> out;
  for (auto& m : plain_members(n)) out.push_back(std::make_shared<PlainMember>(std::move(m)));
  return out;
}

void BM_IndexMember_Floor(benchmark::State& state) {
  auto members = shared_members(state.range(0));
  const size_t i = static_cast<size_t>(state.range(0) / 2);
  for (auto _ : state) {
    std::shared_ptr<PlainMember> m = members[i];
    benchmark::DoNotOptimize(m.get());
  }
}
BENCHMARK(BM_IndexMember_Floor)->Arg(16)->Arg(64)->Arg(256);

void BM_GetKey_Lazy(benchmark::State& state) {
  auto ls = lazy_members(64);
  for (auto _ : state) benchmark::DoNotOptimize(ls.get("k7"));
}
BENCHMARK(BM_GetKey_Lazy);

void BM_GetKey_Floor(benchmark::State& state) {
  auto members = plain_members(64);
  std::vector<at::Tensor> parts(members.size());
  for (auto _ : state) {
    for (size_t i = 0; i < members.size(); ++i) parts[i] = members[i].leaves[7];
    benchmark::DoNotOptimize(at::stack(parts, 0));
  }
}
BENCHMARK(BM_GetKey_Floor);

void BM_SliceHalf_Lazy(benchmark::State& state) {
  auto ls = lazy_members(64);
  for (auto _ : state) benchmark::DoNotOptimize(ls.index({at::indexing::Slice(0, 32)}));
}
BENCHMARK(BM_SliceHalf_Lazy);

void BM_SliceHalf_Floor(benchmark::State& state) {
  auto members = shared_members(64);
  for (auto _ : state) {
    std::vector<std::shared_ptr<PlainMember>> half(members.begin(), members.begin() + 32);
    benchmark::DoNotOptimize(half.data());
  }
}
BENCHMARK(BM_SliceHalf_Floor);

void BM_SetKey_Lazy(benchmark::State& state) {
  auto ls = lazy_members(64);
  at::Tensor value = at::randn({64, kWidth});
  for (auto _ : state) ls.set("k3", value);
}
BENCHMARK(BM_SetKey_Lazy);

void BM_SetKey_Floor(benchmark::State& state) {
  auto members = plain_members(64);
  at::Tensor value = at::randn({64, kWidth});
  for (auto _ : state) {
    std::vector<at::Tensor> parts = value.unbind(0);
    for (size_t i = 0; i < members.size(); ++i) members[i].leaves[3] = parts[i];
  }
}
BENCHMARK(BM_SetKey_Floor);

void BM_Contiguous_Lazy(benchmark::State& state) {
  auto ls = lazy_members(64);
  for (auto _ : state) benchmark::DoNotOptimize(ls.contiguous());
}
BENCHMARK(BM_Contiguous_Lazy);

void BM_Contiguous_Floor(benchmark::State& state) {
  auto members = plain_members(64);
  std::vector<at::Tensor> parts(members.size());
  for (auto _ : state) {
    std::vector<at::Tensor> stacked;
    stacked.reserve(kLeaves);
    for (int k = 0; k < kLeaves; ++k) {
      for (size_t i = 0; i < members.size(); ++i) parts[i] = members[i].leaves[static_cast<size_t>(k)];
      stacked.push_back(at::stack(parts, 0));
    }
    benchmark::DoNotOptimize(stacked.data());
  }
}
BENCHMARK(BM_Contiguous_Floor);

// The shared_ptr floors again once the process has started a thread, as every LibTorch program
// has once its intra-op pool runs: glibc lets libstdc++ count shared_ptr references without
// atomics while a process has one thread, and c10::intrusive_ptr always uses atomics.
// Registered last, so the floors above still run single-threaded.
void start_a_thread() {
  static const bool started = [] {
    std::thread([] {}).join();
    return true;
  }();
  (void)started;
}

void BM_IndexMember_FloorThreaded(benchmark::State& state) {
  start_a_thread();
  BM_IndexMember_Floor(state);
}
BENCHMARK(BM_IndexMember_FloorThreaded)->Arg(64);

void BM_SliceHalf_FloorThreaded(benchmark::State& state) {
  start_a_thread();
  BM_SliceHalf_Floor(state);
}
BENCHMARK(BM_SliceHalf_FloorThreaded);

}  // namespace

BENCHMARK_MAIN();
