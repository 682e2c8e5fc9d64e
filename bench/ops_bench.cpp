// The fixed operation set of bench/ops.md, each op measured twice in the same binary:
// through tensordict-cpp ("cpp/<op>") and as hand-written LibTorch code doing the same work on
// the same tensors ("floor/<op>"): a nested std::vector of named tensors and plain loops.
// scripts/bench.sh runs this and prints `op_id cpp_us floor_us ratio`.
//
// Timing rules (ops.md): one intra-op thread; every result is created and destroyed inside the
// timed region. Fixture F's ops are here; fixture B's I/O ops (memmap save and load of 120 MiB,
// and the raw `dd`-style writes that bound them) in ops_bench_io.cpp.

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIndexing.h>
#include <benchmark/benchmark.h>

#include <tensordict/tensordict.h>

#include "instruction_count.h"
#include "ops_bench.h"
#include "paired_timing.h"
#include "steady_malloc.h"

namespace {

using at::indexing::Slice;
using tensordict::TensorDict;

using ops_bench::Group;
using ops_bench::Groups;
using ops_bench::kGroups;
using ops_bench::kLeaves;

constexpr int64_t kBatch = 64;

// ---- The floor's container (ops_bench.h) and helpers over it ----------------------------------


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

// set_new_nested by hand. The group's leaves are a dict's: a set assigns over a leaf already at
// the key and appends otherwise, so the key is looked for first (a bare emplace_back would add a
// second "new" when the key is there); the erase finds the key it removes.
std::vector<std::pair<std::string, at::Tensor>>& floor_group(Groups& groups, std::string_view name) {
  for (Group& g : groups) {
    if (g.name == name) return g.leaves;
  }
  throw std::runtime_error("no group");
}

void floor_set_leaf(Groups& groups, std::string_view group, std::string_view key, const at::Tensor& value) {
  auto& leaves = floor_group(groups, group);
  if (value.dim() < 1 || value.size(0) != kBatch) throw std::runtime_error("batch mismatch");
  for (auto& [k, t] : leaves) {
    if (k == key) {
      t = value;
      return;
    }
  }
  leaves.emplace_back(key, value);
}

void floor_erase_leaf(Groups& groups, std::string_view group, std::string_view key) {
  auto& leaves = floor_group(groups, group);
  for (auto it = leaves.begin(); it != leaves.end(); ++it) {
    if (it->first == key) {
      leaves.erase(it);
      return;
    }
  }
  throw std::runtime_error("no key");
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
        floor_set_leaf(f.src_w, "g1", "new", f.new_leaf);
        auto t1 = std::chrono::steady_clock::now();
        state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
        floor_erase_leaf(f.src_w, "g1", "new");
      }
    })->UseManualTime()->Unit(benchmark::kMicrosecond);
  } else {
    // Counted (and timed in pairs) with the removal inside: set + erase against emplace_back +
    // pop_back (a clock read around each call would be most of its cost).
    TD_BENCH("set_new_nested", {
      f.td_w.set({"g1", "new"}, f.new_leaf);
      f.td_w.erase({"g1", "new"});
    }, {
      floor_set_leaf(f.src_w, "g1", "new", f.new_leaf);
      floor_erase_leaf(f.src_w, "g1", "new");
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

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  bench_malloc::steady();
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
  if (bench_count::fixed_iterations() == 0) ops_bench::register_io_ops();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
