// One kernel over a consolidated tensordict on the GPU (issue 34 item 1): the ops of
// bench/packed_bench.cpp on a consolidated tensordict moved to CUDA, each against the same work
// written by hand. On a GPU each per-leaf `at::` call is one kernel launch, so the packed path
// saves 29 launches per op where the CPU saves 29 dispatches.
//
//   cuda_packed [repetitions] [--cpu]      (--cpu: the same checks and timings on the CPU)
//
// Fixtures: F (3 groups x 10 float32 leaves of [64, 16], 120 KiB) and B (the same tree of
// [4096, 256], 120 MiB). Columns, each the median over `repetitions` batches of 20 calls issued
// back to back and ended by one device synchronize (what a loop of ops costs per op):
//   cpp       the tensordict op on the consolidated tensordict;
//   per_leaf  the naive floor: one `at::` call per leaf;
//   storage   one `at::` call over the whole storage by hand (no leaves come out of it);
//   views     that call with its result cut into the 30 leaves by hand (split_with_sizes, view).
// Before timing, every op's result is checked against the per-leaf result (and, out of place,
// that its leaves share one storage: the packed path ran), also for a tensordict of mixed dtypes
// that must take the per-leaf path. Exits 1 on a wrong result, 77 without a CUDA device.
// Not a Google Benchmark binary (the GPU machine has none); TENSORDICT_BUILD_CUDA_BENCH builds it.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/tensordict.h>

#include "leaf_cut.h"
#include "ops/packed.h"  // the CPU result size above which ops run per leaf

namespace {

using tensordict::TensorDict;

at::Device g_device(at::kCPU);

void sync() {
  if (g_device.is_cuda()) torch::cuda::synchronize();
}

void fail(const std::string& what) {
  std::fprintf(stderr, "cuda_packed: %s\n", what.c_str());
  std::exit(1);
}

std::vector<at::Tensor> leaves_of(const TensorDict& td) {
  std::vector<at::Tensor> out;
  for (const auto& e : td.values(true, true))
    if (e.is_tensor()) out.push_back(e.tensor());
  return out;
}

struct Fixture {
  TensorDict td, td2;      // consolidated, one layout (in-place ops change td)
  TensorDict same, same2;  // consolidated, equal, never written
  std::vector<at::Tensor> leaves, leaves2, same_leaves, same_leaves2;
  at::Tensor storage, storage2, same_storage, same_storage2;
  LeafCut cut;  // a storage result cut into the leaves by hand
  // Out-of-place results come out packed, except CPU ones above ops::kLargestPackedCpuResult,
  // which are made per leaf; tests/unit/packed_kernel_test.cpp checks that rule.
  bool packed_results = true;

  Fixture(int64_t rows, int64_t cols) {
    TensorDict plain({}, {rows});
    for (int g = 0; g < 3; ++g)
      for (int x = 0; x < 10; ++x) plain.set({"g" + std::to_string(g), "x" + std::to_string(x)}, at::randn({rows, cols}));
    tensordict::ConsolidateOptions on_device;
    on_device.device = g_device;
    td = tensordict::consolidate(plain, on_device);
    td2 = tensordict::consolidate(plain.clone(), on_device);
    same = tensordict::consolidate(plain.clone(), on_device);
    same2 = tensordict::consolidate(plain.clone(), on_device);
    leaves = leaves_of(td);
    leaves2 = leaves_of(td2);
    same_leaves = leaves_of(same);
    same_leaves2 = leaves_of(same2);
    storage = tensordict::consolidated_storage(td).view(at::kFloat);
    storage2 = tensordict::consolidated_storage(td2).view(at::kFloat);
    same_storage = tensordict::consolidated_storage(same).view(at::kFloat);
    same_storage2 = tensordict::consolidated_storage(same2).view(at::kFloat);
    packed_results = !g_device.is_cpu() || storage.nbytes() <= tensordict::ops::kLargestPackedCpuResult;
    for (const at::Tensor& t : leaves)
      if (t.device().type() != g_device.type()) fail("a consolidated leaf is not on " + g_device.str());
    cut = LeafCut(leaves);
  }
};

// `got`'s leaves against `want`, leaf by leaf; `packed` also asks that they share one storage.
void require_leaves(const char* op, const TensorDict& got, const std::vector<at::Tensor>& want, bool packed) {
  const std::vector<at::Tensor> leaves = leaves_of(got);
  if (leaves.size() != want.size()) fail(std::string(op) + ": wrong number of leaves");
  for (size_t i = 0; i < want.size(); ++i) {
    const at::Tensor& a = leaves[i];
    const at::Tensor& b = want[i];
    const bool close = a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.device() == b.device() &&
                       (a.is_floating_point() ? at::allclose(a, b, 1e-6, 0.0, /*equal_nan=*/true) : at::equal(a, b));
    if (!close) fail(std::string(op) + ": leaf " + std::to_string(i) + " differs from the per-leaf result");
    if (packed && !a.storage().is_alias_of(leaves.front().storage()))
      fail(std::string(op) + ": the result's leaves are not in one storage (the packed path did not run)");
  }
}

std::vector<at::Tensor> map(const std::vector<at::Tensor>& in, const std::function<at::Tensor(const at::Tensor&)>& f) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : in) out.push_back(f(t));
  return out;
}

std::vector<at::Tensor> snapshot(const std::vector<at::Tensor>& in) {
  return map(in, [](const at::Tensor& t) { return t.clone(); });
}

// Every op of the table, checked once against the per-leaf result on `f`.
void check(Fixture& f) {
  require_leaves("exp", f.td.exp(), map(f.leaves, [](const at::Tensor& t) { return t.exp(); }), f.packed_results);
  require_leaves("td * 0.5", f.td * 0.5, map(f.leaves, [](const at::Tensor& t) { return t * 0.5; }), f.packed_results);
  require_leaves("td + td2", f.td + f.td2, [&] {
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < f.leaves.size(); ++i) out.push_back(f.leaves[i] + f.leaves2[i]);
    return out;
  }(), f.packed_results);
  require_leaves("td.gt(td2)", f.td.gt(f.td2 * 0.9), [&] {
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < f.leaves.size(); ++i) out.push_back(f.leaves[i].gt(f.leaves2[i] * 0.9));
    return out;
  }(), f.packed_results);
  require_leaves("clone", f.td.clone(), f.leaves, f.packed_results);
  require_leaves("to(kDouble)", f.td.to(at::kDouble), map(f.leaves, [](const at::Tensor& t) { return t.to(at::kDouble); }),
                 f.packed_results);
  require_leaves("(td * 2).exp().sub(1)", (f.td * 2).exp().sub(1),
                 map(f.leaves, [](const at::Tensor& t) { return (t * 2).exp().sub(1); }), f.packed_results);
  std::vector<at::Tensor> before = snapshot(f.leaves);
  f.td.add_(1e-6);
  require_leaves("add_(1e-6)", f.td, map(before, [](const at::Tensor& t) { return t.add(1e-6); }), true);
  before = snapshot(f.leaves);
  f.td.abs_();
  require_leaves("abs_()", f.td, map(before, [](const at::Tensor& t) { return t.abs(); }), true);
  std::vector<at::Tensor> flat = map(f.leaves, [](const at::Tensor& t) { return t.reshape({-1}); });
  const at::Tensor sum = f.td.sum(tensordict::reduce);
  if (!at::allclose(sum.to(at::kDouble), at::cat(flat).to(at::kDouble).sum(), 1e-4, 1e-3))
    fail("sum(reduce) differs from the sum of the leaves");
  if (!(f.same == f.same2).all()) fail("(a == b).all() of equal tensordicts is false");
  if ((f.td == f.td2).all()) fail("(a == b).all() of different tensordicts is true");
}

// Mixed dtypes, a 0-size leaf and nested levels: the per-leaf path, still right on the device.
void check_mixed() {
  TensorDict plain({{"f", at::randn({4, 3})},
                    {"i", at::arange(12, at::kLong).view({4, 3})},
                    {"n", {{"h", at::randn({4, 7}).to(at::kDouble)}, {"e", at::empty({4, 0})}}}},
                   {4});
  tensordict::ConsolidateOptions on_device;
  on_device.device = g_device;
  const TensorDict td = tensordict::consolidate(plain, on_device);
  const std::vector<at::Tensor> leaves = leaves_of(td);
  require_leaves("mixed * 2", td * 2, map(leaves, [](const at::Tensor& t) { return t * 2; }), false);
  require_leaves("mixed + mixed", td + td, map(leaves, [](const at::Tensor& t) { return t + t; }), false);
  require_leaves("mixed.clone()", td.clone(), leaves, false);
  require_leaves("mixed.abs()", td.abs(), map(leaves, [](const at::Tensor& t) { return t.abs(); }), false);
}

// Median microseconds per call: `reps` batches of 20 calls, each batch ended by one synchronize.
double median_us(int reps, const std::function<void()>& fn) {
  constexpr int kBatch = 20;
  for (int i = 0; i < kBatch; ++i) fn();
  sync();
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) fn();
    sync();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kBatch);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

struct Row {
  std::string op;
  double cpp, per_leaf, storage, views;  // views < 0: not applicable
};

void print(const char* name, const std::vector<Row>& rows) {
  std::printf("%s\n  %-22s %10s %10s %10s %10s %12s %11s %9s\n", name, "op", "cpp", "per_leaf", "storage", "views",
              "per_leaf/cpp", "cpp/storage", "cpp/views");
  for (const Row& r : rows) {
    std::printf("  %-22s %10.1f %10.1f %10.1f ", r.op.c_str(), r.cpp, r.per_leaf, r.storage);
    if (r.views >= 0)
      std::printf("%10.1f %12.2f %11.2f %9.2f\n", r.views, r.per_leaf / r.cpp, r.cpp / r.storage, r.cpp / r.views);
    else
      std::printf("%10s %12.2f %11.2f %9s\n", "-", r.per_leaf / r.cpp, r.cpp / r.storage, "-");
  }
}

void run(const char* name, int64_t rows, int64_t cols, int reps) {
  Fixture f(rows, cols);
  check(f);
  TensorDict sink;
  at::Tensor sink_t;
  std::vector<at::Tensor> sink_v;
  bool sink_b = false;
  auto per_leaf = [&](const std::function<at::Tensor(const at::Tensor&)>& op) {
    return median_us(reps, [&] {
      sink_v.clear();
      for (const at::Tensor& t : f.leaves) sink_v.push_back(op(t));
    });
  };
  auto per_pair = [&](const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& op) {
    return median_us(reps, [&] {
      sink_v.clear();
      for (size_t i = 0; i < f.leaves.size(); ++i) sink_v.push_back(op(f.leaves[i], f.leaves2[i]));
    });
  };
  std::vector<Row> rows_out;
  auto out_of_place = [&](const char* op, const std::function<TensorDict()>& cpp,
                          const std::function<at::Tensor(const at::Tensor&)>& leaf,
                          const std::function<at::Tensor()>& storage) {
    rows_out.push_back({op, median_us(reps, [&] { sink = cpp(); }), per_leaf(leaf),
                        median_us(reps, [&] { sink_t = storage(); }), median_us(reps, [&] { sink_v = f.cut(storage()); })});
  };
  auto in_place = [&](const char* op, const std::function<void()>& cpp,
                      const std::function<at::Tensor(const at::Tensor&)>& leaf, const std::function<void()>& storage) {
    rows_out.push_back({op, median_us(reps, cpp), per_leaf(leaf), median_us(reps, storage), -1});
  };
  out_of_place("exp()", [&] { return f.td.exp(); }, [](const at::Tensor& t) { return t.exp(); },
               [&] { return f.storage.exp(); });
  out_of_place("td * 0.5", [&] { return f.td * 0.5; }, [](const at::Tensor& t) { return t * 0.5; },
               [&] { return f.storage * 0.5; });
  in_place("add_(1e-6)", [&] { f.td.add_(1e-6); }, [](const at::Tensor& t) { return t.add_(1e-6); },
           [&] { f.storage.add_(1e-6); });
  in_place("abs_()", [&] { f.td.abs_(); }, [](const at::Tensor& t) { return t.abs_(); }, [&] { f.storage.abs_(); });
  rows_out.push_back({"a + b", median_us(reps, [&] { sink = f.td + f.td2; }),
                      per_pair([](const at::Tensor& a, const at::Tensor& b) { return a + b; }),
                      median_us(reps, [&] { sink_t = f.storage + f.storage2; }),
                      median_us(reps, [&] { sink_v = f.cut(f.storage + f.storage2); })});
  rows_out.push_back({"a.gt(b)", median_us(reps, [&] { sink = f.td.gt(f.td2); }),
                      per_pair([](const at::Tensor& a, const at::Tensor& b) { return a.gt(b); }),
                      median_us(reps, [&] { sink_t = f.storage.gt(f.storage2); }),
                      median_us(reps, [&] { sink_v = f.cut(f.storage.gt(f.storage2)); })});
  out_of_place("clone()", [&] { return f.td.clone(); }, [](const at::Tensor& t) { return t.clone(); },
               [&] { return f.storage.clone(); });
  out_of_place("to(kDouble)", [&] { return f.td.to(at::kDouble); }, [](const at::Tensor& t) { return t.to(at::kDouble); },
               [&] { return f.storage.to(at::kDouble); });
  rows_out.push_back({"sum(reduce)", median_us(reps, [&] { sink_t = f.td.sum(tensordict::reduce); }),
                      median_us(reps,
                                [&] {
                                  sink_v.clear();
                                  for (const at::Tensor& t : f.leaves) sink_v.push_back(t.reshape({-1}));
                                  sink_t = at::cat(sink_v).sum();
                                }),
                      median_us(reps, [&] { sink_t = f.storage.sum(); }), -1});
  // A host bool per call: every variant waits for the device, so its time is one round trip.
  rows_out.push_back({"(a == b).all()", median_us(reps, [&] { sink_b = static_cast<bool>((f.same == f.same2).all()); }),
                      median_us(reps,
                                [&] {
                                  bool all = true;
                                  for (size_t i = 0; i < f.same_leaves.size(); ++i)
                                    all = at::equal(f.same_leaves[i], f.same_leaves2[i]) && all;
                                  sink_b = all;
                                }),
                      median_us(reps, [&] { sink_b = at::equal(f.same_storage, f.same_storage2); }), -1});
  out_of_place("(td * 2).exp().sub(1)", [&] { return (f.td * 2).exp().sub(1); },
               [](const at::Tensor& t) { return (t * 2).exp().sub(1); }, [&] { return (f.storage * 2).exp().sub(1); });
  (void)sink_b;
  print(name, rows_out);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  bool cpu = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cpu") == 0)
      cpu = true;
    else
      reps = std::max(3, std::atoi(argv[i]));
  }
  if (!cpu && !torch::cuda::is_available()) {
    std::fprintf(stderr, "cuda_packed: no CUDA device (--cpu runs on the CPU)\n");
    return 77;
  }
  g_device = cpu ? at::Device(at::kCPU) : at::Device(at::kCUDA);
  at::manual_seed(0);
  check_mixed();
  std::printf("device %s, microseconds per call; mixed dtypes checked, each table's ops checked before timing\n",
              g_device.str().c_str());
  run("fixture F: 30 x [64, 16] float32 (0.12 MiB)", 64, 16, reps);
  run("fixture B: 30 x [4096, 256] float32 (120 MiB)", 4096, 256, std::max(3, reps / 5));
  return 0;
}
