// Host <-> GPU copies of a tensordict (issue 34): a consolidated tensordict in pinned memory moves
// as one asynchronous copy, against the per-leaf `to` a user writes by hand.
//
//   cuda_transfer [repetitions]
//
// Fixtures: F (30 float32 leaves of [64, 16], 120 KiB) and B (30 float32 leaves of [4096, 256],
// 120 MiB), in 3 nested groups. Rows, each timed to a device synchronize, median of the runs:
//   per_leaf          td.to(cuda): one pageable, blocking copy per leaf (what plain LibTorch does)
//   per_leaf_pinned   the leaves pinned, then one non-blocking copy per leaf
//   consolidated      consolidate(td, pin_memory).to(cuda, non_blocking): one copy, the leaves
//                     views of the device storage
//   floor_one_copy    the hand-written floor: storage.to(cuda, non_blocking) of the same pinned bytes
//   back_per_leaf / back_consolidated: the GPU copy to the CPU, per leaf and consolidated.
// Not a Google Benchmark binary (the GPU machine has none); TENSORDICT_BUILD_CUDA_BENCH builds it.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/tensordict.h>

namespace {

using tensordict::TensorDict;

TensorDict fixture(int64_t rows, int64_t cols) {
  TensorDict td({}, {rows});
  for (int g = 0; g < 3; ++g)
    for (int x = 0; x < 10; ++x) td.set({"g" + std::to_string(g), "x" + std::to_string(x)}, at::randn({rows, cols}));
  return td;
}

// Exits 1 unless `moved` is consolidated with every leaf of `td`, equal, on its storage's device.
void require_same_leaves(const TensorDict& moved, const TensorDict& td, const char* what) {
  const at::Device device = tensordict::consolidated_storage(moved).device();
  bool ok = tensordict::is_consolidated(moved);
  for (const tensordict::NestedKey& key : td.keys(true, true)) {
    const at::Tensor leaf = moved.get(key);
    if (!ok || leaf.device() != device || leaf.scalar_type() != td.get(key).scalar_type() ||
        !at::equal(leaf.cpu(), td.get(key))) {
      std::fprintf(stderr, "cuda_transfer: %s, the consolidated copy is wrong at %s\n", what, key.repr().c_str());
      std::exit(1);
    }
  }
}

// Leaves of several dtypes (a 0-size one), nested, beside a lazy stack: checked both ways, untimed.
void check_mixed() {
  TensorDict td({{"f", at::randn({4, 3})},
                 {"i", at::arange(4, at::kLong)},
                 {"b", at::rand({4, 5}) > 0.5},
                 {"n", {{"h", at::randn({4, 7}).to(at::kHalf)}, {"e", at::empty({4, 0})}}}},
                {4});
  td.set_non_tensor("s", "text");
  td.set("ls", tensordict::lazy_stack({TensorDict({{"x", at::randn({2})}}, {}), TensorDict({{"x", at::randn({2})}}, {}),
                                       TensorDict({{"x", at::randn({2})}}, {}), TensorDict({{"x", at::randn({2})}}, {})}));
  tensordict::ConsolidateOptions pin;
  pin.pin_memory = true;
  const TensorDict on_gpu = tensordict::consolidate(td, pin).to(at::Device(at::kCUDA), /*non_blocking=*/true);
  require_same_leaves(on_gpu, td, "mixed dtypes to the GPU");
  require_same_leaves(on_gpu.to(at::Device(at::kCPU)), td, "mixed dtypes back");
  std::printf("mixed dtypes, nested levels and a lazy stack: every leaf equal both ways\n");
}

// Median microseconds of `fn` over `reps` runs after 3 warm-ups, each ended by a device sync.
double median_us(int reps, const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  torch::cuda::synchronize();
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    torch::cuda::synchronize();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

void run(const char* name, int64_t rows, int64_t cols, int reps) {
  const at::Device gpu(at::kCUDA);
  TensorDict td = fixture(rows, cols);
  TensorDict pinned = td.pin_memory();
  tensordict::ConsolidateOptions pin;
  pin.pin_memory = true;
  TensorDict packed = tensordict::consolidate(td, pin);
  const at::Tensor storage = tensordict::consolidated_storage(packed);
  TensorDict on_gpu = td.to(gpu);
  TensorDict packed_gpu = packed.to(gpu, /*non_blocking=*/true);
  const double mib = static_cast<double>(storage.numel()) / (1 << 20);

  TensorDict sink;
  at::Tensor sink_t;
  const double per_leaf = median_us(reps, [&] { sink = td.to(gpu); });
  const double per_leaf_pinned = median_us(reps, [&] { sink = pinned.to(gpu, true); });
  const double consolidated = median_us(reps, [&] { sink = packed.to(gpu, true); });
  const double floor = median_us(reps, [&] { sink_t = storage.to(gpu, /*non_blocking=*/true); });
  const double back_per_leaf = median_us(reps, [&] { sink = on_gpu.to(at::Device(at::kCPU)); });
  const double back_consolidated = median_us(reps, [&] { sink = packed_gpu.to(at::Device(at::kCPU)); });
  require_same_leaves(packed_gpu, td, "to the GPU");
  require_same_leaves(packed_gpu.to(at::Device(at::kCPU)), td, "back");
  std::printf("%s (%.2f MiB)\n", name, mib);
  std::printf("  %-18s %10.1f us\n", "per_leaf", per_leaf);
  std::printf("  %-18s %10.1f us\n", "per_leaf_pinned", per_leaf_pinned);
  std::printf("  %-18s %10.1f us  (%.2fx faster than per_leaf, %.2f of floor_one_copy, %.1f GB/s)\n", "consolidated",
              consolidated, per_leaf / consolidated, consolidated / floor, mib * 1.048576e-3 / (consolidated * 1e-6));
  std::printf("  %-18s %10.1f us\n", "floor_one_copy", floor);
  std::printf("  %-18s %10.1f us\n", "back_per_leaf", back_per_leaf);
  std::printf("  %-18s %10.1f us  (%.2fx faster than back_per_leaf)\n", "back_consolidated", back_consolidated,
              back_per_leaf / back_consolidated);
}

}  // namespace

int main(int argc, char** argv) {
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "cuda_transfer: no CUDA device\n");
    return 77;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  at::manual_seed(0);
  check_mixed();
  run("fixture F: 30 x [64, 16] float32", 64, 16, reps);
  run("fixture B: 30 x [4096, 256] float32", 4096, 256, std::max(5, reps / 5));
  return 0;
}
