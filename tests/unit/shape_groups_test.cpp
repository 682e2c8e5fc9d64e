// Reductions per leaf over leaves of one shape lying evenly spaced in one storage (Note [Shape
// groups]): one kernel a group, each leaf's result the one the per-leaf path gives (compared
// with the same op on a copy of the tree whose leaves each have a storage of their own).
// Kernels are counted with a RecordFunction callback.
#include "support/catch_torch.h"

#include <functional>
#include <thread>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/ops.h>

#include "support/runs_fixtures.h"

using namespace tensordict;

// A namespace of its own, not an anonymous one: the sanitizer build compiles test files together.
namespace shape_groups_test {

using runs_fixtures::KernelCount;
using runs_fixtures::read_all;
using runs_fixtures::require_same;

int kernels(const char* op, const std::function<void()>& run) { return KernelCount::of(op, run); }

// Ten float leaves [8, 4] over two levels, then one [8, 2] deeper: consolidated, the ten are one
// group and the deep one a leaf of its own.
TensorDict uniform() { return runs_fixtures::two_levels(0); }

// `td` with every leaf copied into a storage of its own: the per-leaf path's operand.
TensorDict apart(const TensorDict& td) { return td.clone(); }

TEST_CASE("reductions per leaf of a consolidated tensordict run one kernel a group of one shape",
          "[unit][shape_groups][reduce]") {
  const TensorDict x = uniform();
  const TensorDict a = consolidate(x);
  const bool read = GENERATE(false, true);
  INFO("leaves read and held: " << read);
  std::vector<at::Tensor> held;
  if (read) held = read_all(a);
  TensorDict r;
  SECTION("over every dim of a leaf") {
    // Without the deep leaf the ten leaves are one group: one call of the dim overload. (The
    // per-leaf path calls the full overload, which LibTorch records twice.)
    const TensorDict x10 = x.exclude({NestedKey({"g1", "deep"})});
    const TensorDict a10 = a.exclude({NestedKey({"g1", "deep"})});
    CHECK(kernels("aten::sum", [&] { r = a10.sum(); }) == 1);
    require_same(r, x10.sum());
    CHECK(r.batch_size().empty());
    CHECK(kernels("aten::mean", [&] { r = a10.mean(); }) == 1);
    require_same(r, x10.mean());
    // std and var stay per leaf: LibTorch reduces a leaf to one value with another algorithm
    // than a group's rows (1-2 ulp apart in double).
    CHECK(kernels("aten::std", [&] { r = a10.std(); }) == kernels("aten::std", [&] { x10.std(); }));
    require_same(r, x10.std());
    require_same(a.sum(), x.sum());
    require_same(a.mean(), x.mean());
    require_same(a.var(std::nullopt, false, false), x.var(std::nullopt, false, false));
    require_same(a.amax(), x.amax());
    require_same(a.min(), x.min());
    require_same(a.norm(), x.norm());
    require_same(a.prod(), x.prod());
    require_same(a.nansum(), x.nansum());
    require_same(a.quantile(0.25), x.quantile(0.25));
  }
  SECTION("over a batch dim, keepdim or not") {
    CHECK(kernels("aten::sum", [&] { r = a.sum(0); }) == 2);
    require_same(r, x.sum(0));
    CHECK(kernels("aten::mean", [&] { r = a.mean(-1, /*keepdim=*/true); }) == 2);
    require_same(r, x.mean(-1, true));
    CHECK(r.batch_size() == std::vector<int64_t>{1});
    require_same(a.amax(0), x.amax(0));
    require_same(a.std(0, false, false), x.std(0, false, false));
    // LibTorch records logsumexp twice a call: two groups, against 22 per leaf.
    CHECK(kernels("aten::logsumexp", [&] { r = a.logsumexp(); }) == 4);
    require_same(r, x.logsumexp());
  }
  SECTION("max and min over a batch dim: values and indices") {
    ValuesIndices got, want = x.max(-1, /*keepdim=*/true);
    CHECK(kernels("aten::max", [&] { got = a.max(-1, true); }) == 2);
    require_same(got.values, want.values);
    require_same(got.indices, want.indices);
    CHECK(got.indices.get({"g0", "x3"}).scalar_type() == at::kLong);
    got = a.min(0);
    want = x.min(0);
    require_same(got.values, want.values);
    require_same(got.indices, want.indices);
  }
  SECTION("over the features") {
    CHECK(kernels("aten::sum", [&] { r = a.sum(FeatureDims{}); }) == 2);
    require_same(r, x.sum(FeatureDims{}));
    CHECK(r.batch_size() == std::vector<int64_t>{8});
    require_same(a.mean(FeatureDims{}), x.mean(FeatureDims{}));
  }
  SECTION("all and any over a batch dim") {
    const TensorDict bx = x.gt(0.5);
    const TensorDict b = consolidate(bx);
    CHECK(kernels("aten::all", [&] { r = b.all(0); }) == 2);
    require_same(r, bx.all(0));
    require_same(b.any(0), bx.any(0));
  }
  if (read) CHECK(at::equal(held.front(), x.get({"g0", "x0"})));  // operands untouched
}

TEST_CASE("shape groups: results are leaves of their own, and a never-consolidated tree is per leaf",
          "[unit][shape_groups][reduce]") {
  const TensorDict x = uniform();
  SECTION("writing one result leaf leaves the others as they were") {
    TensorDict r = consolidate(x).sum(0);
    const at::Tensor before = r.get({"g0", "x1"}).clone();
    r.get({"g0", "x0"}).fill_(-1);
    CHECK(at::equal(r.get({"g0", "x1"}), before));
    CHECK(r.get({"g0", "x0"}).eq(-1).all().item<bool>());
  }
  SECTION("a result over one group is one storage its leaves tile: the next op is one kernel") {
    const TensorDict a10 = consolidate(x.exclude({NestedKey({"g1", "deep"})}));
    const TensorDict r = a10.sum(0);
    TensorDict e;
    CHECK(kernels("aten::exp", [&] { e = r.exp(); }) == 1);
    require_same(e, x.exclude({NestedKey({"g1", "deep"})}).sum(0).exp());
  }
  SECTION("leaves each in a storage of their own: one kernel a leaf, as before") {
    TensorDict r;
    CHECK(kernels("aten::sum", [&] { r = x.sum(0); }) == 11);
    CHECK(kernels("aten::mean", [&] { r = x.mean(0); }) == 11);
  }
}

TEST_CASE("shape groups over leaves laid out otherwise than by consolidate", "[unit][shape_groups][reduce]") {
  SECTION("padded (Python's layout of odd-sized 4-byte leaves): one group stepping over the padding") {
    TensorDict x({}, {3});
    for (int i = 0; i < 6; ++i) x.set("l" + std::to_string(i), at::randn({3}));
    const TensorDict a = consolidate(x);
    TensorDict r;
    CHECK(kernels("aten::sum", [&] { r = a.sum(0); }) == 1);
    require_same(r, x.sum(0));
    require_same(a.mean(), x.mean());
  }
  SECTION("columns of one tensor (interleaved, not contiguous): per leaf; overlapping slices group") {
    // A group of interleaved leaves would lay an elementwise result out in the group's stride
    // order, not each leaf's: non-contiguous leaves stay per leaf.
    const at::Tensor base = at::randn({8, 5, 4});
    TensorDict cols({}, {8});
    for (int i = 0; i < 5; ++i) cols.set("c" + std::to_string(i), base.select(1, i));
    TensorDict r;
    CHECK(kernels("aten::sum", [&] { r = cols.sum(0); }) == 5);
    require_same(r, apart(cols).sum(0));
    const at::Tensor rows_mask = at::tensor({1, 0, 1, 0, 1, 1, 0, 0}).to(at::kBool);
    CHECK(cols.where(rows_mask, 1.0).get("c1").is_contiguous());
    require_same(cols.amin(FeatureDims{}), apart(cols).amin(FeatureDims{}));
    const at::Tensor flat = at::randn({40});
    TensorDict overlapping({}, {4});
    for (int i = 0; i < 5; ++i) overlapping.set("o" + std::to_string(i), flat.narrow(0, 2 * i, 16).view({4, 4}));
    CHECK(kernels("aten::mean", [&] { r = overlapping.mean(0); }) == 1);
    require_same(r, apart(overlapping).mean(0));
  }
  SECTION("slices in reverse key order group by place; unevenly spaced ones do not") {
    const at::Tensor flat = at::randn({64});
    TensorDict reverse({}, {4});
    for (int i = 3; i >= 0; --i) reverse.set("r" + std::to_string(3 - i), flat.narrow(0, 16 * i, 16).view({4, 4}));
    TensorDict r;
    CHECK(kernels("aten::sum", [&] { r = reverse.sum(0); }) == 1);
    require_same(r, apart(reverse).sum(0));
    TensorDict uneven({}, {4});
    uneven.set("a", flat.narrow(0, 0, 8).view({4, 2}));
    uneven.set("b", flat.narrow(0, 8, 8).view({4, 2}));
    uneven.set("c", flat.narrow(0, 20, 8).view({4, 2}));
    CHECK(kernels("aten::sum", [&] { r = uneven.sum(0); }) == 2);  // a and b, then c
    require_same(r, apart(uneven).sum(0));
  }
  SECTION("float and double leaves alternating in key order: one group a dtype") {
    TensorDict x({}, {4});
    for (int i = 0; i < 6; ++i) x.set("l" + std::to_string(i), at::randn({4, 3}, i % 2 ? at::kDouble : at::kFloat));
    const TensorDict a = consolidate(x);
    TensorDict r;
    CHECK(kernels("aten::sum", [&] { r = a.sum(0); }) == 2);
    require_same(r, x.sum(0));
    CHECK(r.get("l1").scalar_type() == at::kDouble);
    require_same(a.logsumexp(), x.logsumexp());
  }
  SECTION("mixed dtypes and shapes, nested levels with extra batch dims") {
    TensorDict x({}, {4});
    x.set("f0", at::randn({4, 3}));
    x.set("f1", at::randn({4, 3}));
    x.set("d0", at::randn({4, 3}, at::kDouble));
    x.set("i0", at::randint(0, 9, {4, 3}, at::kLong));
    x.set("i1", at::randint(0, 9, {4, 3}, at::kLong));
    TensorDict inner({}, {4, 2});
    inner.set("p", at::randn({4, 2, 3}));
    inner.set("q", at::randn({4, 2, 3}));
    x.set("n", inner);
    const TensorDict a = consolidate(x);
    require_same(a.sum(), x.sum());
    require_same(a.sum(0), x.sum(0));
    require_same(a.amax(FeatureDims{}), x.amax(FeatureDims{}));
    CHECK(a.sum(FeatureDims{}).get({"n", "p"}).sizes() == c10::IntArrayRef({4, 2}));
  }
}

TEST_CASE("shape groups keep autograd and the per-leaf errors", "[unit][shape_groups][reduce]") {
  SECTION("leaves that need grad take the per-leaf path, and gradients reach them") {
    TensorDict x = uniform();
    TensorDict a = consolidate(x);
    a.unlock_();
    const at::Tensor leaf = at::randn({8, 4}).requires_grad_();
    a.set({"g0", "x2"}, leaf);
    TensorDict r = a.sum();
    CHECK(r.get({"g0", "x2"}).requires_grad());
    CHECK_FALSE(r.get({"g0", "x1"}).requires_grad());
    r.get({"g0", "x2"}).backward();
    REQUIRE(leaf.grad().defined());
    CHECK(leaf.grad().eq(1).all().item<bool>());
    require_same(r, apart(a).sum());
  }
  SECTION("an op a group's dtype refuses raises naming the first key, as per leaf") {
    TensorDict x({}, {4});
    for (int i = 0; i < 4; ++i) x.set("i" + std::to_string(i), at::randint(0, 9, {4, 2}, at::kLong));
    const TensorDict a = consolidate(x);
    try {
      a.mean();
      FAIL("mean of int64 leaves did not raise");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("i0"));
    }
  }
}

}  // namespace shape_groups_test

namespace shape_groups_test {

TEST_CASE("masked_fill, masked_fill_ and where with a batch-shaped mask run one kernel a group",
          "[unit][shape_groups][masking]") {
  const TensorDict x = uniform();
  const at::Tensor mask = at::arange(8).remainder(3).eq(0);
  SECTION("out of place: masked_fill, where with a scalar or a tensor") {
    const TensorDict a = consolidate(x);
    TensorDict r;
    CHECK(kernels("aten::masked_fill", [&] { r = a.masked_fill(mask, -1.0); }) == 2);  // ten leaves, then the deep one
    require_same(r, x.masked_fill(mask, -1.0));
    // LibTorch records where with a scalar twice a call: 2 groups against 11 leaves.
    CHECK(kernels("aten::where", [&] { r = a.where(mask, 7.0); }) * 11 ==
          kernels("aten::where", [&] { x.where(mask, 7.0); }) * 2);
    require_same(r, x.where(mask, 7.0));
    const at::Tensor other = at::randn({8, 1});
    CHECK(kernels("aten::where", [&] { r = a.where(mask, other); }) == 2);
    require_same(r, x.where(mask, other));
    // Non-tensor data rides along, as per leaf.
    TensorDict labelled = x.clone();
    labelled.set_non_tensor("label", json::Value("run 7"));
    const TensorDict b = consolidate(labelled);
    r = b.where(mask, other);
    CHECK(r.get_non_tensor("label").value().as_string() == "run 7");
    require_same(r.exclude({NestedKey("label")}), x.where(mask, other));
  }
  SECTION("in place over a read tree: held leaves see it, their versions bumped") {
    TensorDict a = consolidate(x);
    const std::vector<at::Tensor> held = read_all(a);
    const auto version = held.front()._version();
    CHECK(kernels("aten::masked_fill_", [&] { a.masked_fill_(mask, 0.5); }) == 2);
    CHECK(held.front()._version() > version);
    TensorDict y = x.clone();
    y.masked_fill_(mask, 0.5);
    require_same(a, y);
    CHECK(at::equal(held.front(), y.get({"g0", "x0"})));
  }
  SECTION("in place over one group of an op's result: each held leaf's own version bumped") {
    // The leaves of an op's result have version counters of their own (core/strided_view.h).
    const TensorDict x10 = x.exclude({NestedKey({"g1", "deep"})});
    TensorDict a = consolidate(x10) * 1.0;
    const std::vector<at::Tensor> held = read_all(a);
    std::vector<int64_t> versions;
    for (const at::Tensor& t : held) versions.push_back(t._version());
    CHECK(kernels("aten::masked_fill_", [&] { a.masked_fill_(mask, 0.5); }) == 1);
    for (size_t i = 0; i < held.size(); ++i) CHECK(held[i]._version() > versions[i]);
    TensorDict y = x10.clone();
    y.masked_fill_(mask, 0.5);
    require_same(a, y);
  }
  SECTION("in place over several dtypes: per leaf") {
    TensorDict m({}, {8});
    m.set("f", at::randn({8, 2}));
    m.set("d", at::randn({8, 2}, at::kDouble));
    m.set("g", at::randn({8, 2}));
    m.set("e", at::randn({8, 2}, at::kDouble));
    TensorDict a = consolidate(m);
    CHECK(kernels("aten::masked_fill_", [&] { a.masked_fill_(mask, 2); }) == 4);
    TensorDict y = m.clone();
    y.masked_fill_(mask, 2);
    require_same(a, y);
  }
  SECTION("a mask that is one of the leaves: per leaf, as the leaves change it in turn") {
    TensorDict b({}, {8});
    for (int i = 0; i < 4; ++i) b.set("b" + std::to_string(i), at::rand({8}).gt(0.3));
    b.set("b0", mask.clone());
    TensorDict a = consolidate(b);
    TensorDict y = b.clone();
    CHECK(kernels("aten::masked_fill_", [&] { a.masked_fill_(a.get("b0"), false); }) == 4);
    y.masked_fill_(y.get("b0"), false);
    require_same(a, y);
  }
  SECTION("a leaf that needs grad: per leaf, raising at its key with the leaves after it unwritten") {
    TensorDict a = consolidate(x);
    a.unlock_();
    a.set({"g0", "x2"}, at::randn({8, 4}).requires_grad_());
    const at::Tensor after = a.get({"g0", "x3"}).clone();
    try {
      a.masked_fill_(mask, 9.0);
      FAIL("masked_fill_ of a leaf that needs grad did not raise");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("x2"));
    }
    CHECK(a.get({"g0", "x0"}).masked_select(mask.view({8, 1}).expand({8, 4})).eq(9).all().item<bool>());
    CHECK(at::equal(a.get({"g0", "x3"}), after));
  }
}

}  // namespace shape_groups_test

namespace shape_groups_test {

TEST_CASE("shape groups under concurrent readers: one tree reduced by four threads, one result read by four",
          "[unit][shape_groups][reduce]") {
  const TensorDict x = uniform();
  const TensorDict a = consolidate(x);  // nobody has read its leaves: the threads make them
  const TensorDict expected = x.sum(0);
  std::vector<TensorDict> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) threads.emplace_back([&, t] { results[t] = a.sum(0); });
  for (std::thread& t : threads) t.join();
  for (const TensorDict& r : results) require_same(r, expected);
  // One result whose leaves nobody has made, read by four threads at once.
  const TensorDict shared = a.mean();
  std::vector<std::vector<at::Tensor>> seen(4);
  threads.clear();
  for (size_t t = 0; t < 4; ++t) threads.emplace_back([&, t] { seen[t] = read_all(shared); });
  for (std::thread& t : threads) t.join();
  const std::vector<at::Tensor> mean_leaves = read_all(x.mean());
  for (const auto& leaves : seen) {
    REQUIRE(leaves.size() == mean_leaves.size());
    for (size_t i = 0; i < leaves.size(); ++i) CHECK(at::allclose(leaves[i], mean_leaves[i], 1e-6, 1e-6));
  }
}

}  // namespace shape_groups_test

namespace shape_groups_test {

TEST_CASE("td op a batch-shaped tensor runs one kernel a group, out of place and in place",
          "[unit][shape_groups][arith]") {
  const TensorDict x = uniform();
  const at::Tensor w = at::rand({8}) + 0.5;
  SECTION("out of place, and in place over a read tree") {
    const TensorDict a = consolidate(x);
    TensorDict r;
    CHECK(kernels("aten::mul", [&] { r = a * w; }) == 2);  // ten leaves, then the deep one
    require_same(r, x * w);
    CHECK(kernels("aten::sub", [&] { r = a.sub(w, 2); }) == 2);
    require_same(r, x.sub(w, 2));
    TensorDict b = consolidate(x);
    const std::vector<at::Tensor> held = read_all(b);
    const auto version = held.front()._version();
    CHECK(kernels("aten::mul_", [&] { b.mul_(w); }) == 2);
    CHECK(held.front()._version() > version);
    TensorDict y = x.clone();
    y.mul_(w);
    require_same(b, y);
    CHECK(at::equal(held.front(), y.get({"g0", "x0"})));
  }
  SECTION("an operand that needs grad: per leaf, and the gradient reaches it") {
    const at::Tensor wg = w.clone().requires_grad_();
    const TensorDict a = consolidate(x);
    TensorDict r;
    CHECK(kernels("aten::mul", [&] { r = a * wg; }) == 11);
    REQUIRE(r.get({"g0", "x0"}).requires_grad());
    r.get({"g0", "x0"}).sum().backward();
    REQUIRE(wg.grad().defined());
    CHECK(at::allclose(wg.grad(), x.get({"g0", "x0"}).sum(1)));
    TensorDict b = consolidate(x);
    {
      const at::NoGradGuard no_grad;  // in place into leaves that need no grad
      CHECK(kernels("aten::mul_", [&] { b.mul_(wg); }) == 11);
    }
    TensorDict y = x.clone();
    y.mul_(w);
    require_same(b, y);
  }
  SECTION("in place over leaves that overlap, or with a leaf as the operand: per leaf, in key order") {
    const at::Tensor base = at::arange(40, at::kFloat);
    const auto tree = [](const at::Tensor& flat) {
      TensorDict o({}, {4});
      for (int i = 0; i < 5; ++i) o.set("o" + std::to_string(i), flat.narrow(0, 2 * i, 16).view({4, 4}));
      return o;
    };
    const at::Tensor mine = base.clone(), theirs = base.clone();
    TensorDict o = tree(mine);
    const at::Tensor v = at::tensor({1.5f, 2.0f, 0.5f, 3.0f});
    CHECK(kernels("aten::add_", [&] { o.add_(v); }) == 5);
    TensorDict p = tree(theirs);
    for (int i = 0; i < 5; ++i) p.get("o" + std::to_string(i)).add_(v.view({4, 1}));
    CHECK(at::equal(mine, theirs));
    // A bool leaf of the tree as the mask of masked_fill_ was covered above; here a float leaf
    // of one consolidated tree as the operand of its own add_.
    TensorDict s({}, {4});
    for (int i = 0; i < 4; ++i) s.set("s" + std::to_string(i), at::rand({4}));
    TensorDict c = consolidate(s);
    TensorDict expected = s.clone();
    CHECK(kernels("aten::add_", [&] { c.add_(c.get("s1")); }) == 4);
    expected.add_(expected.get("s1"));
    require_same(c, expected);
  }
}

}  // namespace shape_groups_test

namespace shape_groups_test {

TEST_CASE("shape groups keep the per-leaf dtypes, shapes and values (a review's reproducers)",
          "[unit][shape_groups][arith][masking]") {
  SECTION("0-dim leaves next to a 0-dim operand promote as per leaf") {
    TensorDict x({}, {});
    x.set("a", at::randn({}));
    x.set("b", at::randn({}));
    const TensorDict c = consolidate(x);
    const at::Tensor cond = at::ones({}, at::kBool), other = at::scalar_tensor(2.0, at::kDouble);
    CHECK(c.where(cond, other).get("a").scalar_type() == x.where(cond, other).get("a").scalar_type());
    CHECK((c * other).get("b").scalar_type() == (x * other).get("b").scalar_type());
  }
  SECTION("a 0-dim operand of another dtype does not widen the leaves' dtype") {
    const TensorDict x = uniform();
    const TensorDict a = consolidate(x);
    const at::Tensor twice = at::scalar_tensor(2.0, at::kDouble);
    TensorDict r;
    CHECK(kernels("aten::mul", [&] { r = a * twice; }) == 2);
    CHECK(r.get({"g0", "x0"}).scalar_type() == at::kFloat);
    require_same(r, x * twice);
    TensorDict b = consolidate(x);
    b.mul_(twice);
    TensorDict y = x.clone();
    y.mul_(twice);
    require_same(b, y);
    CHECK(at::equal(b.get({"g1", "x4"}), y.get({"g1", "x4"})));
  }
  SECTION("a tensor that widens the batch to more dims: per leaf, even when the group's count matches") {
    TensorDict x({}, {4});
    for (int i = 0; i < 3; ++i) x.set("l" + std::to_string(i), at::randn({4, 2}));
    const TensorDict a = consolidate(x);
    const at::Tensor w = at::randn({3, 4});  // three leaves: a group of three would broadcast against it
    const TensorDict r = a * w;
    CHECK(r.batch_size() == std::vector<int64_t>{3, 4});
    require_same(r, x * w);
  }
  SECTION("leaves with another stride on a size-1 dim: per leaf, results laid out as each leaf's") {
    const at::Tensor base = at::randn({2, 1, 3});
    TensorDict td({}, {3});
    td.set("a", base[0].t());  // [3, 1], strides [1, 3]: contiguous, but not the standard strides
    td.set("b", base[1].t());
    const at::Tensor w = at::randn({3});
    const TensorDict r = td.mul(w);
    CHECK(r.get("a").strides() == at::mul(base[0].t(), w.view({3, 1})).strides());
    const TensorDict s = td.where(at::ones({3}, at::kBool), td);
    CHECK(s.get("b").strides() == at::where(at::ones({3, 1}, at::kBool), base[1].t(), base[1].t()).strides());
  }
  SECTION("std and var of double leaves, bit for bit") {
    at::manual_seed(1);
    TensorDict x({}, {3});
    x.set("a", at::randn({3, 2}, at::kDouble));
    x.set("b", at::randn({3, 2}, at::kDouble));
    const TensorDict c = consolidate(x);
    CHECK(at::equal(c.std().get("a"), x.std().get("a")));
    CHECK(at::equal(c.var(0).get("b"), x.var(0).get("b")));
  }
}

}  // namespace shape_groups_test

namespace shape_groups_test {

TEST_CASE("where between two tensordicts runs one kernel a group whose partners lie alike",
          "[unit][shape_groups][masking]") {
  const TensorDict x = uniform(), y = runs_fixtures::two_levels(5);
  const at::Tensor mask = at::arange(8).remainder(3).eq(1);
  const TensorDict a = consolidate(x);
  TensorDict r;
  SECTION("both consolidated, one layout") {
    const TensorDict b = consolidate(y);
    CHECK(kernels("aten::where", [&] { r = a.where(mask, b); }) == 2);
    require_same(r, x.where(mask, y));
    read_all(b);
    CHECK(kernels("aten::where", [&] { r = a.where(mask, b); }) == 2);
    require_same(r, x.where(mask, y));
  }
  SECTION("the other of another dtype: the result promotes as per leaf") {
    const TensorDict yd = y.to(at::kDouble);
    const TensorDict b = consolidate(yd);
    CHECK(kernels("aten::where", [&] { r = a.where(mask, b); }) == 2);
    CHECK(r.get({"g0", "x1"}).scalar_type() == at::kDouble);
    require_same(r, x.where(mask, yd));
  }
  SECTION("the other never consolidated: per leaf") {
    CHECK(kernels("aten::where", [&] { r = a.where(mask, y); }) == 11);
    require_same(r, x.where(mask, y));
  }
  SECTION("the other laid out in another key order: the groups its leaves break go per leaf") {
    TensorDict shuffled({}, {8});
    for (int g = 1; g >= 0; --g)
      for (int i = 4; i >= 0; --i) {
        const std::string group = "g" + std::to_string(g), leaf = "x" + std::to_string(i);
        shuffled.set({group, leaf}, y.get({group, leaf}));
      }
    shuffled.set({"g1", "deep", "y"}, y.get({"g1", "deep", "y"}));
    const TensorDict b = consolidate(shuffled);
    r = a.where(mask, b);
    require_same(r, x.where(mask, y));
  }
}

}  // namespace shape_groups_test
