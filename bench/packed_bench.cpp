// One kernel over a consolidated tensordict (issue 34 item 1): fixture F (3 groups x 10 leaves
// of [64, 16] floats) consolidated, each op against what a user would write by hand:
//   cpp/<op>      the tensordict op on the consolidated tensordict (one kernel over its storage);
//   floor/<op>    the naive hand-written floor of bench/ops.md: one at:: call per leaf;
//   storage/<op>  what a careful user writes by hand: one at:: call over the storage;
//   views/<op>    the same call, then its result cut into the 30 leaf tensors by hand
//                 (split_with_sizes and view): what an out-of-place result needs to be used.
// scripts/bench.sh prints `packed op cpp floor storage views floor/cpp cpp/storage cpp/views`;
// `packed_bench --paired` times cpp/<op> in rounds right next to each other side instead.
// The *_unread rows run on an op's result nobody has read, the *_fresh rows on a consolidated
// tensordict nobody has read (Note [Lazy leaves]); the others on a consolidated tensordict whose
// leaves were read. One intra-op thread; every result is created and destroyed inside the
// timed region.

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <tensordict/tensordict.h>

#include "instruction_count.h"
#include "leaf_cut.h"
#include "paired_timing.h"

namespace {

using tensordict::TensorDict;

struct Packed {
  TensorDict td, td2;                      // consolidated, one layout (in-place ops change td)
  TensorDict same, same2;                  // consolidated, equal, never written: eq_all's operands
  std::vector<at::Tensor> leaves, leaves2;  // their leaves (views of the storages)
  at::Tensor storage, storage2, same_storage, same_storage2;  // the storages as one float tensor each
  LeafCut cut;                              // a storage result cut into the leaves by hand
  // Results of an op on td and td2 that nothing reads (Note [Lazy leaves]): the middle of a chain.
  // The *_unread rows run on them; the ops leave them unread, so every call sees the same.
  TensorDict unread, unread2;
  // Consolidated tensordicts nobody has read (consolidate makes their leaves when read): the
  // *_fresh rows; same_fresh and same_fresh2 are equal and never written (eq_all_fresh).
  TensorDict fresh, fresh2, same_fresh, same_fresh2;

  Packed() {
    at::manual_seed(0);
    TensorDict plain({}, {64});
    for (int g = 0; g < 3; ++g)
      for (int x = 0; x < 10; ++x) plain.set({"g" + std::to_string(g), "x" + std::to_string(x)}, at::randn({64, 16}));
    td = tensordict::consolidate(plain);
    td2 = tensordict::consolidate(plain.clone());
    for (const auto& e : td.values(true, true)) leaves.push_back(e.tensor());
    for (const auto& e : td2.values(true, true)) leaves2.push_back(e.tensor());
    storage = tensordict::consolidated_storage(td).view(at::kFloat);
    storage2 = tensordict::consolidated_storage(td2).view(at::kFloat);
    same = tensordict::consolidate(plain.clone());
    same2 = tensordict::consolidate(plain.clone());
    same_storage = tensordict::consolidated_storage(same).view(at::kFloat);
    same_storage2 = tensordict::consolidated_storage(same2).view(at::kFloat);
    cut = LeafCut(leaves);
    unread = td * 1.0;
    unread2 = td2 * 1.0;
    fresh = tensordict::consolidate(plain);
    fresh2 = tensordict::consolidate(plain.clone());
    same_fresh = tensordict::consolidate(plain.clone());
    same_fresh2 = tensordict::consolidate(plain.clone());
  }
};

Packed& fixture() {
  static Packed p;
  return p;
}

void reg(const std::string& name, std::function<void(Packed&)> fn) {
  bench_paired::registry().emplace_back(name, [fn] { fn(fixture()); });
  bench_count::configure(benchmark::RegisterBenchmark(name.c_str(), [fn, name](benchmark::State& state) {
    Packed& p = fixture();
    bench_count::counted_loop(state, name, [&] { fn(p); });
  })->Unit(benchmark::kMicrosecond));
}

// An in-place op: the tensordict body, the per-leaf body (on one leaf), the storage body.
void op3(const std::string& op, std::function<void(Packed&)> cpp, std::function<at::Tensor(const at::Tensor&)> leaf,
         std::function<void(Packed&)> storage) {
  reg("cpp/" + op, cpp);
  reg("floor/" + op, [leaf](Packed& p) {
    std::vector<at::Tensor> out;
    out.reserve(p.leaves.size());
    for (const at::Tensor& t : p.leaves) out.push_back(leaf(t));
    benchmark::DoNotOptimize(out);
  });
  reg("storage/" + op, storage);
}

// An out-of-place op: as op3, plus views/<op>, the storage result cut into leaves by hand.
void op4(const std::string& op, std::function<void(Packed&)> cpp, std::function<at::Tensor(const at::Tensor&)> leaf,
         std::function<at::Tensor(Packed&)> storage) {
  op3(op, cpp, leaf, [storage](Packed& p) { benchmark::DoNotOptimize(storage(p)); });
  reg("views/" + op, [storage](Packed& p) { benchmark::DoNotOptimize(p.cut(storage(p))); });
}

// a + b of two consolidated tensordicts of one layout (`cpp` gives the tensordict side); with
// `views`, also the storage result cut into leaves by hand.
void add_td_rows(const std::string& op, std::function<TensorDict(Packed&)> cpp, bool views) {
  reg("cpp/" + op, [cpp](Packed& p) { benchmark::DoNotOptimize(cpp(p)); });
  reg("floor/" + op, [](Packed& p) {
    std::vector<at::Tensor> out;
    out.reserve(p.leaves.size());
    for (size_t i = 0; i < p.leaves.size(); ++i) out.push_back(p.leaves[i] + p.leaves2[i]);
    benchmark::DoNotOptimize(out);
  });
  reg("storage/" + op, [](Packed& p) { benchmark::DoNotOptimize(p.storage + p.storage2); });
  if (views) reg("views/" + op, [](Packed& p) { benchmark::DoNotOptimize(p.cut(p.storage + p.storage2)); });
}

// sum(reduce): every leaf flattened and concatenated by hand, or the storage summed.
void sum_reduce_rows(const std::string& op, std::function<at::Tensor(Packed&)> cpp) {
  reg("cpp/" + op, [cpp](Packed& p) { benchmark::DoNotOptimize(cpp(p)); });
  reg("floor/" + op, [](Packed& p) {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : p.leaves) flat.push_back(t.reshape({-1}));
    benchmark::DoNotOptimize(at::cat(flat).sum());
  });
  reg("storage/" + op, [](Packed& p) { benchmark::DoNotOptimize(p.storage.sum()); });
}

// The per-leaf floors of the ops that compare two trees or reduce to a bool.
void floor_gt_td(Packed& p) {
  std::vector<at::Tensor> out;
  out.reserve(p.leaves.size());
  for (size_t i = 0; i < p.leaves.size(); ++i) out.push_back(p.leaves[i].gt(p.leaves2[i]));
  benchmark::DoNotOptimize(out);
}
void floor_eq_all(Packed& p) {
  bool all = true;
  for (const auto& k : p.same.keys(true, true)) all = at::equal(p.same.get(k), p.same2.get(k)) && all;
  benchmark::DoNotOptimize(all);
}
void floor_isnan_any(Packed& p) {
  bool any = false;
  for (const at::Tensor& t : p.leaves) any = any || at::isnan(t).any().item<bool>();
  benchmark::DoNotOptimize(any);
}

void register_all() {
  using benchmark::DoNotOptimize;
  op4("exp", [](Packed& p) { DoNotOptimize(p.td.exp()); }, [](const at::Tensor& t) { return t.exp(); },
      [](Packed& p) { return p.storage.exp(); });
  op4("mul_scalar", [](Packed& p) { DoNotOptimize(p.td * 0.5); }, [](const at::Tensor& t) { return t * 0.5; },
      [](Packed& p) { return p.storage * 0.5; });
  op3("add_scalar_", [](Packed& p) { p.td.add_(1e-6); }, [](const at::Tensor& t) { return t.add_(1e-6); },
      [](Packed& p) { p.storage.add_(1e-6); });
  op3("abs_", [](Packed& p) { p.td.abs_(); }, [](const at::Tensor& t) { return t.abs_(); },
      [](Packed& p) { p.storage.abs_(); });
  add_td_rows("add_td", [](Packed& p) { return p.td + p.td2; }, /*views=*/true);
  reg("cpp/gt_td", [](Packed& p) { DoNotOptimize(p.td.gt(p.td2)); });
  reg("floor/gt_td", floor_gt_td);
  reg("storage/gt_td", [](Packed& p) { DoNotOptimize(p.storage.gt(p.storage2)); });
  reg("views/gt_td", [](Packed& p) { DoNotOptimize(p.cut(p.storage.gt(p.storage2))); });
  op4("clone", [](Packed& p) { DoNotOptimize(p.td.clone()); }, [](const at::Tensor& t) { return t.clone(); },
      [](Packed& p) { return p.storage.clone(); });
  op4("to_double", [](Packed& p) { DoNotOptimize(p.td.to(at::kDouble)); },
      [](const at::Tensor& t) { return t.to(at::kDouble); }, [](Packed& p) { return p.storage.to(at::kDouble); });
  sum_reduce_rows("sum_reduce", [](Packed& p) { return p.td.sum(tensordict::reduce); });
  // Equal operands: every element is compared on each side (td and td2 differ after add_).
  reg("cpp/eq_all", [](Packed& p) { DoNotOptimize((p.same == p.same2).all()); });
  reg("floor/eq_all", floor_eq_all);
  reg("storage/eq_all", [](Packed& p) { DoNotOptimize(at::equal(p.same_storage, p.same_storage2)); });
  // The NaN check of a training loop: a value test, then any() of its bools.
  reg("cpp/isnan_any", [](Packed& p) { DoNotOptimize(p.td.isnan().any()); });
  reg("floor/isnan_any", floor_isnan_any);
  reg("storage/isnan_any", [](Packed& p) { DoNotOptimize(at::isnan(p.storage).any().item<bool>()); });
  op4("chain3", [](Packed& p) { DoNotOptimize((p.td * 2).exp().sub(1)); },
      [](const at::Tensor& t) { return (t * 2).exp().sub(1); }, [](Packed& p) { return (p.storage * 2).exp().sub(1); });

  // The same ops on an unread result (the operand of each op of a chain after the first): its
  // storage and structure are read without making its leaves. The floors are td's.
  op4("exp_unread", [](Packed& p) { DoNotOptimize(p.unread.exp()); }, [](const at::Tensor& t) { return t.exp(); },
      [](Packed& p) { return p.storage.exp(); });
  op4("mul_scalar_unread", [](Packed& p) { DoNotOptimize(p.unread * 0.5); },
      [](const at::Tensor& t) { return t * 0.5; }, [](Packed& p) { return p.storage * 0.5; });
  add_td_rows("add_td_unread", [](Packed& p) { return p.unread + p.unread2; }, /*views=*/true);
  op4("clone_unread", [](Packed& p) { DoNotOptimize(p.unread.clone()); }, [](const at::Tensor& t) { return t.clone(); },
      [](Packed& p) { return p.storage.clone(); });
  sum_reduce_rows("sum_reduce_unread", [](Packed& p) { return p.unread.sum(tensordict::reduce); });

  // Every op again on a consolidated tensordict nobody has read: its root is a consolidated level
  // whose leaves are not made, so no made leaf is checked. The floors are td's.
  op4("exp_fresh", [](Packed& p) { DoNotOptimize(p.fresh.exp()); }, [](const at::Tensor& t) { return t.exp(); },
      [](Packed& p) { return p.storage.exp(); });
  op4("mul_scalar_fresh", [](Packed& p) { DoNotOptimize(p.fresh * 0.5); },
      [](const at::Tensor& t) { return t * 0.5; }, [](Packed& p) { return p.storage * 0.5; });
  op3("add_scalar__fresh", [](Packed& p) { p.fresh.add_(1e-6); }, [](const at::Tensor& t) { return t.add_(1e-6); },
      [](Packed& p) { p.storage.add_(1e-6); });
  op3("abs_fresh", [](Packed& p) { p.fresh.abs_(); }, [](const at::Tensor& t) { return t.abs_(); },
      [](Packed& p) { p.storage.abs_(); });
  add_td_rows("add_td_fresh", [](Packed& p) { return p.fresh + p.fresh2; }, /*views=*/false);
  reg("cpp/gt_td_fresh", [](Packed& p) { DoNotOptimize(p.fresh.gt(p.fresh2)); });
  reg("floor/gt_td_fresh", floor_gt_td);
  reg("storage/gt_td_fresh", [](Packed& p) { DoNotOptimize(p.storage.gt(p.storage2)); });
  op4("clone_fresh", [](Packed& p) { DoNotOptimize(p.fresh.clone()); }, [](const at::Tensor& t) { return t.clone(); },
      [](Packed& p) { return p.storage.clone(); });
  op4("to_double_fresh", [](Packed& p) { DoNotOptimize(p.fresh.to(at::kDouble)); },
      [](const at::Tensor& t) { return t.to(at::kDouble); }, [](Packed& p) { return p.storage.to(at::kDouble); });
  sum_reduce_rows("sum_reduce_fresh", [](Packed& p) { return p.fresh.sum(tensordict::reduce); });
  reg("cpp/eq_all_fresh", [](Packed& p) { DoNotOptimize((p.same_fresh == p.same_fresh2).all()); });
  reg("floor/eq_all_fresh", floor_eq_all);
  reg("storage/eq_all_fresh", [](Packed& p) { DoNotOptimize(at::equal(p.same_storage, p.same_storage2)); });
  reg("cpp/isnan_any_fresh", [](Packed& p) { DoNotOptimize(p.fresh.isnan().any()); });
  reg("floor/isnan_any_fresh", floor_isnan_any);
  reg("storage/isnan_any_fresh", [](Packed& p) { DoNotOptimize(at::isnan(p.storage).any().item<bool>()); });
  op4("chain3_fresh", [](Packed& p) { DoNotOptimize((p.fresh * 2).exp().sub(1)); },
      [](const at::Tensor& t) { return (t * 2).exp().sub(1); }, [](Packed& p) { return (p.storage * 2).exp().sub(1); });
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const bool paired = bench_paired::take_flag(argc, argv);
  register_all();
  if (paired) {
    // cpp/<op> against each hand-written side, in rounds right next to it (bench/paired_timing.h).
    const char* filter = std::getenv("TD_BENCH_FILTER");
    bench_paired::run(41, 2.0, filter ? filter : "", {"floor", "storage", "views"});
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
