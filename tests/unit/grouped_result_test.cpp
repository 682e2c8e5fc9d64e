// Reductions per leaf over an intact packed tree, grouped from its shape (Note [Grouped
// results]): the result is one deferred level over the groups' results, and each leaf, level,
// batch size, name and non-tensor entry is what the per-leaf path gives, bit for bit (compared
// with the same op on a copy of the tree whose leaves each have a storage of their own).
#include "support/catch_torch.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/ops.h>

#include "backends/in_memory/tensor_dict_impl.h"
#include "ops/leafwise.h"
#include "support/runs_fixtures.h"
#include "unit/grouped_fixtures.h"

using namespace tensordict;

// A namespace of its own, not an anonymous one: the sanitizer build compiles test files together.
namespace grouped_result_test {

using runs_fixtures::KernelCount;

using namespace grouped_fixtures;

TEST_CASE("reductions of an intact tree group from its shape, each result the per-leaf one",
          "[unit][grouped_result][reduce]") {
  at::manual_seed(3);
  const bool nan = GENERATE(false, true);
  const TensorDict x = mixed_tree(nan);
  const TensorDict a = consolidate(x);
  const bool read = GENERATE(false, true);
  INFO("NaNs: " << nan << ", leaves read first: " << read);
  std::vector<at::Tensor> held;
  if (read) held = runs_fixtures::read_all(a);
  using Op = std::function<TensorDict(const TensorDict&)>;
  const at::Tensor mask = at::tensor({1, 0, 0, 1, 1, 0}).to(at::kBool);
  const at::Tensor w = at::randn({6});
  const std::vector<std::pair<const char*, Op>> ops = {
      {"sum()", [](const TensorDict& t) { return t.sum(); }},
      {"sum(0)", [](const TensorDict& t) { return t.sum(0); }},
      {"sum(-1, keepdim)", [](const TensorDict& t) { return t.sum(-1, true); }},
      {"mean()", [](const TensorDict& t) { return t.mean(); }},
      {"mean(0, keepdim)", [](const TensorDict& t) { return t.mean(0, true); }},
      {"nansum(0)", [](const TensorDict& t) { return t.nansum(0); }},
      {"nanmean()", [](const TensorDict& t) { return t.nanmean(); }},
      {"prod(0)", [](const TensorDict& t) { return t.prod(0); }},
      {"amax()", [](const TensorDict& t) { return t.amax(); }},
      {"amin(0)", [](const TensorDict& t) { return t.amin(0); }},
      {"max()", [](const TensorDict& t) { return t.max(); }},
      {"min()", [](const TensorDict& t) { return t.min(); }},
      {"norm()", [](const TensorDict& t) { return t.norm(); }},
      {"logsumexp()", [](const TensorDict& t) { return t.logsumexp(); }},
      {"quantile(0.25, 0)", [](const TensorDict& t) { return t.quantile(0.25, 0); }},
      {"sum(features)", [](const TensorDict& t) { return t.sum(FeatureDims{}); }},
      {"amax(features)", [](const TensorDict& t) { return t.amax(FeatureDims{}); }},
      {"all(0)", [](const TensorDict& t) { return t.gt(0).all(0); }},
      // With a batch-shaped operand: results laid out as the operand's leaves.
      {"masked_fill", [&](const TensorDict& t) { return t.masked_fill(mask, -1.5); }},
      {"where(mask, 0.5)", [&](const TensorDict& t) { return t.where(mask, 0.5); }},
      {"where(mask, tensor)", [&](const TensorDict& t) { return t.where(mask, at::full({}, 2.0)); }},
      {"td * w", [&](const TensorDict& t) { return t * w; }},
      {"td - w (0-dim)", [&](const TensorDict& t) { return t - w[0]; }},
      // A tensordict other laid out alike: an op's result over the same tree.
      {"where(mask, td.clone())", [&](const TensorDict& t) { return t.where(mask, t.clone()); }},
  };
  TensorDict apart = x.clone();  // the per-leaf path's operand, locked as a consolidated tensordict is
  if (a.is_locked()) apart.lock_();
  for (const auto& [name, op] : ops) {
    INFO(name);
    const TensorDict got = op(a);
    require_identical(got, op(apart));
    // Nothing of the result built yet: its levels are made as they are read (above), locked
    // ones too (a consolidated tensordict is locked; where and td op tensor keep the lock).
    // `td - w` with a 0-dim w drops empty levels, as Python's scalar path does: the tree holds
    // one, and that op goes per leaf.
    if (std::string(name) != "all(0)" && std::string(name) != "td - w (0-dim)") CHECK(deferred(op(a)));
  }
  // Five groups, one kernel each: the [6, 4] leaves c and a (keys in storage order: c, a, d, b,
  // ...), then b and m.r (another spacing), d of [6], e, and n.p with n.q.
  CHECK(KernelCount::of("aten::sum", [&] { a.sum(0); }) == 5);
  if (read) CHECK(at::equal(held.front(), x.get(x.keys(true, true).front())));  // operands untouched
}

TEST_CASE("a grouped result's shape is made once and shared by trees laid out alike",
          "[unit][grouped_result][reduce]") {
  // Without its non-tensor entry: shapes holding one are not shared between trees (their values
  // are not compared), only between the results of one tree.
  const TensorDict x = mixed_tree().exclude({NestedKey("info")});
  const TensorDict a = consolidate(x);
  TensorDict r1 = a.sum(0);
  const TensorDict r2 = a.sum(0);
  const TensorDict r3 = consolidate(x.clone()).sum(0);
  CHECK(level_of(r1).shape() != nullptr);
  CHECK(level_of(r1).shape() == level_of(r2).shape());
  CHECK(level_of(r1).shape() == level_of(r3).shape());
  const TensorDict with_info = consolidate(mixed_tree());
  CHECK(level_of(with_info.sum(0)).shape() == level_of(with_info.sum(0)).shape());
  CHECK(level_of(a.sum(0, true)).shape() != level_of(r1).shape());  // other batch sizes
  CHECK(level_of(a.mean()).shape() != level_of(r1).shape());
  // Results of one shape are leaves of their own.
  const at::Tensor before = r2.get("a").clone();
  r1.get("a").fill_(-7);
  r1.get({"n", "p"}).fill_(-7);
  CHECK(at::equal(r2.get("a"), before));
  CHECK(r1.get("b").ne(-7).all().item<bool>());
  CHECK(r1.get({"n", "q"}).ne(-7).all().item<bool>());
  // A result written to is a tree like any: its shape no longer shared.
  r1.set("new", at::zeros({}));
  CHECK(level_of(r1).shape() == nullptr);
  CHECK(level_of(r2).shape() != nullptr);
  require_identical(a.sum(0), x.clone().sum(0));
}

TEST_CASE("ops over a grouped result: one storage, or several runs", "[unit][grouped_result][reduce]") {
  const TensorDict x = mixed_tree();
  const TensorDict a = consolidate(x);
  SECTION("several groups: the result's leaves lie in one storage a group") {
    const TensorDict r = a.sum(0);
    require_identical(r.exp(), x.clone().sum(0).exp());
    require_identical(r + r, x.clone().sum(0) + x.clone().sum(0));
    require_identical(r.mul(2).mean(), x.clone().sum(0).mul(2).mean());
    require_identical(r.sum(), x.clone().sum(0).sum());
    CHECK(consolidate(r).get("a").equal(r.get("a")));
  }
  SECTION("one group: the result is one storage its leaves tile, and the next op one kernel") {
    TensorDict y({}, {6});
    for (int i = 0; i < 5; ++i) y.set({"g", "l" + std::to_string(i)}, at::randn({6, 3}));
    const TensorDict r = consolidate(y).mean(0);
    CHECK(deferred(r));
    TensorDict e;
    CHECK(KernelCount::of("aten::exp", [&] { e = r.exp(); }) == 1);
    require_identical(e, y.clone().mean(0).exp());
    CHECK(KernelCount::of("aten::sum", [&] { e = r.sum(); }) == 1);
    require_identical(e, y.clone().mean(0).sum());
  }
}

TEST_CASE("where with a tensordict: from the shape where both trees are laid out alike",
          "[unit][grouped_result]") {
  const TensorDict x = mixed_tree(), y = mixed_tree();  // one structure, other values
  const TensorDict a = consolidate(x), b = consolidate(y);
  const at::Tensor mask = at::tensor({0, 1, 1, 0, 1, 0}).to(at::kBool);
  TensorDict xa = x.clone(), ya = y.clone();
  xa.lock_();
  const TensorDict r = a.where(mask, b);
  CHECK(deferred(r));
  require_identical(r, xa.where(mask, ya));
  SECTION("laid out otherwise (keys in another order): groups from the matched leaves") {
    TensorDict z({}, {6});
    for (const NestedKey& k : y.keys(true, true)) {
      if (k.size() == 1) z.set(k, y.get(k));
    }
    z.set("n", y.get_tensordict("n"));
    z.set("m", y.get_tensordict("m"));
    z.set("empty", TensorDict({}, {6}));
    z.set_non_tensor("info", json::Value("episode"));
    z = z.select({NestedKey("n"), NestedKey("m"), NestedKey("a"), NestedKey("b"), NestedKey("c"), NestedKey("d"),
                  NestedKey("e"), NestedKey("info"), NestedKey("empty")});
    z.refine_names({std::string("t")});
    const TensorDict c = consolidate(z);
    const TensorDict rc = a.where(mask, c);
    CHECK_FALSE(deferred(rc));
    require_identical(rc, xa.where(mask, z.clone()));
  }
  SECTION("the other of another dtype, laid out alike: results promoted as per leaf") {
    const TensorDict d = consolidate(y.to(at::kDouble));
    const TensorDict rd = a.where(mask, d);
    require_identical(rd, xa.where(mask, y.clone().to(at::kDouble)));
    CHECK(rd.get("a").scalar_type() == at::kDouble);
  }
}

TEST_CASE("a group's batch-shaped operand is the per-leaf operand with a leading 1, strides included",
          "[unit][grouped_result]") {
  // Built directly over a contiguous operand: the same sizes and strides as view and unsqueeze
  // give (TensorIterator lays results out by them), over the same elements.
  for (const std::vector<int64_t>& batch : {std::vector<int64_t>{4}, std::vector<int64_t>{4, 3}}) {
    TensorDict td({}, batch);
    for (const at::Tensor& w : {at::randn(batch), at::randn({batch.back()}), at::randn(batch).t().contiguous().t()}) {
      if (w.dim() != static_cast<int64_t>(batch.size()) && batch.size() == 1) continue;
      const ops::AlignedTensor aligned(td, w, "mul");
      for (int64_t rank = static_cast<int64_t>(batch.size()); rank < static_cast<int64_t>(batch.size()) + 3; ++rank) {
        INFO("batch " << batch.size() << " dims, operand " << w.sizes() << ", leaf rank " << rank);
        const at::Tensor got = aligned.group_operand(rank);
        const at::Tensor want = aligned.operand_of_rank(rank).unsqueeze(0);
        CHECK(got.sizes() == want.sizes());
        CHECK(got.strides() == want.strides());
        CHECK(got.storage_offset() == want.storage_offset());
        CHECK(at::equal(got, want));
      }
    }
  }
}

TEST_CASE("grouped results step aside where the per-leaf path differs or raises",
          "[unit][grouped_result][reduce][errors]") {
  SECTION("a leaf made to need grad: autograd records the per-leaf ops") {
    TensorDict x({}, {4});
    x.set("a", at::randn({4, 3}));
    x.set("b", at::randn({4, 3}));
    const TensorDict a = consolidate(x);
    at::Tensor leaf = a.get("a");
    leaf.requires_grad_(true);
    const TensorDict r = a.sum(0);
    CHECK_FALSE(deferred(r));
    REQUIRE(r.get("a").requires_grad());
    r.get("a").sum().backward();
    CHECK(leaf.grad().defined());
    {
      const at::NoGradGuard no_grad;  // the check asks for grad in grad mode only
      require_identical(a.sum(0), x.clone().sum(0));
    }
  }
  SECTION("a leaf without elements: per leaf") {
    TensorDict x({}, {4});
    x.set("a", at::randn({4, 3}));
    x.set("z", at::randn({4, 0}));
    const TensorDict r = consolidate(x).sum(0);
    CHECK_FALSE(deferred(r));
    require_identical(r, x.clone().sum(0));
  }
  SECTION("leaves LibTorch reduces over threads: per leaf, where the sum order would differ") {
    const int threads = at::get_num_threads();
    at::set_num_threads(2);
    TensorDict x({}, {2});
    x.set("a", at::randn({2, 40000}));
    x.set("b", at::randn({2, 40000}));
    const TensorDict r = consolidate(x).sum();
    const TensorDict want = x.clone().sum();
    at::set_num_threads(threads);
    CHECK_FALSE(deferred(r));
    require_identical(r, want);
  }
  SECTION("a kernel that raises: the per-leaf path names the key") {
    TensorDict x({}, {4});
    x.set("steps", at::arange(8).view({4, 2}));
    x.set("more", at::arange(8).view({4, 2}));
    const TensorDict a = consolidate(x);
    try {
      a.mean(0);
      FAIL("mean of int64 leaves raised nothing");
    } catch (const std::exception& e) {
      INFO(e.what());
      CHECK(std::strstr(e.what(), "'steps'") != nullptr);
    }
  }
  SECTION("a locked operand: the result is unlocked, as per leaf") {
    TensorDict a = consolidate(mixed_tree());
    a.lock_();
    const TensorDict r = a.sum(0);
    CHECK(deferred(r));
    CHECK_FALSE(r.is_locked());
    require_identical(r, a.clone().sum(0));
  }
}

TEST_CASE("in place over an intact tree: one write a group of its storage, as per leaf",
          "[unit][grouped_result][inplace]") {
  at::manual_seed(5);
  TensorDict x({}, {6});  // one dtype: one storage, no runs
  for (int i = 0; i < 4; ++i) x.set("a" + std::to_string(i), at::randn({6, 4}));
  x.set("d", at::randn({6}));
  x.set({"n", "p"}, at::randn({6, 3}));
  const at::Tensor mask = at::tensor({1, 0, 0, 1, 1, 0}).to(at::kBool);
  const at::Tensor w = at::randn({6});
  const bool read = GENERATE(false, true);
  INFO("leaves read first: " << read);
  TensorDict a = consolidate(x);  // locked: in-place writes of values are allowed
  TensorDict apart = x.clone();
  apart.lock_();
  std::vector<at::Tensor> held;
  if (read) held = runs_fixtures::read_all(a);
  const int64_t version = read ? held.front()._version() : 0;
  SECTION("td.mul_(w): one kernel a group") {
    CHECK(KernelCount::of("aten::mul_", [&] { a.mul_(w); }) == 3);  // [6, 4] x4, [6], [6, 3]
    apart.mul_(w);
  }
  SECTION("masked_fill_") {
    CHECK(KernelCount::of("aten::masked_fill_", [&] { a.masked_fill_(mask, -2.5); }) == 3);
    apart.masked_fill_(mask, -2.5);
  }
  SECTION("an operand that is one of the leaves: per leaf, each leaf after it reading it changed") {
    const at::Tensor own = a.get("d");
    CHECK(KernelCount::of("aten::mul_", [&] { a.mul_(own); }) == 6);
    apart.mul_(apart.get("d"));
  }
  require_identical(a, apart);
  if (read) {
    CHECK(held.front()._version() > version);  // what a saved tensor's check reads
    CHECK(at::equal(held.front(), a.get(a.keys(true, true).front())));
  }
}

TEST_CASE("in place over runs of several dtypes: a dtype the op refuses raises before any write",
          "[unit][grouped_result][inplace]") {
  at::manual_seed(6);
  // Consolidate lays the leaves out in key order: runs of one dtype (one kernel each, fewer runs
  // than half the leaves) where the keys list each dtype's leaves together.
  TensorDict x({}, {6});
  for (int i = 0; i < 3; ++i) x.set("a_f" + std::to_string(i), at::randn({6, 3}));
  x.set("b_d0", at::randn({6, 2}, at::kDouble));
  x.set("b_d1", at::randn({6, 2}, at::kDouble));
  x.set("c_i0", at::randint(0, 9, {6, 3}, at::kLong));
  x.set("c_i1", at::randint(0, 9, {6, 3}, at::kLong));
  x.set("d_b0", at::rand({6, 4}).gt(0.5));
  TensorDict a = consolidate(x);
  TensorDict apart = x.clone();
  apart.lock_();
  const at::Tensor mask = at::tensor({1, 1, 0, 0, 1, 0}).to(at::kBool);
  SECTION("masked_fill_ takes every dtype: one kernel a group of each run") {
    // Four groups, one a run: each write tried on no entries first (several dtypes), then run.
    CHECK(KernelCount::of("aten::masked_fill_", [&] { a.masked_fill_(mask, 1); }) == 2 * 4);
    apart.masked_fill_(mask, 1);
  }
  SECTION("mul_ by a float tensor: the int64 leaves refuse it, the leaves before them are written, as per leaf") {
    const at::Tensor w = at::randn({6});
    CHECK_THROWS(a.mul_(w));
    CHECK_THROWS(apart.mul_(w));
  }
  require_identical(a, apart);
}

TEST_CASE("grouped results from many threads at once", "[unit][grouped_result][reduce][threads]") {
  const TensorDict x = mixed_tree();
  const TensorDict a = consolidate(x);
  const TensorDict want = x.clone().sum(0);
  std::vector<TensorDict> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = a.sum(0); });
  for (std::thread& t : threads) t.join();
  threads.clear();
  std::vector<at::Tensor> read(got.size());
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { read[i] = got[0].get({"n", "q"}); });
  for (std::thread& t : threads) t.join();
  for (const TensorDict& r : got) require_identical(r, want);
  for (const at::Tensor& t : read) CHECK(t.is_same(read.front()));
  // A locked result (where keeps the lock of a consolidated tensordict): its nested levels built
  // locked by whichever reader comes first.
  const at::Tensor mask = at::tensor({1, 0, 0, 1, 1, 0}).to(at::kBool);
  TensorDict apart = x.clone();
  apart.lock_();
  const TensorDict locked = a.where(mask, 0.5);
  REQUIRE(locked.is_locked());
  threads.clear();
  std::vector<TensorDict> levels(4);
  for (size_t i = 0; i < levels.size(); ++i) threads.emplace_back([&, i] { levels[i] = locked.get_tensordict("n"); });
  for (std::thread& t : threads) t.join();
  for (const TensorDict& n : levels) CHECK(n.is_locked());
  require_identical(locked, apart.where(mask, 0.5));
}

}  // namespace grouped_result_test

namespace grouped_result_test {

// A random tree of one dtype, or of float and double leaves (`mixed`: runs, Note [Intact runs]):
// root batch of 1-2 dims, leaves drawn from a few shapes (so that groups form, and break where
// spacings differ; odd sizes make consolidate pad), nested levels with extra batch dims, an
// empty level now and then.
TensorDict random_tree(std::mt19937& rng, at::ScalarType one_dtype, bool mixed) {
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::vector<int64_t> batch{1 + pick(4)};
  if (pick(3) == 0) batch.push_back(1 + pick(3));
  const std::vector<std::vector<int64_t>> features = {{}, {3}, {2}, {2, 2}, {1}};
  const auto leaf = [&](const std::vector<int64_t>& level_batch) {
    std::vector<int64_t> sizes = level_batch;
    const auto& f = features[static_cast<size_t>(pick(static_cast<int>(features.size())))];
    sizes.insert(sizes.end(), f.begin(), f.end());
    const at::ScalarType dtype = mixed ? (pick(2) == 0 ? at::kFloat : at::kDouble) : one_dtype;
    at::Tensor t = dtype == at::kBool ? at::rand(sizes).gt(0.5) : at::randn(sizes).mul(4).to(dtype);
    if (at::isFloatingType(dtype) && pick(4) == 0 && t.numel() > 0) t.view({-1})[0] = NAN;
    return t;
  };
  TensorDict x({}, batch);
  const int leaves = 1 + pick(6);
  for (int i = 0; i < leaves; ++i) x.set("l" + std::to_string(pick(9)), leaf(batch));
  for (int n = pick(3); n > 0; --n) {
    std::vector<int64_t> inner = batch;
    if (pick(2) == 0) inner.push_back(1 + pick(3));
    TensorDict level({}, inner);
    for (int i = pick(4); i > 0; --i) level.set("m" + std::to_string(pick(5)), leaf(inner));
    x.set("n" + std::to_string(n), level);
  }
  return x;
}

TEST_CASE("grouped results over random consolidated trees match the per-leaf ones",
          "[unit][grouped_result][reduce][differential]") {
  // TD_GROUPED_ROUNDS and TD_GROUPED_SEED run more.
  const char* rounds_env = std::getenv("TD_GROUPED_ROUNDS");
  const char* seed_env = std::getenv("TD_GROUPED_SEED");
  const int rounds = rounds_env != nullptr ? std::atoi(rounds_env) : 150;
  const unsigned seed = seed_env != nullptr ? static_cast<unsigned>(std::atoi(seed_env)) : 20261129u;
  std::mt19937 rng(seed);
  at::manual_seed(seed);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kBool};
  using Reduction = std::function<TensorDict(const TensorDict&, std::optional<int64_t>, bool)>;
  at::Tensor mask, w;  // batch-shaped operands, drawn for each tree
  const std::vector<std::pair<const char*, Reduction>> ops = {
      {"sum", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.sum(d, k); }},
      {"mean", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.mean(d, k); }},
      {"nansum", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.nansum(d, k); }},
      {"nanmean", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.nanmean(d, k); }},
      {"prod", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.prod(d, k); }},
      {"amax", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.amax(d, k); }},
      {"amin", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.amin(d, k); }},
      {"norm", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.norm(d, k); }},
      {"quantile", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.quantile(0.3, d, k); }},
      {"logsumexp", [](const TensorDict& t, std::optional<int64_t> d, bool k) { return t.logsumexp(d, k); }},
      {"all", [](const TensorDict& t, std::optional<int64_t> d, bool) { return t.all(d.value_or(0)); }},
      {"any", [](const TensorDict& t, std::optional<int64_t> d, bool) { return t.any(d.value_or(-1)); }},
      {"sum(features)", [](const TensorDict& t, std::optional<int64_t>, bool) { return t.sum(FeatureDims{}); }},
      {"masked_fill", [&](const TensorDict& t, std::optional<int64_t>, bool) { return t.masked_fill(mask, 3); }},
      {"where(mask, 1)", [&](const TensorDict& t, std::optional<int64_t>, bool) { return t.where(mask, 1); }},
      {"td * w", [&](const TensorDict& t, std::optional<int64_t>, bool) { return t * w; }},
      {"td / w[0]", [&](const TensorDict& t, std::optional<int64_t>, bool) { return t / w.select(0, 0); }},
      {"where(mask, td.clone())", [&](const TensorDict& t, std::optional<int64_t>, bool) { return t.where(mask, t.clone()); }},
  };
  size_t grouped = 0, compared = 0;
  for (int round = 0; round < rounds; ++round) {
    const at::ScalarType dtype = dtypes[static_cast<size_t>(pick(static_cast<int>(dtypes.size())))];
    const bool mixed = pick(3) == 0;
    const TensorDict x = random_tree(rng, dtype, mixed);
    TensorDict a = consolidate(x);
    std::vector<at::Tensor> held;
    if (pick(2) == 0) held = runs_fixtures::read_all(a);
    if (pick(4) == 0) a.unlock_();
    TensorDict apart = x.clone();
    if (a.is_locked()) apart.lock_();
    mask = at::rand(x.batch_size()).gt(0.5);
    w = at::randn(x.batch_size()).to(pick(2) == 0 ? at::kFloat : at::kDouble);
    for (int step = 0; step < 4; ++step) {
      const auto& [name, op] = ops[static_cast<size_t>(pick(static_cast<int>(ops.size())))];
      std::optional<int64_t> dim;
      if (pick(2) == 0) dim = pick(static_cast<int>(x.batch_dims()));
      const bool keepdim = pick(2) == 0;
      INFO("round " << round << ", " << name << "(" << (dim ? std::to_string(*dim) : "none") << ", keepdim "
                    << keepdim << ") over " << (mixed ? "float and double" : c10::toString(dtype)));
      TensorDict want, got;
      bool want_raised = false, got_raised = false;
      try {
        want = op(apart, dim, keepdim);
      } catch (const std::exception&) {
        want_raised = true;
      }
      try {
        got = op(a, dim, keepdim);
      } catch (const std::exception&) {
        got_raised = true;
      }
      REQUIRE(got_raised == want_raised);
      if (want_raised) continue;
      grouped += deferred(got) ? 1 : 0;
      ++compared;
      require_identical(got, want);
      if (pick(3) == 0 && at::isFloatingType(got.get(got.keys(true, true).front()).scalar_type()))
        require_identical(got.exp(), want.exp());  // over the result's one or several storages
    }
    // In place, the tree written as per leaf (an error, a dtype's, raised alike and nothing
    // written), then read again by the next round's ops.
    const int which = pick(3);
    bool a_raised = false, apart_raised = false;
    const auto in_place = [&](TensorDict& t, bool& raised) {
      try {
        if (which == 0) t.mul_(w);
        else if (which == 1) t.masked_fill_(mask, 2);
        else t.div_(w);
      } catch (const std::exception&) {
        raised = true;
      }
    };
    in_place(a, a_raised);
    in_place(apart, apart_raised);
    INFO("round " << round << ", in place #" << which);
    REQUIRE(a_raised == apart_raised);
    require_identical(a, apart);
  }
  // Most reductions took the grouped path (the rest: leaves without elements, errors).
  CHECK(grouped * 2 > compared);
}

}  // namespace grouped_result_test
