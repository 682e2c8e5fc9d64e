// The fixed operation set of bench/ops.md, each op measured twice in the same binary:
// through tensordict-cpp ("cpp/<op>") and as hand-written LibTorch code doing the same work on
// the same tensors ("floor/<op>"): a nested std::vector of named tensors and plain loops.
// scripts/bench.sh runs this and prints `op_id cpp_us floor_us ratio`.
//
// Timing rules (ops.md): one intra-op thread; every result is created and destroyed inside the
// timed region. Fixture F's ops come first; fixture B's I/O ops (memmap save and load of
// 120 MiB, and the raw `dd`-style writes that bound them) are at the end of this file.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIndexing.h>
#include <benchmark/benchmark.h>

#include <tensordict/tensordict.h>

#include "instruction_count.h"
#include "paired_timing.h"

namespace {

using at::indexing::Slice;
using tensordict::TensorDict;

constexpr int64_t kBatch = 64;
constexpr int kGroups = 3;
constexpr int kLeaves = 10;

// ---- The floor's container: named groups of named tensors ------------------------------------

struct Group {
  std::string name;
  std::vector<std::pair<std::string, at::Tensor>> leaves;
};
using Groups = std::vector<Group>;

// A new Groups with the same names whose leaves are fn(leaf).
template <typename Fn>
Groups map_groups(const Groups& src, Fn&& fn) {
  Groups out;
  out.reserve(src.size());
  for (const Group& g : src) {
    Group ng{g.name, {}};
    ng.leaves.reserve(g.leaves.size());
    for (const auto& [k, t] : g.leaves) ng.leaves.emplace_back(k, fn(t));
    out.push_back(std::move(ng));
  }
  return out;
}

template <typename Fn>
Groups zip_groups(const Groups& a, const Groups& b, Fn&& fn) {
  Groups out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    Group ng{a[i].name, {}};
    ng.leaves.reserve(a[i].leaves.size());
    for (size_t j = 0; j < a[i].leaves.size(); ++j) {
      ng.leaves.emplace_back(a[i].leaves[j].first, fn(a[i].leaves[j].second, b[i].leaves[j].second));
    }
    out.push_back(std::move(ng));
  }
  return out;
}

// Splits every leaf into `n` pieces with fn(leaf) -> vector of n tensors.
template <typename Fn>
std::vector<Groups> split_groups(const Groups& src, size_t n, Fn&& fn) {
  std::vector<Groups> out(n);
  for (auto& o : out) {
    o.reserve(src.size());
    for (const Group& g : src) {
      o.push_back(Group{g.name, {}});
      o.back().leaves.reserve(g.leaves.size());
    }
  }
  for (size_t gi = 0; gi < src.size(); ++gi) {
    for (const auto& [k, t] : src[gi].leaves) {
      std::vector<at::Tensor> pieces = fn(t);
      for (size_t i = 0; i < n; ++i) out[i][gi].leaves.emplace_back(k, std::move(pieces[i]));
    }
  }
  return out;
}

Groups groups_of(const TensorDict& td) {
  Groups out;
  for (const auto& gk : td.keys()) {
    Group g{gk[0], {}};
    TensorDict sub = td.get_tensordict(gk);
    for (const auto& xk : sub.keys()) g.leaves.emplace_back(xk[0], sub.get(xk));
    out.push_back(std::move(g));
  }
  return out;
}

// ---- Fixture F --------------------------------------------------------------------------------

struct FixtureF {
  std::vector<TensorDict::Item> items;  // the source of `construct`
  TensorDict td, td_b, td_w, td_u, other8;
  std::vector<TensorDict> td_list16;
  Groups src, src_b, src_w, src_u, src_other8;
  std::vector<Groups> src_list16;
  at::Tensor mask, idx, new_leaf;
  std::vector<tensordict::NestedKey> select_keys{tensordict::NestedKey("g1"), tensordict::NestedKey({"g2", "x3"})};
  std::vector<tensordict::NestedKey> exclude_keys{tensordict::NestedKey({"g1", "x5"})};

  FixtureF() {
    at::manual_seed(0);
    for (int g = 0; g < kGroups; ++g) {
      std::vector<TensorDict::Item> group;
      for (int x = 0; x < kLeaves; ++x) {
        group.emplace_back("x" + std::to_string(x), at::randn({kBatch, 16}));
      }
      items.emplace_back("g" + std::to_string(g), tensordict::EntryInit(group));
    }
    td = TensorDict(items, {kBatch});
    td_b = td.clone();
    td_w = td.clone();
    td_u = td.clone();
    std::vector<TensorDict::Item> items8;
    for (int g = 0; g < kGroups; ++g) {
      std::vector<TensorDict::Item> group;
      for (int x = 0; x < kLeaves; ++x) group.emplace_back("x" + std::to_string(x), at::randn({8, 16}));
      items8.emplace_back("g" + std::to_string(g), tensordict::EntryInit(group));
    }
    other8 = TensorDict(items8, {8});
    for (int i = 0; i < 16; ++i) td_list16.push_back(td.clone());
    src = groups_of(td);
    src_b = groups_of(td_b);
    src_w = groups_of(td_w);
    src_u = groups_of(td_u);
    src_other8 = groups_of(other8);
    for (const auto& t : td_list16) src_list16.push_back(groups_of(t));
    mask = at::arange(kBatch).remainder(2).eq(0);
    idx = at::arange(63, -1, -2);
    new_leaf = at::randn({kBatch, 16});
  }
};

FixtureF& fixture() {
  static FixtureF f;
  return f;
}

// stack16 / cat16 by hand: one at::stack / at::cat per leaf over the 16 copies.
Groups floor_join(FixtureF& f, bool stack) {
  Groups out;
  out.reserve(f.src.size());
  std::vector<at::Tensor> column(f.src_list16.size());
  for (size_t g = 0; g < f.src.size(); ++g) {
    Group ng{f.src[g].name, {}};
    ng.leaves.reserve(f.src[g].leaves.size());
    for (size_t x = 0; x < f.src[g].leaves.size(); ++x) {
      for (size_t i = 0; i < f.src_list16.size(); ++i) column[i] = f.src_list16[i][g].leaves[x].second;
      ng.leaves.emplace_back(f.src[g].leaves[x].first, stack ? at::stack(column, 0) : at::cat(column, 0));
    }
    out.push_back(std::move(ng));
  }
  return out;
}

// ---- Registration helpers -----------------------------------------------------------------------

bool paired = false;  // ops_bench --paired: bench_paired::run times each op against its floor

template <typename Fn>
void register_op(const std::string& name, Fn fn) {
  bench_paired::registry().emplace_back(name, [fn] { fn(fixture()); });
  bench_count::configure(benchmark::RegisterBenchmark(name.c_str(), [fn, name](benchmark::State& state) {
    FixtureF& f = fixture();
    bench_count::counted_loop(state, name, [&] { fn(f); });
  })->Unit(benchmark::kMicrosecond));
}

// The floor body comes last (variadic) so it may hold braces with commas.
#define TD_BENCH(op, cpp_body, ...)                                         \
  register_op("cpp/" op, [](FixtureF& f) { cpp_body; });                    \
  register_op("floor/" op, [](FixtureF& f) { __VA_ARGS__; })

void register_all() {
  using benchmark::DoNotOptimize;

  TD_BENCH("construct", DoNotOptimize(TensorDict(f.items, {kBatch})), {
    Groups out;
    out.reserve(f.src.size());
    for (const Group& g : f.src) {
      Group ng{g.name, {}};
      ng.leaves.reserve(g.leaves.size());
      for (const auto& [k, t] : g.leaves) {
        if (t.dim() < 1 || t.size(0) != kBatch) throw std::runtime_error("batch mismatch");
        ng.leaves.emplace_back(k, t);
      }
      out.push_back(std::move(ng));
    }
    DoNotOptimize(out);
  });

  TD_BENCH("get_nested", DoNotOptimize(f.td.get({"g1", "x5"})), {
    at::Tensor found;
    for (const Group& g : f.src) {
      if (g.name != "g1") continue;
      for (const auto& [k, t] : g.leaves) {
        if (k == "x5") found = t;
      }
    }
    DoNotOptimize(found);
  });

  // set_new_nested: the key is removed (untimed) after every call.
  if (bench_count::fixed_iterations() == 0 && !paired) {
    benchmark::RegisterBenchmark("cpp/set_new_nested", [](benchmark::State& state) {
      FixtureF& f = fixture();
      for (auto _ : state) {
        auto t0 = std::chrono::steady_clock::now();
        f.td_w.set({"g1", "new"}, f.new_leaf);
        auto t1 = std::chrono::steady_clock::now();
        state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
        f.td_w.erase({"g1", "new"});
      }
    })->UseManualTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("floor/set_new_nested", [](benchmark::State& state) {
      FixtureF& f = fixture();
      for (auto _ : state) {
        auto t0 = std::chrono::steady_clock::now();
        for (Group& g : f.src_w) {
          if (g.name != "g1") continue;
          if (f.new_leaf.dim() < 1 || f.new_leaf.size(0) != kBatch) throw std::runtime_error("batch mismatch");
          g.leaves.emplace_back("new", f.new_leaf);
        }
        auto t1 = std::chrono::steady_clock::now();
        state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
        f.src_w[1].leaves.pop_back();
      }
    })->UseManualTime()->Unit(benchmark::kMicrosecond);
  } else {
    // Counted (and timed in pairs) with the removal inside: set + erase against emplace_back +
    // pop_back (a clock read around each call would be most of its cost).
    TD_BENCH("set_new_nested", {
      f.td_w.set({"g1", "new"}, f.new_leaf);
      f.td_w.erase({"g1", "new"});
    }, {
      for (Group& g : f.src_w) {
        if (g.name != "g1") continue;
        if (f.new_leaf.dim() < 1 || f.new_leaf.size(0) != kBatch) throw std::runtime_error("batch mismatch");
        g.leaves.emplace_back("new", f.new_leaf);
      }
      f.src_w[1].leaves.pop_back();
    });
  }

  TD_BENCH("index_int", DoNotOptimize(f.td.index({3})),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t.select(0, 3); })));
  TD_BENCH("slice", DoNotOptimize(f.td.index({Slice(at::indexing::None, 32)})),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t.slice(0, 0, 32); })));
  TD_BENCH("index_mask", DoNotOptimize(f.td.index({f.mask})),
           DoNotOptimize(map_groups(f.src, [&](const at::Tensor& t) { return t.index({f.mask}); })));
  TD_BENCH("index_long", DoNotOptimize(f.td.index({f.idx})),
           DoNotOptimize(map_groups(f.src, [&](const at::Tensor& t) { return t.index({f.idx}); })));
  TD_BENCH("setitem_slice", f.td_w.index_put_({Slice(at::indexing::None, 8)}, f.other8), {
    for (size_t g = 0; g < f.src_w.size(); ++g) {
      for (size_t x = 0; x < f.src_w[g].leaves.size(); ++x) {
        f.src_w[g].leaves[x].second.slice(0, 0, 8).copy_(f.src_other8[g].leaves[x].second);
      }
    }
  });

  TD_BENCH("update_at_slice", f.td_w.update_at_(f.other8, {Slice(at::indexing::None, 8)}), {
    for (size_t g = 0; g < f.src_w.size(); ++g) {
      for (size_t x = 0; x < f.src_w[g].leaves.size(); ++x) {
        f.src_w[g].leaves[x].second.slice(0, 0, 8).copy_(f.src_other8[g].leaves[x].second);
      }
    }
  });
  TD_BENCH("stack16", DoNotOptimize(tensordict::stack(f.td_list16, 0)), DoNotOptimize(floor_join(f, true)));
  TD_BENCH("stack16_contig", DoNotOptimize(tensordict::stack(f.td_list16, 0).contiguous()),
           DoNotOptimize(floor_join(f, true)));
  TD_BENCH("cat16", DoNotOptimize(tensordict::cat(f.td_list16, 0)), DoNotOptimize(floor_join(f, false)));

  TD_BENCH("to_float64", DoNotOptimize(f.td.to(at::kDouble)),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t.to(at::kDouble); })));
  TD_BENCH("to_float64_apply", DoNotOptimize(f.td.apply([](const at::Tensor& x) { return x.to(at::kDouble); })),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t.to(at::kDouble); })));
  TD_BENCH("clone", DoNotOptimize(f.td.clone()),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t.clone(); })));
  TD_BENCH("apply_mul2", DoNotOptimize(f.td.apply([](const at::Tensor& x) { return x * 2; })),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t * 2; })));
  // In place, every leaf of td_w scaled by 1 (its values stay, so every call does the same work).
  TD_BENCH("apply_inplace", f.td_w.apply_([](const at::Tensor& x) { return x.mul_(1.0); }), {
    for (Group& g : f.src_w) {
      for (auto& kv : g.leaves) kv.second.mul_(1.0);
    }
  });
  // update: td_b's 30 tensors replace td_u's (shared, not copied); every call does the same work.
  TD_BENCH("update", f.td_u.update(f.td_b), {
    for (const Group& gb : f.src_b) {
      for (Group& gu : f.src_u) {
        if (gu.name != gb.name) continue;
        for (const auto& [k, t] : gb.leaves) {
          if (t.dim() < 1 || t.size(0) != kBatch) throw std::runtime_error("batch mismatch");
          bool found = false;
          for (auto& kv : gu.leaves) {
            if (kv.first == k) {
              kv.second = t;
              found = true;
              break;
            }
          }
          if (!found) gu.leaves.emplace_back(k, t);
        }
      }
    }
  });
  // update_: td_b's values copied into td_w's leaves (its values stay those of td).
  TD_BENCH("update_inplace", f.td_w.update_(f.td_b), {
    for (size_t g = 0; g < f.src_w.size(); ++g) {
      for (size_t x = 0; x < f.src_w[g].leaves.size(); ++x) f.src_w[g].leaves[x].second.copy_(f.src_b[g].leaves[x].second);
    }
  });
  TD_BENCH("add_td", DoNotOptimize(f.td + f.td_b),
           DoNotOptimize(zip_groups(f.src, f.src_b, [](const at::Tensor& a, const at::Tensor& b) { return a + b; })));
  TD_BENCH("add_td_apply",
           DoNotOptimize(f.td.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, f.td_b)),
           DoNotOptimize(zip_groups(f.src, f.src_b, [](const at::Tensor& a, const at::Tensor& b) { return a + b; })));
  TD_BENCH("mul_scalar", DoNotOptimize(f.td * 0.5),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t * 0.5; })));
  TD_BENCH("mul_scalar_apply", DoNotOptimize(f.td.apply([](const at::Tensor& x) { return x * 0.5; })),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t * 0.5; })));
  TD_BENCH("reshape", DoNotOptimize(f.td.reshape({8, 8})),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t.reshape({8, 8, 16}); })));
  TD_BENCH("unsqueeze0", DoNotOptimize(f.td.unsqueeze(0)),
           DoNotOptimize(map_groups(f.src, [](const at::Tensor& t) { return t.unsqueeze(0); })));
  // select / exclude with the key lists built once, as a caller keeps them.
  TD_BENCH("select_nested", DoNotOptimize(f.td.select(f.select_keys)), {
    Groups out;
    for (const Group& g : f.src) {
      if (g.name == "g1") out.push_back(g);
      if (g.name != "g2") continue;
      Group ng{g.name, {}};
      for (const auto& kv : g.leaves) {
        if (kv.first == "x3") ng.leaves.push_back(kv);
      }
      out.push_back(std::move(ng));
    }
    DoNotOptimize(out);
  });
  TD_BENCH("exclude_nested", DoNotOptimize(f.td.exclude(f.exclude_keys)), {
    Groups out;
    out.reserve(f.src.size());
    for (const Group& g : f.src) {
      Group ng{g.name, {}};
      ng.leaves.reserve(g.leaves.size());
      for (const auto& kv : g.leaves) {
        if (g.name != "g1" || kv.first != "x5") ng.leaves.push_back(kv);
      }
      out.push_back(std::move(ng));
    }
    DoNotOptimize(out);
  });
  TD_BENCH("flatten_keys", DoNotOptimize(f.td.flatten_keys(".")), {
    std::vector<std::pair<std::string, at::Tensor>> flat;
    flat.reserve(kGroups * kLeaves);
    for (const Group& g : f.src) {
      for (const auto& [k, t] : g.leaves) flat.emplace_back(g.name + "." + k, t);
    }
    DoNotOptimize(flat);
  });
  TD_BENCH("keys_nested_leaves", DoNotOptimize(f.td.keys(true, true)), {
    std::vector<std::vector<std::string>> keys;
    keys.reserve(kGroups * kLeaves);
    for (const Group& g : f.src) {
      for (const auto& kv : g.leaves) keys.push_back({g.name, kv.first});
    }
    DoNotOptimize(keys);
  });
  TD_BENCH("eq_all", {
    bool r = (f.td == f.td_b).all();
    DoNotOptimize(r);
  }, {
    bool all = true;
    for (size_t g = 0; g < f.src.size(); ++g) {
      for (size_t x = 0; x < f.src[g].leaves.size(); ++x) {
        all = (f.src[g].leaves[x].second == f.src_b[g].leaves[x].second).all().item<bool>() && all;
      }
    }
    DoNotOptimize(all);
  });
  TD_BENCH("split4", DoNotOptimize(f.td.split(16, 0)),
           DoNotOptimize(split_groups(f.src, 4, [](const at::Tensor& t) { return t.split(16, 0); })));
  TD_BENCH("unbind0", DoNotOptimize(f.td.unbind(0)),
           DoNotOptimize(split_groups(f.src, kBatch, [](const at::Tensor& t) { return t.unbind(0); })));
}

// ---- Fixture B (I/O): 3 groups x 10 float32 leaves [4096, 256] = 120 MiB ---------------------
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

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  // glibc adapts its mmap threshold and trims the heap as large blocks come and go, so the same
  // op's allocations alternate between the heap and fresh, page-faulting mappings from one run
  // to the next (cat16's floor moved between 150 and 1100 us). Fixed thresholds give both sides
  // the same, steady allocator.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  fixture();  // built once, outside timing
  paired = bench_paired::take_flag(argc, argv);
  register_all();
  if (paired) {
    const char* rounds = std::getenv("TD_BENCH_ROUNDS");
    const char* filter = std::getenv("TD_BENCH_FILTER");
    bench_paired::run(rounds ? std::atoi(rounds) : 41, 2.0, filter ? filter : "");
    return 0;
  }
  // Fixture B is built on first use, so filtering it out costs nothing; its I/O is not counted
  // in instructions (scripts/bench_instructions.sh).
  if (bench_count::fixed_iterations() == 0) register_io_ops();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
