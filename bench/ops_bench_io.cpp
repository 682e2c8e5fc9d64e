// bench/ops.md's I/O ops on fixture B (memmap save and load of 120 MiB, and the raw `dd`-style
// writes that bound them), each through tensordict-cpp and by hand: the second half of ops_bench.
//
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <tensordict/tensordict.h>

#include "ops_bench.h"

namespace ops_bench {

namespace {

using tensordict::TensorDict;

// Fixture B: 3 groups x 10 float32 leaves [4096, 256] = 120 MiB.
//
// ops.md's rules for I/O ops: 1 warm-up call, then 5 timed repetitions, median; page cache only
// (no fsync) except dd_write_fdatasync. Each call writes to a fresh directory; creating the
// input tensordict and removing directories are not timed (manual timing around the op).

namespace fs = std::filesystem;

constexpr int64_t kRowsB = 4096;
constexpr int64_t kColsB = 256;
constexpr size_t kLeafBytesB = static_cast<size_t>(kRowsB * kColsB) * sizeof(float);
constexpr size_t kTotalBytesB = kLeafBytesB * kGroups * kLeaves;

struct FixtureB {
  Groups src;          // the 30 tensors, by group
  std::string root;    // scratch directory under /tmp, removed at exit
  std::string td_dir;  // written once by memmap: the input of cpp/memmap_load_sum
  std::string raw_dir; // written once by the floor's writer: the input of floor/memmap_load_sum
  int next = 0;

  FixtureB() {
    at::manual_seed(1);
    for (int g = 0; g < kGroups; ++g) {
      Group group{"g" + std::to_string(g), {}};
      for (int x = 0; x < kLeaves; ++x) group.leaves.emplace_back("x" + std::to_string(x), at::randn({kRowsB, kColsB}));
      src.push_back(std::move(group));
    }
    std::string tmpl = (fs::temp_directory_path() / "td_ops_bench_XXXXXX").string();
    root = ::mkdtemp(tmpl.data());
    td_dir = fresh_dir();
    tensordict::memmap(wrap(), td_dir);
    raw_dir = fresh_dir();
    floor_save(raw_dir, nullptr);
  }
  ~FixtureB() { fs::remove_all(root); }

  std::string fresh_dir() { return root + "/" + std::to_string(next++); }

  // TensorDict(src_big, batch_size=[4096], device="cpu"): the leaves are shared, not copied.
  TensorDict wrap() const {
    std::vector<TensorDict::Item> items;
    for (const Group& g : src) {
      std::vector<TensorDict::Item> leaves;
      for (const auto& [k, t] : g.leaves) leaves.emplace_back(k, t);
      items.emplace_back(g.name, tensordict::EntryInit(leaves));
    }
    return TensorDict(items, {kRowsB}, at::Device(at::kCPU));
  }

  static void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }

  // The hand-written saver: per directory a small text meta file (batch size and entry names),
  // per leaf a raw file and a text meta file (dtype and shape), the layout of tensordict's
  // meta.json / *.memmap. With `mapped`, each leaf file is sized with ftruncate, mapped
  // MAP_SHARED and filled with memcpy, and the mapped tensors are kept (memmap_'s end state);
  // without it each leaf is written with write(2).
  void floor_save(const std::string& dir, Groups* mapped) const {
    fs::create_directories(dir);
    std::string names;
    for (const Group& g : src) names += g.name + "\n";
    write_text(dir + "/meta.txt", "batch 4096\n" + names);
    for (const Group& g : src) {
      const std::string gdir = dir + "/" + g.name;
      fs::create_directories(gdir);
      std::string leaf_names;
      for (const auto& kv : g.leaves) leaf_names += kv.first + "\n";
      write_text(gdir + "/meta.txt", "batch 4096\n" + leaf_names);
      if (mapped) mapped->push_back(Group{g.name, {}});
      for (const auto& [k, t] : g.leaves) {
        const std::string base = gdir + "/" + k;
        write_text(base + ".meta.txt", "float32 4096 256\n");
        const size_t n = t.numel() * t.element_size();
        const int fd = ::open((base + ".memmap").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) throw std::runtime_error("open failed: " + base);
        if (mapped) {
          if (::ftruncate(fd, static_cast<off_t>(n)) != 0) throw std::runtime_error("ftruncate failed");
          void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
          if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
          std::memcpy(p, t.data_ptr(), n);
          mapped->back().leaves.emplace_back(
              k, at::from_blob(p, t.sizes(), [n](void* q) { ::munmap(q, n); }, t.options()));
        } else {
          const char* p = static_cast<const char*>(t.data_ptr());
          for (size_t left = n; left > 0;) {
            const ssize_t w = ::write(fd, p, left);
            if (w <= 0) throw std::runtime_error("write failed");
            p += w;
            left -= static_cast<size_t>(w);
          }
        }
        ::close(fd);
      }
    }
  }

  // The hand-written loader: reads the meta files, maps each leaf file, sums every leaf.
  static at::Tensor floor_load_sum(const std::string& dir) {
    auto lines = [](const std::string& path) {
      std::ifstream in(path);
      std::vector<std::string> out;
      for (std::string line; std::getline(in, line);) out.push_back(line);
      return out;
    };
    at::Tensor total = at::zeros({});
    const auto groups = lines(dir + "/meta.txt");
    for (size_t gi = 1; gi < groups.size(); ++gi) {
      const std::string gdir = dir + "/" + groups[gi];
      const auto leaves = lines(gdir + "/meta.txt");
      for (size_t li = 1; li < leaves.size(); ++li) {
        const std::string base = gdir + "/" + leaves[li];
        std::string dtype;
        int64_t rows = 0, cols = 0;
        std::ifstream(base + ".meta.txt") >> dtype >> rows >> cols;
        const size_t n = static_cast<size_t>(rows * cols) * sizeof(float);
        const int fd = ::open((base + ".memmap").c_str(), O_RDONLY);
        if (fd < 0) throw std::runtime_error("open failed: " + base);
        void* p = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
        ::close(fd);
        if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
        at::Tensor leaf = at::from_blob(p, {rows, cols}, [n](void* q) { ::munmap(q, n); }, at::kFloat);
        total = total + leaf.sum();
      }
    }
    return total;
  }
};

FixtureB& fixture_b() {
  static FixtureB b;
  return b;
}

// An I/O op: `setup` (untimed) returns the state `op` consumes; `teardown` (untimed) cleans up.
// One warm-up call, then one timed call per iteration; 5 repetitions (ops.md's I/O rule).
template <typename Setup, typename Op>
void register_io(const std::string& name, Setup setup, Op op) {
  benchmark::RegisterBenchmark(name.c_str(), [setup, op](benchmark::State& state) {
    FixtureB& b = fixture_b();
    {
      auto warm = setup(b);
      op(b, warm);
    }
    for (auto _ : state) {
      auto input = setup(b);
      const auto t0 = std::chrono::steady_clock::now();
      op(b, input);
      const auto t1 = std::chrono::steady_clock::now();
      state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kTotalBytesB));
  })->UseManualTime()->Iterations(1)->Repetitions(5)->Unit(benchmark::kMillisecond);
}

// A fresh directory to write into, removed when the state goes (after the timed region).
struct ScratchDir {
  std::string path;
  explicit ScratchDir(std::string p) : path(std::move(p)) {}
  ScratchDir(ScratchDir&& o) noexcept : path(std::move(o.path)) { o.path.clear(); }
  ~ScratchDir() {
    if (!path.empty()) fs::remove_all(path);
  }
};

void dd_write(const std::string& path, bool fdatasync) {
  static const std::vector<char> block(1 << 20, 0);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("open failed: " + path);
  for (size_t i = 0; i < kTotalBytesB >> 20; ++i) {
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) {
      throw std::runtime_error("write failed");
    }
  }
  if (fdatasync) ::fdatasync(fd);
  ::close(fd);
}

}  // namespace

void register_io_ops() {
  using benchmark::DoNotOptimize;
  struct SaveInput {
    TensorDict td;
    ScratchDir dir;
  };
  // memmap_save: Python `TensorDict(src_big, ...).memmap_(prefix=d)`; only memmap_ is timed.
  auto save_setup = [](FixtureB& b) { return SaveInput{b.wrap(), ScratchDir(b.fresh_dir())}; };
  auto cpp_save = [](FixtureB&, SaveInput& in) { tensordict::memmap_(in.td, in.dir.path); };
  register_io("cpp/memmap_save", save_setup, cpp_save);
  register_io("floor/memmap_save", [](FixtureB& b) { return ScratchDir(b.fresh_dir()); },
              [](FixtureB& b, ScratchDir& dir) { b.floor_save(dir.path, nullptr); });
  // The same tensordict-cpp op against the floor that ends where memmap_ ends: leaves mapped.
  register_io("cpp/memmap_save_mmap", save_setup, cpp_save);
  register_io("floor/memmap_save_mmap", [](FixtureB& b) { return ScratchDir(b.fresh_dir()); },
              [](FixtureB& b, ScratchDir& dir) {
                Groups mapped;
                b.floor_save(dir.path, &mapped);
                DoNotOptimize(mapped);
              });
  // memmap_load_sum: load, then the sum of every leaf's sum (files in the page cache).
  register_io("cpp/memmap_load_sum", [](FixtureB& b) { return b.td_dir; },
              [](FixtureB&, const std::string& dir) {
                TensorDict out = tensordict::load_memmap(dir);
                at::Tensor s = at::zeros({});
                for (const auto& [key, entry] : out.items(/*include_nested=*/true, /*leaves_only=*/true)) {
                  s = s + entry.tensor().sum();
                }
                DoNotOptimize(s);
              });
  register_io("floor/memmap_load_sum", [](FixtureB& b) { return b.raw_dir; },
              [](FixtureB&, const std::string& dir) { DoNotOptimize(FixtureB::floor_load_sum(dir)); });
  // The raw write of the same byte count: what the disk path costs without any format.
  register_io("raw/dd_write_pagecache", [](FixtureB& b) { return ScratchDir(b.fresh_dir()); },
              [](FixtureB&, ScratchDir& dir) {
                fs::create_directories(dir.path);
                dd_write(dir.path + "/x", false);
              });
  register_io("raw/dd_write_fdatasync", [](FixtureB& b) { return ScratchDir(b.fresh_dir()); },
              [](FixtureB&, ScratchDir& dir) {
                fs::create_directories(dir.path);
                dd_write(dir.path + "/x", true);
              });
}

}  // namespace ops_bench
