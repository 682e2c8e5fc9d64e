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

#include <tensordict/tensordict.h>

namespace {

using tensordict::TensorDict;

TensorDict fixture(int64_t rows, int64_t cols) {
  TensorDict td({}, {rows});
  for (int g = 0; g < 3; ++g)
    for (int x = 0; x < 10; ++x) td.set({"g" + std::to_string(g), "x" + std::to_string(x)}, at::randn({rows, cols}));
  return td;
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
  if (!tensordict::is_consolidated(packed_gpu) || !packed_gpu.get({"g1", "x3"}).is_cuda() ||
      !at::equal(packed_gpu.get({"g1", "x3"}).cpu(), td.get({"g1", "x3"}))) {
    std::fprintf(stderr, "cuda_transfer: the consolidated copy is wrong (consolidated %d, leaf on %s)\n",
                 static_cast<int>(tensordict::is_consolidated(packed_gpu)),
                 packed_gpu.get({"g1", "x3"}).device().str().c_str());
    std::exit(1);
  }
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
  run("fixture F: 30 x [64, 16] float32", 64, 16, reps);
  run("fixture B: 30 x [4096, 256] float32", 4096, 256, std::max(5, reps / 5));
  return 0;
}
