// Note [Intact results]: a packed op's result whose leaves were read, but to which nothing was
// written, still runs the next elementwise op once over its storage, after checking each made
// leaf against where it was made. These cases check that reads keep that path, that every
// in-place change of a leaf's metadata and every write leaves it (with per-leaf results), that a
// nested level of a result is not taken for the whole storage, and that in-place ops over a
// packed storage bump the versions autograd checks, as per-leaf in-place ops do.
#include "support/catch_torch.h"
#include "support/packed_fixtures.h"

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/Dimname.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/forward_grad.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/ops.h>

#include "backends/in_memory/intact_result.h"

using namespace tensordict;

namespace {
// Leaves at the root and in a nested level, one of them 3-D: consolidate packs them with no gap.
TensorDict intact_fixture() {
  return testing_support::root_and_nested_leaves(9, [](int i) { return i == 3 ? at::randn({10, 4, 5}) : at::randn({10, 20}); });
}

bool is_intact(const TensorDict& td) { return in_memory::intact_packed_storage(*td.impl()).defined(); }

void require_same_as(const TensorDict& a, const TensorDict& b) { testing_support::require_same_leaves(a, b); }

// Reads every leaf (makes every level's leaves).
void read_all_leaves(const TensorDict& td) {
  for (const NestedKey& k : td.keys(true, true)) REQUIRE(td.get(k).defined());
}

TensorDict scaled_per_leaf(const TensorDict& td, double s) {
  return td.apply([s](const at::Tensor& t) { return t * at::scalar_tensor(s, t.options()); });
}
}  // namespace

TEST_CASE("a result whose leaves were read stays intact and its ops stay exact", "[unit][intact_result]") {
  TensorDict plain = intact_fixture();
  TensorDict a = consolidate(plain) * 2, b = consolidate(plain) * 3;
  read_all_leaves(a);
  read_all_leaves(b);
  REQUIRE(is_intact(a));
  REQUIRE(is_intact(b));
  const at::Tensor l1 = a.get("l1");
  TensorDict e = a.exp(), s = a + b, g = a.gt(b), c = a.clone(), d = a.to(at::kDouble);
  CHECK(is_intact(e));
  CHECK(is_intact(s));
  CHECK(is_intact(g));
  CHECK(is_intact(c));
  CHECK(is_intact(d));
  require_same_as(e, (plain * 2).exp());
  require_same_as(s, plain * 2 + plain * 3);
  require_same_as(g, (plain * 2).gt(plain * 3));
  require_same_as(d, (plain * 2).to(at::kDouble));
  // Sums compare with a margin too: the data is random in every run (LibTorch seeds its default
  // generator so), a sum of it may nearly cancel, and the two sides round in another order; the
  // relative tolerance alone failed about one run in 24.
  CHECK(a.sum(reduce).item<float>() == Approx((plain * 2).sum(reduce).item<float>()).epsilon(1e-4).margin(1e-3));
  CHECK((a == consolidate(plain) * 2).all());
  // A read result and one nobody read, of one layout: one kernel over both.
  TensorDict fresh = consolidate(plain) * 3;
  TensorDict s2 = a + fresh;
  CHECK(is_intact(s2));
  require_same_as(s2, plain * 2 + plain * 3);
  // In place over the storage: the leaves handed out see it.
  a.mul_(2);
  a.add_(1);
  CHECK(is_intact(a));
  CHECK(at::allclose(l1, plain.get("l1") * 4 + 1));
  require_same_as(a, plain * 4 + 1);
  a.add_(b);  // two intact results of one layout
  a.sub_(fresh, 2);
  CHECK(is_intact(a));
  CHECK(at::allclose(l1, plain.get("l1") + 1, 1e-4, 1e-5));  // 4x + 1 + 3x - 2 * 3x
  a.fill_(0.5);
  CHECK(is_intact(a));
  CHECK(at::equal(l1, at::full_like(l1, 0.5)));
  a.zero_();
  require_same_as(a, plain * 0);
}

TEST_CASE("a made leaf changed in place takes its result off the one-kernel path", "[unit][intact_result]") {
  TensorDict plain = intact_fixture();
  TensorDict r = consolidate(plain) * 2;
  r.unlock_();
  read_all_leaves(r);
  REQUIRE(is_intact(r));
  at::Tensor leaf = r.get({"n", "l3"});  // [10, 4, 5]
  bool named = false;
  SECTION("set_ to another storage") { leaf.set_(at::ones({10, 4, 5})); }
  SECTION("resize_") { leaf.resize_({10, 2, 5}); }
  SECTION("as_strided_ over the same bytes") { leaf.as_strided_({10, 4, 5}, {1, 50, 10}); }
  SECTION("transpose_") { leaf.transpose_(1, 2); }
  SECTION("unsqueeze_") { leaf.unsqueeze_(1); }
  SECTION("requires_grad_") { leaf.requires_grad_(); }

  SECTION("named dims") {
    std::vector<at::Dimname> names;
    for (const char* name : {"b", "h", "w"}) names.push_back(at::Dimname::fromSymbol(at::Symbol::dimname(name)));
    leaf.rename_(names);
    named = true;
  }
  CHECK_FALSE(is_intact(r));
  // Each op gives what the per-leaf path gives for the leaves as they now are.
  require_same_as(r * 3, scaled_per_leaf(r, 3.0));
  if (named) return;  // reduce refuses named leaves, on every path
  at::Tensor per_leaf_sum = at::zeros({});
  for (const NestedKey& k : r.keys(true, true)) per_leaf_sum = per_leaf_sum + r.get(k).detach().sum();
  CHECK(r.sum(reduce).detach().item<float>() == Approx(per_leaf_sum.item<float>()).epsilon(1e-4).margin(1e-3));
}

TEST_CASE("a write to any level of a read result takes it off the one-kernel path", "[unit][intact_result]") {
  TensorDict plain = intact_fixture();
  TensorDict r = consolidate(plain) * 2;
  r.unlock_();
  read_all_leaves(r);
  SECTION("a leaf set to itself") { r.set("l1", r.get("l1")); }
  SECTION("a nested leaf set to itself") { r.get_tensordict("n").set("l0", r.get({"n", "l0"})); }
  SECTION("update from itself") { r.update(r.clone(/*recurse=*/false)); }
  SECTION("a key renamed") { r.rename_key_("l2", "two"); }
  CHECK_FALSE(is_intact(r));
  require_same_as(r.exp(), r.apply([](const at::Tensor& t) { return t.exp(); }));
}

namespace {
// `ordered` leaves of one shape at the root, and a nested "n" of batch size `nested_batch` whose
// leaves are [10, 4, 5]: results of trees differing only in key order or nested batch size have
// the same leaf records.
TensorDict same_shaped_leaves(const std::vector<std::string>& ordered, std::vector<int64_t> nested_batch) {
  TensorDict td({}, {10});
  for (const std::string& k : ordered) td.set(k, at::randn({10, 20}));
  TensorDict n({}, nested_batch);
  n.set("m", at::randn({10, 4, 5}));
  td.set("n", n);
  return td;
}

// The op between two intact results gives what it gives between the plain trees (an error too).
void require_binary_like_per_leaf(const TensorDict& plain_a, const TensorDict& plain_b) {
  TensorDict a = consolidate(plain_a) * 1, b = consolidate(plain_b) * 1;
  if (GENERATE(false, true)) {
    read_all_leaves(a);
    read_all_leaves(b);
  }
  REQUIRE(is_intact(a));
  REQUIRE(is_intact(b));
  std::optional<TensorDict> expected;
  try {
    expected = plain_a + plain_b;
  } catch (const std::exception&) {
  }
  if (!expected) {
    CHECK_THROWS(a + b);
    return;
  }
  const TensorDict sum = a + b;
  require_same_as(sum, *expected);
  CHECK(sum.get_tensordict("n").batch_size() == expected->get_tensordict("n").batch_size());
}
}  // namespace

TEST_CASE("a binary op between results laid out differently runs per leaf", "[unit][intact_result]") {
  at::manual_seed(3);
  // Leaf records alike in every case: only the keys, their order or a nested batch size differ.
  SECTION("the same keys in another order") {
    require_binary_like_per_leaf(same_shaped_leaves({"a", "b", "c"}, {10, 4}),
                                 same_shaped_leaves({"b", "c", "a"}, {10, 4}));
  }
  SECTION("another key") {
    require_binary_like_per_leaf(same_shaped_leaves({"a", "b", "c"}, {10, 4}),
                                 same_shaped_leaves({"a", "b", "z"}, {10, 4}));
  }
  SECTION("a nested level of another batch size") {
    require_binary_like_per_leaf(same_shaped_leaves({"a", "b", "c"}, {10, 4}),
                                 same_shaped_leaves({"a", "b", "c"}, {10}));
  }
}

namespace {
// A forward-mode AD dual level, open for the guard's life.
struct DualLevel {
  const uint64_t index = torch::autograd::ForwardADLevel::get_next_idx();
  ~DualLevel() { torch::autograd::ForwardADLevel::release_idx(index); }
};
}  // namespace

TEST_CASE("while a forward-mode dual level is open, ops carry the tangents of packed leaves",
          "[unit][intact_result]") {
  TensorDict plain = intact_fixture();
  TensorDict td = consolidate(plain) * 1;  // an intact result, its leaves one packed storage
  at::Tensor t3, t2, tl;
  {
    DualLevel dual;
    const at::Tensor leaf = td.get("l1");
    leaf._set_fw_grad(at::ones_like(leaf), dual.index, /*is_inplace_op=*/false);
    TensorDict scaled = td * 3, summed = td + td, lerped = td.clone();
    lerped.lerp_(td * 2, 0.5);
    t3 = scaled.get("l1")._fw_grad(dual.index);
    t2 = summed.get("l1")._fw_grad(dual.index);
    tl = lerped.get("l1")._fw_grad(dual.index);
    require_same_as(scaled, plain * 3);
  }
  CHECK((t3.defined() && at::equal(t3, at::full({10, 20}, 3.0))));
  CHECK((t2.defined() && at::equal(t2, at::full({10, 20}, 2.0))));
  CHECK((tl.defined() && at::allclose(tl, at::full({10, 20}, 1.5))));
  // Once the level is closed, the one-kernel paths are back.
  CHECK(is_intact(td * 3));
}

TEST_CASE("a nested level of a result runs over its own leaves only", "[unit][intact_result]") {
  TensorDict plain = intact_fixture();
  TensorDict r = consolidate(plain) * 2;
  TensorDict n = r.get_tensordict("n");
  CHECK_FALSE(is_intact(n));  // its leaves cover part of the result's storage
  CHECK(n.sum(reduce).item<float>() ==
        Approx((plain.get_tensordict("n") * 2).sum(reduce).item<float>()).epsilon(1e-4).margin(1e-3));
  require_same_as(n.exp(), (plain.get_tensordict("n") * 2).exp());
  n.mul_(0.5);  // through n's leaves, which view the result's storage
  CHECK(at::allclose(r.get({"n", "l3"}), plain.get({"n", "l3"})));
  CHECK(at::allclose(r.get("l1"), plain.get("l1") * 2));
}

TEST_CASE("in-place ops over a packed storage bump the versions autograd checks", "[unit][intact_result]") {
  // As leaf.mul_(2) would: a leaf saved for backward, then changed, must fail the backward.
  TensorDict plain = intact_fixture();
  const at::Tensor w = at::ones({20}).requires_grad_();
  {
    TensorDict untouched = consolidate(plain) * 2;
    CHECK_NOTHROW((untouched.get("l1") * w).sum().backward());  // the backward itself works
  }
  SECTION("an intact result whose leaves were read (views of their own)") {
    TensorDict r = consolidate(plain) * 2;
    r.unlock_();
    at::Tensor y = (r.get("l1") * w).sum();
    REQUIRE(is_intact(r));
    SECTION("scalar") { r.mul_(2); }
    SECTION("unary") { r.abs_(); }
    SECTION("zero_") { r.zero_(); }
    SECTION("binary with an intact result of one layout") { r.add_(consolidate(plain) * 3); }
    CHECK(is_intact(r));  // the one-kernel path ran
    CHECK_THROWS_AS(y.backward(), c10::Error);
  }
  SECTION("a consolidated tensordict (views of the storage)") {
    TensorDict packed = consolidate(plain);
    at::Tensor y = (packed.get("l1") * w).sum();
    REQUIRE(is_intact(packed));
    packed.abs_();
    CHECK_THROWS_AS(y.backward(), c10::Error);
  }
  SECTION("a packed storage that is no intact result") {
    TensorDict packed = consolidate(plain);
    packed.unlock_();
    packed.set("l1", packed.get("l1"));  // written: its leaves still tile the storage
    REQUIRE_FALSE(is_intact(packed));
    at::Tensor y = (packed.get("l1") * w).sum();
    SECTION("scalar") { packed.mul_(2); }
    SECTION("unary") { packed.abs_(); }
    SECTION("zero_") { packed.zero_(); }
    SECTION("binary") {
      TensorDict other = consolidate(plain);
      packed.add_(other);
    }
    CHECK_THROWS_AS(y.backward(), c10::Error);
  }
}

TEST_CASE("ops over a result while other threads make its leaves agree", "[unit][intact_result]") {
  TensorDict plain = intact_fixture();
  const float expected = (plain * 2).sum(reduce).item<float>();
  for (int round = 0; round < 20; ++round) {
    TensorDict r = consolidate(plain) * 2;
    std::vector<int> wrong(3, 0);
    std::vector<std::thread> threads;
    // No Catch assertion off the main thread (Catch is not thread-safe): counts, checked after.
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        for (const NestedKey& k : r.keys(true, true)) {
          if (!r.get(k).defined()) ++wrong[t];
        }
      });
    }
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        if (std::abs((r * 1).sum(reduce).item<float>() - expected) > 1e-3f * std::abs(expected) + 1e-3f) ++wrong[2];
      }
    });
    for (std::thread& t : threads) t.join();
    CHECK(wrong[0] == 0);
    CHECK(wrong[1] == 0);
    CHECK(wrong[2] == 0);
    CHECK(is_intact(r));
  }
}

TEST_CASE("results of a locked operand are built locked, as lock_() leaves them", "[unit][intact_result]") {
  TensorDict plain = intact_fixture();
  TensorDict packed = consolidate(plain);  // locked
  TensorDict written = consolidate(plain);
  written.unlock_();
  written.set("l1", written.get("l1"));  // no intact result: the packed path
  written.lock_();
  REQUIRE_FALSE(is_intact(written));
  for (const TensorDict& operand : {packed, written}) {
    for (const TensorDict& r : {operand * 2, operand.exp(), operand + operand, operand.to(at::kDouble)}) {
      CHECK(r.is_locked());
      TensorDict n = r.get_tensordict("n");
      CHECK(n.is_locked());
      CHECK_THROWS_AS(n.unlock_(), LockedError);  // its locked parent is registered
      TensorDict copy = r;
      copy.unlock_();
      CHECK_FALSE(n.is_locked());
    }
    // Results that do not keep the lock stay unlocked.
    CHECK_FALSE(operand.clone().is_locked());
    CHECK_FALSE(operand.clone().get_tensordict("n").is_locked());
  }
}

TEST_CASE("an op whose result would alias the operand's storage returns the leaves themselves",
          "[unit][intact_result]") {
  // to() of the same dtype: per leaf it returns each leaf itself, so in-place changes through
  // either tree are seen (and versioned) in both; new views over the same storage would not be.
  TensorDict plain = intact_fixture();
  TensorDict r = consolidate(plain) * 2;
  r.unlock_();
  const at::Tensor x = r.get("l1");
  const at::Tensor w = at::ones({20}).requires_grad_();
  at::Tensor y = (x * w).sum();
  TensorDict same = r.to(at::kFloat);
  CHECK(same.get("l1").unsafeGetTensorImpl() == x.unsafeGetTensorImpl());
  same.mul_(2);
  CHECK(at::allclose(x, plain.get("l1") * 4));
  CHECK_THROWS_AS(y.backward(), c10::Error);
  TensorDict fresh = consolidate(plain);
  CHECK(fresh.to(at::kFloat).get("l2").unsafeGetTensorImpl() == fresh.get("l2").unsafeGetTensorImpl());
}

TEST_CASE("an in-place op on an inference storage outside inference mode writes no leaf twice",
          "[unit][intact_result]") {
  // PyTorch raises that error after writing: the one-kernel paths must not run first and then
  // let the per-leaf path write again.
  TensorDict plain = intact_fixture();
  TensorDict packed;
  {
    c10::InferenceMode guard;
    packed = consolidate(plain);
  }
  REQUIRE(packed.get("l1").is_inference());
  CHECK_THROWS(packed.mul_(2));
  int doubled = 0, other = 0;
  for (const NestedKey& k : plain.keys(true, true)) {
    const at::Tensor now = packed.get(k), before = plain.get(k);
    if (at::equal(now, before * 2)) ++doubled;
    else if (!at::equal(now, before)) ++other;
  }
  CHECK(doubled <= 1);  // the per-leaf path stops at its first leaf
  CHECK(other == 0);
}

TEST_CASE("a made leaf of any dim whose one size or stride changed takes its tree off the one-kernel path",
          "[unit][intact_result]") {
  // Leaves of 1 to 6 dims (6: sizes and strides stored out of line): for each dim of each, one
  // size, then one stride, changed alone over the same bytes.
  const std::vector<std::vector<int64_t>> shapes = {{10}, {10, 3}, {10, 3, 2}, {10, 3, 2, 2}, {10, 2, 2, 2, 2},
                                                    {10, 2, 2, 2, 2, 2}};
  for (size_t leaf_index = 0; leaf_index < shapes.size(); ++leaf_index) {
    const std::vector<int64_t>& shape = shapes[leaf_index];
    for (size_t d = 0; d < shape.size(); ++d) {
      for (const bool stride : {false, true}) {
        INFO("leaf of " << shape.size() << " dims, dim " << d << (stride ? ", stride" : ", size"));
        TensorDict plain({}, {10});
        for (size_t i = 0; i < shapes.size(); ++i) plain.set("l" + std::to_string(i), at::randn(shapes[i]));
        TensorDict packed = consolidate(plain);
        read_all_leaves(packed);
        REQUIRE(is_intact(packed));
        at::Tensor leaf = packed.get("l" + std::to_string(leaf_index));
        std::vector<int64_t> sizes = leaf.sizes().vec(), strides = leaf.strides().vec();
        if (stride) strides[d] = 0;  // every size is above 1: a real change, within the leaf's bytes
        else sizes[d] -= 1;
        leaf.as_strided_(sizes, strides);
        CHECK_FALSE(is_intact(packed));
        if (d == 0 && !stride) continue;  // no longer of the batch size: no op takes it
        require_same_as(packed * 3, scaled_per_leaf(packed, 3.0));
      }
    }
  }
}

TEST_CASE("ops over a packed storage leave autograd as it was, and track what needs grad",
          "[unit][intact_result]") {
  TensorDict plain = intact_fixture();
  TensorDict packed = consolidate(plain);
  packed.unlock_();
  read_all_leaves(packed);
  REQUIRE(is_intact(packed));
  const auto autograd_runs = [] {
    const at::Tensor w = at::ones({3}).requires_grad_();
    const at::Tensor y = (w * 2).sum();
    REQUIRE(y.requires_grad());
    y.backward();
    CHECK(at::equal(w.grad(), at::full({3}, 2.0)));
  };
  SECTION("after each kind of op") {
    packed.abs_();
    autograd_runs();
    const TensorDict twice = packed * 2;
    autograd_runs();
    CHECK_FALSE(twice.get("l1").requires_grad());
    CHECK(packed.sum(reduce).item<float>() == Approx(plain.abs().sum(reduce).item<float>()).epsilon(1e-4));
    autograd_runs();
  }
  SECTION("in inference mode, an in-place op still bumps a normal tensor's version") {
    const at::Tensor leaf = packed.get("l1");
    const auto version = leaf._version();
    {
      c10::InferenceMode guard;
      packed.abs_();
    }
    CHECK(is_intact(packed));  // the one-kernel path ran
    CHECK(leaf._version() > version);
    autograd_runs();
  }
  SECTION("after a kernel that raised") {
    TensorDict ints = consolidate(plain.to(at::kLong));
    ints.unlock_();
    read_all_leaves(ints);
    REQUIRE(is_intact(ints));
    CHECK_THROWS(ints.sqrt_());  // a float result into integer leaves: raised, then named per leaf
    autograd_runs();
  }
  SECTION("a leaf given requires_grad takes its tree off the path in grad mode, not under no_grad") {
    at::Tensor leaf = packed.get("l1");
    leaf.requires_grad_();
    CHECK_FALSE(is_intact(packed));
    const TensorDict tracked = packed * 2;  // per leaf: the graph is recorded
    CHECK(tracked.get("l1").requires_grad());
    CHECK_FALSE(tracked.get("l2").requires_grad());
    {
      at::NoGradGuard no_grad;
      CHECK(is_intact(packed));
      const TensorDict untracked = packed * 2;
      CHECK_FALSE(untracked.get("l1").requires_grad());
      require_same_as(untracked, plain * 2);
      packed.mul_(2);  // the one kernel; the leaf sees it
      CHECK(is_intact(packed));
    }
    CHECK(at::equal(leaf.detach(), plain.get("l1") * 2));
  }
}
