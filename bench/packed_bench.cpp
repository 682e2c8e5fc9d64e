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

#include <algorithm>
#include <cstdlib>
#include <cstring>
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
  TensorDict unread, unread2, same_unread, same_unread2;
  // Consolidated tensordicts nobody has read (consolidate makes their leaves when read): the
  // *_fresh rows; same_fresh and same_fresh2 are equal and never written (eq_all_fresh).
  TensorDict fresh, fresh2, same_fresh, same_fresh2;
  TensorDict plain;   // the tree the others are consolidated from: 30 leaves, 30 storages
  std::string bytes;  // to_bytes(fresh): what from_bytes reads (a message, or a file read whole)
  std::vector<at::Tensor> plain_leaves;
  TensorDict plain_w;  // a copy of plain that zero_ writes, and its leaves
  std::vector<at::Tensor> plain_w_leaves;
  // A consolidated tree written since (an RL step's action set into its observations): 30 leaves
  // in one storage and one of its own, no longer intact; and its 31 leaves.
  TensorDict written;
  std::vector<at::Tensor> written_leaves;
  at::Tensor idx;     // rows 63, 61, ..., 1 (the op table's index_long)
  at::Tensor mask;    // batch-shaped: every other row
  at::Tensor weight;  // batch-shaped, near 1 (in-place products stay finite)

  Packed() {
    at::manual_seed(0);
    plain = TensorDict({}, {64});
    for (int g = 0; g < 3; ++g)
      for (int x = 0; x < 10; ++x) plain.set({"g" + std::to_string(g), "x" + std::to_string(x)}, at::randn({64, 16}));
    for (const auto& e : plain.values(true, true)) plain_leaves.push_back(e.tensor());
    plain_w = plain.clone();
    for (const auto& e : plain_w.values(true, true)) plain_w_leaves.push_back(e.tensor());
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
    same_unread = same * 1.0;
    same_unread2 = same2 * 1.0;
    fresh = tensordict::consolidate(plain);
    fresh2 = tensordict::consolidate(plain.clone());
    bytes = tensordict::to_bytes(fresh);
    same_fresh = tensordict::consolidate(plain.clone());
    same_fresh2 = tensordict::consolidate(plain.clone());
    written = tensordict::consolidate(plain).clone();
    written.set("action", at::randn({64, 4}));
    for (const auto& e : written.values(true, true)) written_leaves.push_back(e.tensor());
    idx = at::arange(63, -1, -2);
    mask = at::arange(64).remainder(2).eq(0);
    weight = 1 + at::rand({64}) * 1e-6;
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

// The operands of one set of rows: `a` and `b` share a layout (in-place ops change `a`); `eq_a`
// and `eq_b` are equal and never written (eq_all compares every element).
struct Operands {
  TensorDict Packed::*a;
  TensorDict Packed::*b;
  TensorDict Packed::*eq_a;
  TensorDict Packed::*eq_b;
};

// Every op of the table on `on`, named <op><suffix>. The floors and the storage calls are the
// read tree's (td, td2, same, same2: the same values and layout). `views`: also the storage
// result cut into leaves by hand.
void register_ops(const std::string& suffix, Operands on, bool views) {
  using benchmark::DoNotOptimize;
  const auto a = on.a, b = on.b, eq_a = on.eq_a, eq_b = on.eq_b;
  const auto out_of_place = [&](const std::string& op, std::function<void(Packed&)> cpp,
                                std::function<at::Tensor(const at::Tensor&)> leaf,
                                std::function<at::Tensor(Packed&)> storage) {
    if (views) {
      op4(op + suffix, std::move(cpp), std::move(leaf), std::move(storage));
    } else {
      op3(op + suffix, std::move(cpp), std::move(leaf), [storage](Packed& p) { DoNotOptimize(storage(p)); });
    }
  };
  out_of_place("exp", [a](Packed& p) { DoNotOptimize((p.*a).exp()); }, [](const at::Tensor& t) { return t.exp(); },
               [](Packed& p) { return p.storage.exp(); });
  out_of_place("mul_scalar", [a](Packed& p) { DoNotOptimize(p.*a * 0.5); },
               [](const at::Tensor& t) { return t * 0.5; }, [](Packed& p) { return p.storage * 0.5; });
  op3("add_scalar_" + suffix, [a](Packed& p) { (p.*a).add_(1e-6); }, [](const at::Tensor& t) { return t.add_(1e-6); },
      [](Packed& p) { p.storage.add_(1e-6); });
  op3("abs_" + suffix, [a](Packed& p) { (p.*a).abs_(); }, [](const at::Tensor& t) { return t.abs_(); },
      [](Packed& p) { p.storage.abs_(); });
  op3("zero_" + suffix, [a](Packed& p) { (p.*a).zero_(); }, [](const at::Tensor& t) { return t.zero_(); },
      [](Packed& p) { p.storage.zero_(); });
  out_of_place("clamp", [a](Packed& p) { DoNotOptimize((p.*a).clamp(-1, 1)); },
               [](const at::Tensor& t) { return t.clamp(-1, 1); }, [](Packed& p) { return p.storage.clamp(-1, 1); });
  reg("cpp/lerp_td_" + suffix, [a, b](Packed& p) { (p.*a).lerp_(p.*b, 0.5); });
  reg("floor/lerp_td_" + suffix, [](Packed& p) {
    for (size_t i = 0; i < p.leaves.size(); ++i) p.leaves[i].lerp_(p.leaves2[i], 0.5);
  });
  reg("storage/lerp_td_" + suffix, [](Packed& p) { p.storage.lerp_(p.storage2, 0.5); });
  // addcmul with two tensordicts of the same layout (an optimizer's second moment: the partner
  // twice), out of place and in place.
  reg("cpp/addcmul_td" + suffix, [a, b](Packed& p) { DoNotOptimize((p.*a).addcmul(p.*b, p.*b, 0.5)); });
  reg("floor/addcmul_td" + suffix, [](Packed& p) {
    std::vector<at::Tensor> out;
    out.reserve(p.leaves.size());
    for (size_t i = 0; i < p.leaves.size(); ++i) out.push_back(at::addcmul(p.leaves[i], p.leaves2[i], p.leaves2[i], 0.5));
    DoNotOptimize(out);
  });
  reg("storage/addcmul_td" + suffix, [](Packed& p) { DoNotOptimize(at::addcmul(p.storage, p.storage2, p.storage2, 0.5)); });
  reg("cpp/addcmul_td_" + suffix, [a, b](Packed& p) { (p.*a).addcmul_(p.*b, p.*b, 1e-6); });
  reg("floor/addcmul_td_" + suffix, [](Packed& p) {
    for (size_t i = 0; i < p.leaves.size(); ++i) p.leaves[i].addcmul_(p.leaves2[i], p.leaves2[i], 1e-6);
  });
  reg("storage/addcmul_td_" + suffix, [](Packed& p) { p.storage.addcmul_(p.storage2, p.storage2, 1e-6); });
  // copy_ (update_) from a tensordict of the same layout: a target network's update, say.
  reg("cpp/copy_td_" + suffix, [a, b](Packed& p) { (p.*a).copy_(p.*b); });
  reg("floor/copy_td_" + suffix, [](Packed& p) {
    for (size_t i = 0; i < p.leaves.size(); ++i) p.leaves[i].copy_(p.leaves2[i]);
  });
  reg("storage/copy_td_" + suffix, [](Packed& p) { p.storage.copy_(p.storage2); });
  add_td_rows("add_td" + suffix, [a, b](Packed& p) { return p.*a + p.*b; }, views);
  reg("cpp/gt_td" + suffix, [a, b](Packed& p) { DoNotOptimize((p.*a).gt(p.*b)); });
  reg("floor/gt_td" + suffix, floor_gt_td);
  reg("storage/gt_td" + suffix, [](Packed& p) { DoNotOptimize(p.storage.gt(p.storage2)); });
  if (views) reg("views/gt_td" + suffix, [](Packed& p) { DoNotOptimize(p.cut(p.storage.gt(p.storage2))); });
  out_of_place("clone", [a](Packed& p) { DoNotOptimize((p.*a).clone()); },
               [](const at::Tensor& t) { return t.clone(); }, [](Packed& p) { return p.storage.clone(); });
  // detach (a target's values, say): one detach of the storage over a consolidated tree; an op's
  // result (_unread), whose leaves have version counters of their own, detaches per leaf.
  out_of_place("detach", [a](Packed& p) { DoNotOptimize((p.*a).detach()); },
               [](const at::Tensor& t) { return t.detach(); }, [](Packed& p) { return p.storage.detach(); });
  if (suffix.empty()) {
    // detach of a tree never consolidated: each leaf's detach() built directly (core/detach_leaf.h).
    reg("cpp/detach_plain", [](Packed& p) { DoNotOptimize(p.plain.detach()); });
    reg("floor/detach_plain", [](Packed& p) {
      std::vector<at::Tensor> out;
      out.reserve(p.leaves.size());
      for (const at::Tensor& t : p.leaves) out.push_back(t.detach());
      DoNotOptimize(out);
    });
  }
  out_of_place("to_double", [a](Packed& p) { DoNotOptimize((p.*a).to(at::kDouble)); },
               [](const at::Tensor& t) { return t.to(at::kDouble); },
               [](Packed& p) { return p.storage.to(at::kDouble); });
  sum_reduce_rows("sum_reduce" + suffix, [a](Packed& p) { return (p.*a).sum(tensordict::reduce); });
  // Rows gathered (a replay buffer's sample, a mask's rows): one gather a group of leaves of one
  // shape (Note [Grouped results]); by hand, the 30 leaves viewed as one tensor.
  op3("index_long" + suffix, [a](Packed& p) { DoNotOptimize((p.*a).index({p.idx})); },
      [](const at::Tensor& t) { return at::index_select(t, 0, fixture().idx); },
      [](Packed& p) { DoNotOptimize(at::index_select(p.storage.view({30, 64, 16}), 1, p.idx)); });
  op3("index_mask" + suffix, [a](Packed& p) { DoNotOptimize((p.*a).index({p.mask})); },
      [](const at::Tensor& t) { return t.index({fixture().mask}); },
      [](Packed& p) { DoNotOptimize(p.storage.view({30, 64, 16}).index({at::indexing::Slice(), p.mask})); });
  if (suffix.empty()) {
    // The same over a tree written since it was consolidated: groups found from its leaves.
    reg("cpp/index_long_written", [](Packed& p) { DoNotOptimize(p.written.index({p.idx})); });
    reg("floor/index_long_written", [](Packed& p) {
      std::vector<at::Tensor> out;
      for (const at::Tensor& t : p.written_leaves) out.push_back(at::index_select(t, 0, p.idx));
      DoNotOptimize(out);
    });
  }
  // Reductions per leaf (Note [Shape groups]); by hand, the 30 leaves viewed as one tensor.
  op3("sum0" + suffix, [a](Packed& p) { DoNotOptimize((p.*a).sum(0)); },
      [](const at::Tensor& t) { return at::sum(t, {0}); },
      [](Packed& p) { DoNotOptimize(at::sum(p.storage.view({30, 64, 16}), {1})); });
  op3("mean" + suffix, [a](Packed& p) { DoNotOptimize((p.*a).mean()); }, [](const at::Tensor& t) { return at::mean(t); },
      [](Packed& p) { DoNotOptimize(at::mean(p.storage.view({30, 1024}), {1})); });
  if (suffix.empty()) {
    // A batch-shaped mask (Note [Shape groups]): a reset of the rows an episode ended in.
    op3("masked_fill_", [a](Packed& p) { (p.*a).masked_fill_(p.mask, 0.0); },
        [](const at::Tensor& t) { return t.masked_fill_(fixture().mask.view({64, 1}), 0.0); },
        [](Packed& p) { p.storage.view({30, 64, 16}).masked_fill_(p.mask.view({1, 64, 1}), 0.0); });
    // A tensor of the batch shape (a per-sample weight), out of place and in place.
    op3("mul_batch", [a](Packed& p) { DoNotOptimize(p.*a * p.weight); },
        [](const at::Tensor& t) { return t * fixture().weight.view({64, 1}); },
        [](Packed& p) { DoNotOptimize(p.storage.view({30, 64, 16}) * p.weight.view({1, 64, 1})); });
    op3("mul_batch_", [a](Packed& p) { (p.*a).mul_(p.weight); },
        [](const at::Tensor& t) { return t.mul_(fixture().weight.view({64, 1})); },
        [](Packed& p) { p.storage.view({30, 64, 16}).mul_(p.weight.view({1, 64, 1})); });
    reg("cpp/where_td", [a, b](Packed& p) { DoNotOptimize((p.*a).where(p.mask, p.*b)); });
    reg("floor/where_td", [](Packed& p) {
      std::vector<at::Tensor> out;
      for (size_t i = 0; i < p.leaves.size(); ++i) out.push_back(at::where(p.mask.view({64, 1}), p.leaves[i], p.leaves2[i]));
      DoNotOptimize(out);
    });
    reg("storage/where_td", [](Packed& p) {
      DoNotOptimize(at::where(p.mask.view({1, 64, 1}), p.storage.view({30, 64, 16}), p.storage2.view({30, 64, 16})));
    });
    op3("where_scalar", [a](Packed& p) { DoNotOptimize((p.*a).where(p.mask, 0.0)); },
        [](const at::Tensor& t) { return at::where(fixture().mask.view({64, 1}), t, 0.0); },
        [](Packed& p) { DoNotOptimize(at::where(p.mask.view({1, 64, 1}), p.storage.view({30, 64, 16}), 0.0)); });
  }
  op3("sum_features" + suffix, [a](Packed& p) { DoNotOptimize((p.*a).sum(tensordict::FeatureDims{})); },
      [](const at::Tensor& t) { return at::sum(t, {-1}); },
      [](Packed& p) { DoNotOptimize(at::sum(p.storage.view({30, 64, 16}), {-1})); });
  reg("cpp/eq_all" + suffix, [eq_a, eq_b](Packed& p) { DoNotOptimize((p.*eq_a == p.*eq_b).all()); });
  reg("floor/eq_all" + suffix, floor_eq_all);
  reg("storage/eq_all" + suffix, [](Packed& p) { DoNotOptimize(at::equal(p.same_storage, p.same_storage2)); });
  // The NaN check of a training loop: a value test, then any() of its bools.
  reg("cpp/isnan_any" + suffix, [a](Packed& p) { DoNotOptimize((p.*a).isnan().any()); });
  reg("floor/isnan_any" + suffix, floor_isnan_any);
  reg("storage/isnan_any" + suffix, [](Packed& p) { DoNotOptimize(at::isnan(p.storage).any().item<bool>()); });
  out_of_place("chain3", [a](Packed& p) { DoNotOptimize((p.*a * 2).exp().sub(1)); },
               [](const at::Tensor& t) { return (t * 2).exp().sub(1); },
               [](Packed& p) { return (p.storage * 2).exp().sub(1); });
}

// Fixture F with mixed dtypes or Python's padding (Note [Packed runs]): one kernel a run.
//   _mixed   3 groups x 10 leaves of [64, 16], float and double alternating in key order:
//            consolidate lays them out as two runs (one a dtype);
//   _padded  3 groups x 10 float leaves of [5, 201] (an odd count: 4 bytes of padding after
//            each, as Python lays them out);
//   _rl      3 groups x 10 leaves of [64, 16], float, int64 and bool in turn (an RL step's
//            observations, actions and flags): three runs of three type categories, so an
//            in-place op first tries the later runs over empty slices (Note [Packed runs]).
// storage/<op> is one at:: call per run by hand (a typed view of each dtype's bytes, padding
// included where the op may read it).
struct Grouped {
  TensorDict td, td2, same, same2;
  std::vector<at::Tensor> leaves, leaves2;
  std::vector<at::Tensor> runs, runs2, same_runs, same_runs2;  // one typed view per run
  // Every leaf's elements and no padding, as a careful user would view them by hand: the runs,
  // or for the padded tree one 2-D view stepping over the padding.
  std::vector<at::Tensor> elements, same_elements, same_elements2;

  enum class Kind { Mixed, Padded, Rl };
  explicit Grouped(Kind kind) {
    at::manual_seed(0);
    const bool padded = kind == Kind::Padded;
    TensorDict plain({}, {padded ? 5 : 64});
    for (int g = 0; g < 3; ++g)
      for (int x = 0; x < 10; ++x) {
        at::Tensor leaf = padded ? at::randn({5, 201}) : at::randn({64, 16});
        if (kind == Kind::Mixed && x % 2 == 1) leaf = leaf.to(at::kDouble);
        if (kind == Kind::Rl && x % 3 == 1) leaf = (leaf * 10).to(at::kLong);
        if (kind == Kind::Rl && x % 3 == 2) leaf = leaf > 0;
        plain.set({"g" + std::to_string(g), "x" + std::to_string(x)}, leaf);
      }
    td = tensordict::consolidate(plain);
    td2 = tensordict::consolidate(plain.clone());
    same = tensordict::consolidate(plain.clone());
    same2 = tensordict::consolidate(plain.clone());
    for (const auto& e : td.values(true, true)) leaves.push_back(e.tensor());
    for (const auto& e : td2.values(true, true)) leaves2.push_back(e.tensor());
    runs = typed_runs(td);
    runs2 = typed_runs(td2);
    same_runs = typed_runs(same);
    same_runs2 = typed_runs(same2);
    elements = padded ? padded_view(td) : runs;
    same_elements = padded ? padded_view(same) : same_runs;
    same_elements2 = padded ? padded_view(same2) : same_runs2;
  }

  // The leaves of a consolidated tree of evenly spaced leaves of one size as one 2-D view.
  static std::vector<at::Tensor> padded_view(const TensorDict& c) {
    std::vector<at::Tensor> leaves;
    for (const auto& e : c.values(true, true)) leaves.push_back(e.tensor());
    std::sort(leaves.begin(), leaves.end(),
              [](const at::Tensor& x, const at::Tensor& y) { return x.storage_offset() < y.storage_offset(); });
    const int64_t step = leaves[1].storage_offset() - leaves[0].storage_offset();
    const auto count = static_cast<int64_t>(leaves.size());
    return {leaves[0].as_strided({count, leaves[0].numel()}, {step, 1}, leaves[0].storage_offset())};
  }

  // Each dtype's bytes of a consolidated tensordict, from its first leaf to its last, as that dtype.
  static std::vector<at::Tensor> typed_runs(const TensorDict& c) {
    const at::Tensor bytes = tensordict::consolidated_storage(c);
    std::vector<at::Tensor> out;
    for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kLong, at::kBool}) {
      int64_t begin = -1, end = 0;
      for (const auto& e : c.values(true, true)) {
        const at::Tensor& t = e.tensor();
        if (t.scalar_type() != dtype) continue;
        const int64_t item = static_cast<int64_t>(t.element_size()), start = t.storage_offset() * item;
        begin = begin < 0 ? start : std::min(begin, start);
        end = std::max(end, start + t.numel() * item);
      }
      if (begin >= 0) out.push_back(bytes.narrow(0, begin, end - begin).view(dtype));
    }
    return out;
  }
};

Grouped& mixed_fixture() {
  static Grouped g(Grouped::Kind::Mixed);
  return g;
}
Grouped& padded_fixture() {
  static Grouped g(Grouped::Kind::Padded);
  return g;
}
Grouped& rl_fixture() {
  static Grouped g(Grouped::Kind::Rl);
  return g;
}

void reg_grouped(const std::string& name, Grouped& (*get)(), std::function<void(Grouped&)> fn) {
  bench_paired::registry().emplace_back(name, [fn, get] { fn(get()); });
  bench_count::configure(benchmark::RegisterBenchmark(name.c_str(), [fn, get, name](benchmark::State& state) {
    Grouped& g = get();
    bench_count::counted_loop(state, name, [&] { fn(g); });
  })->Unit(benchmark::kMicrosecond));
}

// cpp/<op><suffix>, floor/<op><suffix> (one call a leaf) and storage/<op><suffix> (one a run).
void grouped_rows(const std::string& op, Grouped& (*get)(), std::function<void(Grouped&)> cpp,
                  std::function<void(const at::Tensor&, const at::Tensor&)> leaf) {
  using benchmark::DoNotOptimize;
  reg_grouped("cpp/" + op, get, cpp);
  reg_grouped("floor/" + op, get, [leaf](Grouped& g) {
    for (size_t i = 0; i < g.leaves.size(); ++i) leaf(g.leaves[i], g.leaves2[i]);
  });
  reg_grouped("storage/" + op, get, [leaf](Grouped& g) {
    for (size_t r = 0; r < g.runs.size(); ++r) leaf(g.runs[r], g.runs2[r]);
  });
}

void register_grouped(const std::string& suffix, Grouped& (*get)()) {
  using benchmark::DoNotOptimize;
  using T = const at::Tensor&;
  grouped_rows("exp" + suffix, get, [](Grouped& g) { DoNotOptimize(g.td.exp()); }, [](T t, T) { DoNotOptimize(t.exp()); });
  // A reduction per leaf over a batch dim (Note [Shape groups]); by hand, each run's leaves
  // (or the padded tree's, stepping over the padding) viewed as one tensor.
  reg_grouped("cpp/sum0" + suffix, get, [](Grouped& g) { DoNotOptimize(g.td.sum(0)); });
  reg_grouped("floor/sum0" + suffix, get, [](Grouped& g) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : g.leaves) out.push_back(at::sum(t, {0}));
    DoNotOptimize(out);
  });
  reg_grouped("storage/sum0" + suffix, get, [](Grouped& g) {
    const c10::IntArrayRef leaf = g.leaves.front().sizes();
    for (const at::Tensor& e : g.elements) DoNotOptimize(at::sum(e.view({-1, leaf[0], leaf[1]}), {1}));
  });
  grouped_rows("mul_scalar" + suffix, get, [](Grouped& g) { DoNotOptimize(g.td * 0.5); },
               [](T t, T) { DoNotOptimize(t * 0.5); });
  grouped_rows("add_scalar_" + suffix, get, [](Grouped& g) { g.td.add_(1e-6); }, [](T t, T) { t.add_(1e-6); });
  grouped_rows("addcmul_td_" + suffix, get, [](Grouped& g) { g.td.addcmul_(g.td2, g.td2, 1e-6); },
               [](T t, T u) { t.addcmul_(u, u, 1e-6); });
  grouped_rows("copy_td_" + suffix, get, [](Grouped& g) { g.td.copy_(g.td2); }, [](T t, T u) { t.copy_(u); });
  grouped_rows("add_td" + suffix, get, [](Grouped& g) { DoNotOptimize(g.td + g.td2); },
               [](T t, T u) { DoNotOptimize(t + u); });
  grouped_rows("clone" + suffix, get, [](Grouped& g) { DoNotOptimize(g.td.clone()); },
               [](T t, T) { DoNotOptimize(t.clone()); });
  grouped_rows("detach" + suffix, get, [](Grouped& g) { DoNotOptimize(g.td.detach()); },
               [](T t, T) { DoNotOptimize(t.detach()); });
  grouped_rows("gt_td" + suffix, get, [](Grouped& g) { DoNotOptimize(g.td.gt(g.td2)); },
               [](T t, T u) { DoNotOptimize(t.gt(u)); });
  // Reductions to one value: the floors as the F table's (sum_reduce_rows, floor_eq_all,
  // floor_isnan_any); the storage calls over the hand-made views without padding.
  reg_grouped("cpp/sum_reduce" + suffix, get, [](Grouped& g) { DoNotOptimize(g.td.sum(tensordict::reduce)); });
  reg_grouped("floor/sum_reduce" + suffix, get, [](Grouped& g) {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : g.leaves) flat.push_back(t.reshape({-1}));
    DoNotOptimize(at::cat(flat).sum());
  });
  reg_grouped("storage/sum_reduce" + suffix, get, [](Grouped& g) {
    if (g.elements.size() == 1) return DoNotOptimize(g.elements[0].sum());
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : g.elements) flat.push_back(t.reshape({-1}));
    DoNotOptimize(at::cat(flat).sum());
  });
  reg_grouped("cpp/eq_all" + suffix, get, [](Grouped& g) { DoNotOptimize((g.same == g.same2).all()); });
  reg_grouped("floor/eq_all" + suffix, get, [](Grouped& g) {
    bool all = true;
    for (const auto& k : g.same.keys(true, true)) all = at::equal(g.same.get(k), g.same2.get(k)) && all;
    DoNotOptimize(all);
  });
  reg_grouped("storage/eq_all" + suffix, get, [](Grouped& g) {
    bool all = true;
    for (size_t r = 0; r < g.same_elements.size(); ++r) all = at::equal(g.same_elements[r], g.same_elements2[r]) && all;
    DoNotOptimize(all);
  });
  reg_grouped("cpp/isnan_any" + suffix, get, [](Grouped& g) { DoNotOptimize(g.td.isnan().any()); });
  reg_grouped("floor/isnan_any" + suffix, get, [](Grouped& g) {
    bool any = false;
    for (const at::Tensor& t : g.leaves) any = any || at::isnan(t).any().item<bool>();
    DoNotOptimize(any);
  });
  reg_grouped("storage/isnan_any" + suffix, get, [](Grouped& g) {
    bool any = false;
    for (const at::Tensor& t : g.elements) any = any || at::isnan(t).any().item<bool>();
    DoNotOptimize(any);
  });
  grouped_rows("chain3" + suffix, get, [](Grouped& g) { DoNotOptimize((g.td * 2).exp().sub(1)); },
               [](T t, T) { DoNotOptimize((t * 2).exp().sub(1)); });
}

void register_all() {
  using benchmark::DoNotOptimize;
  // consolidate() of the tree of 30 leaves in 30 storages, against one storage filled by hand a
  // leaf at a time (narrow, view, copy_), and against one at::cat of the flattened leaves.
  reg("cpp/consolidate", [](Packed& p) { DoNotOptimize(tensordict::consolidate(p.plain)); });
  reg("floor/consolidate", [](Packed& p) {
    int64_t total = 0;
    for (const at::Tensor& t : p.plain_leaves) total += t.numel();
    at::Tensor storage = at::empty({total});
    int64_t at = 0;
    for (const at::Tensor& t : p.plain_leaves) {
      storage.narrow(0, at, t.numel()).view(t.sizes()).copy_(t);
      at += t.numel();
    }
    DoNotOptimize(storage);
  });
  // from_bytes() of F's bytes, against the bytes copied into one storage and each leaf viewed
  // where a layout known by hand puts it (no metadata read, no tree built).
  reg("cpp/from_bytes", [](Packed& p) { DoNotOptimize(tensordict::from_bytes(p.bytes)); });
  reg("floor/from_bytes", [](Packed& p) {
    int64_t total = 0;
    for (const at::Tensor& t : p.plain_leaves) total += t.numel() * static_cast<int64_t>(t.element_size());
    at::Tensor storage = at::empty({total}, at::kByte);
    std::memcpy(storage.data_ptr(), p.bytes.data(), static_cast<size_t>(total));
    std::vector<at::Tensor> views;
    views.reserve(p.plain_leaves.size());
    int64_t at = 0;
    for (const at::Tensor& t : p.plain_leaves) {
      const int64_t n = t.numel() * static_cast<int64_t>(t.element_size());
      views.push_back(storage.narrow(0, at, n).view(t.scalar_type()).view(t.sizes()));
      at += n;
    }
    DoNotOptimize(views);
  });
  // zero_() of a tree never consolidated (30 storages): per leaf.
  reg("cpp/zero__plain", [](Packed& p) { p.plain_w.zero_(); });
  reg("floor/zero__plain", [](Packed& p) {
    for (const at::Tensor& t : p.plain_w_leaves) t.zero_();
  });
  reg("storage/consolidate", [](Packed& p) {
    std::vector<at::Tensor> flat;
    flat.reserve(p.plain_leaves.size());
    for (const at::Tensor& t : p.plain_leaves) flat.push_back(t.view({-1}));
    DoNotOptimize(at::cat(flat));
  });
  // A consolidated tensordict whose leaves were read: each op checks every made leaf.
  register_ops("", {&Packed::td, &Packed::td2, &Packed::same, &Packed::same2}, /*views=*/true);
  // An op's result nobody has read (the operand of each op of a chain after the first): its
  // storage and structure are read without making its leaves.
  register_ops("_unread", {&Packed::unread, &Packed::unread2, &Packed::same_unread, &Packed::same_unread2},
               /*views=*/true);
  // A consolidated tensordict nobody has read: its root is a consolidated level.
  register_ops("_fresh", {&Packed::fresh, &Packed::fresh2, &Packed::same_fresh, &Packed::same_fresh2},
               /*views=*/false);
  register_grouped("_mixed", mixed_fixture);
  register_grouped("_padded", padded_fixture);
  // In place over three type categories (the ops above would not take int64 and bool leaves).
  grouped_rows("zero__rl", rl_fixture, [](Grouped& g) { g.td.zero_(); }, [](const at::Tensor& t, const at::Tensor&) { t.zero_(); });
  grouped_rows("copy_td__rl", rl_fixture, [](Grouped& g) { g.td.copy_(g.td2); },
               [](const at::Tensor& t, const at::Tensor& u) { t.copy_(u); });
  grouped_rows("fill__rl", rl_fixture, [](Grouped& g) { g.td.fill_(1); },
               [](const at::Tensor& t, const at::Tensor&) { t.fill_(1); });
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
