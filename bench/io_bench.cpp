// I/O benchmarks of the memmap backend (bench/ops.md, fixture B):
//   BM_memmap_save/T     memmap() of fixture B (30 float32 leaves [4096, 256], 120 MiB) to a fresh
//                        directory under /tmp with T writer threads (MemmapOptions::num_threads):
//                        files written, mapped, meta.json written (issue 34: 2 threads >= 1.5x 1)
//   BM_plain_write       write(2) of the same 30 buffers into 30 files of a fresh directory:
//                        the reference throughput (target: memmap_save >= 0.8 of it)
//   BM_load_memmap/MB    load_memmap of a 10-leaf directory of 10 MB and of 1 GB (target: equal
//                        within noise, the files are mapped lazily, not read)
//   BM_stats_tdtool/MB   what `tdtool info --stats` computes (sum, min, max per leaf: leaf_stats)
//                        over a loaded memmap directory of 30 float32 leaves, 24 MB and 240 MB
//   BM_stats_plain/MB    the same numbers from plain LibTorch on the same mapped leaves:
//                        t.sum(kDouble), t.min(), t.max() (target: >= 1 GB/s, see the
//                        bytes_per_second counter, and the ratio to this floor)
//   BM_consolidate/T     consolidate() of fixture B with T intra-op threads (issue 34: 2 threads at
//                        least 1.5x faster than 1); BM_copy_floor/T: one copy_ per leaf into a
//                        preallocated byte buffer, the hand-written floor
// Page cache only (no fsync), one intra-op thread unless the name says T; directories are removed outside the timing.

#include <filesystem>
#include <map>
#include <vector>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <tensordict/tensordict.h>

#include "leaf_stats.h"

namespace {

namespace fs = std::filesystem;
using tensordict::TensorDict;

constexpr int64_t kRows = 4096;
constexpr int64_t kCols = 256;
constexpr int64_t kBytesB = 30 * kRows * kCols * 4;

std::string scratch(const char* name) {
  std::string tmpl = (fs::temp_directory_path() / (std::string("td_io_bench_") + name + "_XXXXXX")).string();
  return ::mkdtemp(tmpl.data());
}

const TensorDict& fixture_b() {
  static TensorDict td = [] {
    at::manual_seed(0);
    TensorDict out({}, {kRows}, at::Device(at::kCPU));
    for (int g = 0; g < 3; ++g) {
      for (int x = 0; x < 10; ++x) {
        out.set({"g" + std::to_string(g), "x" + std::to_string(x)}, at::randn({kRows, kCols}));
      }
    }
    return out;
  }();
  return td;
}

void BM_memmap_save(benchmark::State& state) {
  at::set_num_threads(1);
  const TensorDict& td = fixture_b();
  const std::string root = scratch("save");
  tensordict::MemmapOptions options;
  options.num_threads = static_cast<int>(state.range(0));
  int run = 0;
  for (auto _ : state) {
    const std::string dir = root + "/" + std::to_string(run++);
    {
      TensorDict mm = tensordict::memmap(td, dir, options);
      benchmark::DoNotOptimize(mm);
    }
    state.PauseTiming();
    fs::remove_all(dir);
    state.ResumeTiming();
  }
  fs::remove_all(root);
  state.SetBytesProcessed(state.iterations() * kBytesB);
}

void write_all(const std::string& path, const void* data, size_t n) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) break;
    p += w;
    n -= static_cast<size_t>(w);
  }
  ::close(fd);
}

void BM_plain_write(benchmark::State& state) {
  const TensorDict& td = fixture_b();
  auto leaves = td.items(/*include_nested=*/true, /*leaves_only=*/true);
  const std::string root = scratch("write");
  int run = 0;
  for (auto _ : state) {
    const std::string dir = root + "/" + std::to_string(run++);
    for (int g = 0; g < 3; ++g) fs::create_directories(dir + "/g" + std::to_string(g));
    for (const auto& [key, entry] : leaves) {
      const at::Tensor& t = entry.tensor();
      write_all(dir + "/" + key.join("/") + ".bin", t.data_ptr(), t.numel() * t.element_size());
    }
    state.PauseTiming();
    fs::remove_all(dir);
    state.ResumeTiming();
  }
  fs::remove_all(root);
  state.SetBytesProcessed(state.iterations() * kBytesB);
}

// load_memmap of 10 leaves totalling state.range(0) MB (sparse zero files from memmap_like:
// the loader's cost must not depend on the data size, so the data need not be on disk).
void BM_load_memmap(benchmark::State& state) {
  const int64_t total = state.range(0) * 1000 * 1000;
  const int64_t per_leaf = total / 10 / 4;
  const std::string root = scratch("load");
  const std::string dir = root + "/td";
  {
    TensorDict meta_only({}, {per_leaf});
    for (int i = 0; i < 10; ++i) meta_only.set("x" + std::to_string(i), at::zeros({1}).expand({per_leaf}));
    tensordict::memmap_like(meta_only, dir);
  }
  for (auto _ : state) {
    TensorDict td = tensordict::load_memmap(dir);
    benchmark::DoNotOptimize(td);
  }
  fs::remove_all(root);
}

}  // namespace

// A memmapped directory of 30 float32 leaves [rows, 512], written once per size.
TensorDict stats_fixture(int64_t megabytes) {
  static std::map<int64_t, TensorDict> loaded;
  auto it = loaded.find(megabytes);
  if (it != loaded.end()) return it->second;
  const int64_t rows = megabytes * 1024 * 1024 / (30 * 512 * 4);
  TensorDict td({}, {rows});
  at::manual_seed(0);
  for (int i = 0; i < 30; ++i) td.set("x" + std::to_string(i), at::rand({rows, 512}));
  const std::string dir = scratch("stats");
  tensordict::memmap(td, dir + "/td");
  TensorDict mm = tensordict::load_memmap(dir + "/td");
  fs::remove_all(dir);  // the mappings stay valid
  return loaded[megabytes] = mm;
}

void BM_stats_tdtool(benchmark::State& state) {
  TensorDict td = stats_fixture(state.range(0));
  for (auto _ : state) {
    double acc = 0;
    for (const auto& [key, entry] : td.items(true, true)) {
      const LeafStats s = leaf_stats(entry.tensor());
      acc += s.sum + s.min + s.max;
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 1024 * 1024);
}

void BM_stats_plain(benchmark::State& state) {
  TensorDict td = stats_fixture(state.range(0));
  std::vector<at::Tensor> leaves;
  for (const auto& [key, entry] : td.items(true, true)) leaves.push_back(entry.tensor());
  for (auto _ : state) {
    double acc = 0;
    for (const at::Tensor& t : leaves) {
      acc += t.sum(at::kDouble).item<double>() + t.min().item<double>() + t.max().item<double>();
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 1024 * 1024);
}

void BM_consolidate(benchmark::State& state) {
  at::set_num_threads(static_cast<int>(state.range(0)));
  const TensorDict& td = fixture_b();
  for (auto _ : state) benchmark::DoNotOptimize(tensordict::consolidate(td));
  state.SetBytesProcessed(state.iterations() * kBytesB);
  at::set_num_threads(1);
}

void BM_copy_floor(benchmark::State& state) {
  at::set_num_threads(static_cast<int>(state.range(0)));
  const TensorDict& td = fixture_b();
  std::vector<at::Tensor> leaves;
  for (const auto& e : td.values(true, true)) leaves.push_back(e.tensor());
  for (auto _ : state) {
    at::Tensor storage = at::empty({kBytesB}, at::kByte);
    int64_t offset = 0;
    for (const at::Tensor& t : leaves) {
      const int64_t n = t.numel() * 4;
      storage.narrow(0, offset, n).view(at::kFloat).view(t.sizes()).copy_(t);
      offset += n;
    }
    benchmark::DoNotOptimize(storage);
  }
  state.SetBytesProcessed(state.iterations() * kBytesB);
  at::set_num_threads(1);
}

BENCHMARK(BM_memmap_save)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(5)->Repetitions(3)->UseRealTime();
BENCHMARK(BM_plain_write)->Unit(benchmark::kMillisecond)->Iterations(5)->Repetitions(3)->UseRealTime();
BENCHMARK(BM_load_memmap)->Arg(10)->Arg(1000)->Unit(benchmark::kMicrosecond)->Repetitions(3);

BENCHMARK(BM_stats_tdtool)->Arg(24)->Arg(240)->Unit(benchmark::kMillisecond)->Repetitions(3)->UseRealTime();
BENCHMARK(BM_consolidate)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Repetitions(3)->UseRealTime();
BENCHMARK(BM_copy_floor)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Repetitions(3)->UseRealTime();
BENCHMARK(BM_stats_plain)->Arg(24)->Arg(240)->Unit(benchmark::kMillisecond)->Repetitions(3)->UseRealTime();
