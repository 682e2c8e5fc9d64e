// Note [Shared shapes]: an elementwise op over an intact result gives one deferred level holding
// the operand's shape and the new storage, built on first access. These cases check that what
// is built is what the per-leaf op gives (keys, kinds, non-tensors, batch sizes, names, locks),
// that chains share one shape, that what a nested level's handle changes without a write (batch
// size, names) reaches the next result, that writes drop the shape, that filter_empty results
// drop empty levels, that concurrent first readers build the level once, and that concurrent
// ops replace a stale kept shape safely.
#include "support/catch_torch.h"
#include "support/dim_names_string.h"
#include "support/packed_fixtures.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <tensordict/backends/consolidated.h>
#include <tensordict/json.h>
#include <tensordict/ops.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/tensor_dict_impl.h"

using namespace tensordict;

namespace {
// Leaves at the root, in "n" (batch [10, 4]) and in "n"/"deep"; a non-tensor; dim names.
TensorDict shaped_tree(bool with_note = true) {
  at::manual_seed(5);
  TensorDict td({}, {10});
  td.set("a", at::randn({10, 3}));
  td.set("b", at::randn({10}));
  if (with_note) td.set_non_tensor("note", json::Value("kept"));
  TensorDict n({}, {10, 4});
  n.set("m", at::randn({10, 4, 5}));
  TensorDict deep({}, {10, 4});
  deep.set("z", at::randn({10, 4}));
  n.set("deep", deep);
  td.set("n", n);
  td.set_names({std::string("env")});
  return td;
}

const TensorDictImpl& level_of(const TensorDict& td) { return dynamic_cast<const TensorDictImpl&>(*td.impl()); }

// The same keys, leaves, non-tensors, batch sizes and names at every level.
void require_same_tree(const TensorDict& got, const TensorDict& want) {
  testing_support::require_same_leaves(got, want);
  CHECK(got.batch_size() == want.batch_size());
  CHECK(got.names() == want.names());
  CHECK(got.get_non_tensor("note") == want.get_non_tensor("note"));
  for (const NestedKey& k : {NestedKey("n"), NestedKey({"n", "deep"})}) {
    INFO(k.repr());
    CHECK(got.get_tensordict(k).batch_size() == want.get_tensordict(k).batch_size());
    CHECK(got.get_tensordict(k).names() == want.get_tensordict(k).names());
  }
}
}  // namespace

TEST_CASE("a result over an intact operand is built on first access as the per-leaf op builds it",
          "[unit][shared_shape]") {
  TensorDict plain = shaped_tree();
  TensorDict c = consolidate(plain);
  TensorDict r = c * 2;
  REQUIRE(level_of(r).is_deferred());
  CHECK(r.num_keys() == plain.num_keys());  // without building
  CHECK(level_of(r).is_deferred());
  // A chain shares one shape: each result is one level, whatever the tree.
  TensorDict r2 = r.exp(), r3 = r2 - 1;
  REQUIRE(level_of(r3).is_deferred());
  CHECK(level_of(r2).shape() == level_of(r).shape());
  CHECK(level_of(r3).shape() == level_of(r).shape());
  require_same_tree(r3, (plain * 2).exp() - 1);
  CHECK_FALSE(level_of(r3).is_deferred());
  // Nested levels come deferred, built when reached.
  TensorDict r4 = c.clone();
  const TensorDict n = r4.get_tensordict("n");
  CHECK(level_of(n).is_deferred());
  CHECK(at::equal(r4.get({"n", "deep", "z"}), plain.get({"n", "deep", "z"})));
  CHECK_FALSE(level_of(r4.get_tensordict({"n", "deep"})).is_deferred());
  // Binary ops between a result and the consolidated operand it came from.
  require_same_tree(c + r, plain + plain * 2);
}

TEST_CASE("results of a locked operand are built locked at every level they reach",
          "[unit][shared_shape]") {
  TensorDict c = consolidate(shaped_tree());  // locked
  TensorDict r = c * 2;
  REQUIRE(level_of(r).is_deferred());
  CHECK(r.is_locked());
  TensorDict deep = r.get_tensordict({"n", "deep"});
  CHECK(deep.is_locked());
  CHECK_THROWS_AS(deep.unlock_(), LockedError);  // its locked parent is registered
  CHECK_THROWS_AS(r.set("x", at::zeros({10})), LockedError);
  // Unlocked before its nested levels are built: they come unlocked.
  TensorDict u = c * 3;
  u.unlock_();
  CHECK_FALSE(u.get_tensordict("n").is_locked());
  u.get_tensordict("n").set("x", at::zeros({10, 4}));
  CHECK(u.get_tensordict("n").contains("x"));
  // lock_() on an unlocked one registers each nested level's lock parent once, as on any tree.
  TensorDict unlocked = c.clone(), plain = shaped_tree() * 1;
  REQUIRE(level_of(unlocked).is_deferred());
  unlocked.lock_();
  plain.lock_();
  CHECK(unlocked.impl_ptr().weak_use_count() == plain.impl_ptr().weak_use_count());
  CHECK(unlocked.get_tensordict("n").impl_ptr().weak_use_count() ==
        plain.get_tensordict("n").impl_ptr().weak_use_count());
}

TEST_CASE("what a nested level's handle changes without a write reaches the next result",
          "[unit][shared_shape]") {
  TensorDict plain = shaped_tree();
  TensorDict c = consolidate(plain);
  c.unlock_();
  TensorDict first = c * 2;  // keeps a shape of c for the next ops
  const DimNames renamed{std::string("env"), std::string("agent")};
  SECTION("names of a nested level of the operand") {
    const LevelShape* stale = in_memory::packed_level(*c.impl())->shape();
    REQUIRE(stale != nullptr);
    c.get_tensordict("n").set_names(renamed);
    TensorDict r = c * 2;
    CHECK(r.get_tensordict("n").names() == renamed);
    CHECK((c * 2).get_tensordict({"n", "deep"}).names() == c.get_tensordict({"n", "deep"}).names());
    // The operand now keeps the shape made for r in place of the stale one, so the next ops
    // take it as it is rather than each making (and interning) one.
    const LevelShape* kept = in_memory::packed_level(*c.impl())->shape();
    CHECK(kept != stale);
    CHECK(level_of(r).shape() == kept);
    CHECK(level_of(c * 2).shape() == kept);
  }
  SECTION("names changed back and forth, more often than stale shapes are kept") {
    const DimNames original = c.get_tensordict("n").names();
    for (int round = 0; round < 12; ++round) {
      INFO("round " << round);
      const DimNames& now = round % 2 == 0 ? renamed : original;
      c.get_tensordict("n").set_names(now);
      TensorDict r = c * 2;
      CHECK(r.get_tensordict("n").names() == now);
      CHECK(at::equal(r.get({"n", "m"}), plain.get({"n", "m"}) * 2));
    }
  }
  SECTION("the batch size of a nested level of a read result") {
    TensorDict r = c * 2;
    r.get_tensordict("n").set_batch_size({10});
    CHECK((r * 2).get_tensordict("n").batch_size() == c10::IntArrayRef{10});
    CHECK((r + r).get_tensordict("n").batch_size() == c10::IntArrayRef{10});
    // And a partner whose nested batch size now differs takes the per-leaf path: no error, the
    // per-leaf result.
    CHECK_NOTHROW(c * 2 + r);
  }
  SECTION("the root's names, on a result not built yet") {
    TensorDict r = c * 2;
    r.set_names({std::string("time")});
    CHECK((r * 2).names() == DimNames{std::string("time")});
  }
  CHECK(at::equal(first.get({"n", "m"}), plain.get({"n", "m"}) * 2));
}

TEST_CASE("a write drops the shape a level kept", "[unit][shared_shape]") {
  TensorDict plain = shaped_tree();
  TensorDict c = consolidate(plain);
  c.unlock_();
  (void)(c * 2);  // c's table keeps its shape
  REQUIRE(level_of(c * 2).is_deferred());
  SECTION("a key added at the root") {
    c.set("new", at::ones({10}));
    TensorDict r = c * 2;
    CHECK(r.contains("new"));
    CHECK(at::equal(r.get("new"), at::full({10}, 2.0)));
  }
  SECTION("a key erased in a nested level") {
    c.get_tensordict({"n", "deep"}).erase("z");
    CHECK_FALSE((c * 2).contains({"n", "deep", "z"}));
  }
  SECTION("a key renamed in a result") {
    TensorDict r = c * 2;
    r.rename_key_("a", "renamed");
    TensorDict r2 = r * 2;
    CHECK(r2.contains("renamed"));
    CHECK_FALSE(r2.contains("a"));
  }
}

TEST_CASE("binary results drop nested levels without entries, as the per-leaf op does",
          "[unit][shared_shape]") {
  TensorDict plain = shaped_tree();
  plain.set("empty", TensorDict({}, {10}));
  TensorDict c = consolidate(plain);
  const TensorDict sum = c + c, scaled = c * 2, exp = c.exp();
  CHECK(sum.contains("empty") == (plain + plain).contains("empty"));
  CHECK(scaled.contains("empty") == (plain * 2).contains("empty"));
  CHECK(exp.contains("empty") == plain.exp().contains("empty"));
  testing_support::require_same_leaves(sum, plain + plain);
  testing_support::require_same_leaves(exp, plain.exp());
  // From a deferred operand too (its shape has the empty level; the result is built eagerly).
  const TensorDict deferred = c.clone();
  REQUIRE(level_of(deferred).is_deferred());
  const TensorDict doubled = deferred * 2;
  CHECK(doubled.contains("empty") == (plain * 2).contains("empty"));
  testing_support::require_same_leaves(doubled, plain * 2);
  testing_support::require_same_leaves(deferred.clone().exp() + 1, plain.exp() + 1);
}

TEST_CASE("a deferred result written to lets its storage go", "[unit][shared_shape]") {
  TensorDict r = consolidate(shaped_tree()) * 2;
  const at::Tensor flat = in_memory::intact_packed_storage(*r.impl());
  REQUIRE(flat.defined());
  r.unlock_();
  r.clear();
  CHECK(flat.use_count() == 1);
}

TEST_CASE("concurrent first readers of a deferred result build it once", "[unit][shared_shape]") {
  TensorDict plain = shaped_tree();
  TensorDict c = consolidate(plain);
  for (int round = 0; round < 20; ++round) {
    TensorDict r = c * 2;
    REQUIRE(level_of(r).is_deferred());
    std::vector<const c10::TensorImpl*> seen(4, nullptr);
    std::atomic<int> bad{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t) {
      readers.emplace_back([&, t] {
        // Mixed first accesses: keys, a nested leaf, a kind, a walk.
        if (r.keys(true, true).size() != plain.keys(true, true).size()) ++bad;
        const at::Tensor z = r.get({"n", "deep", "z"});
        seen[t] = z.unsafeGetTensorImpl();
        if (r.impl()->kind("a") != EntryKind::Tensor) ++bad;
      });
    }
    for (auto& th : readers) th.join();
    CHECK(bad.load() == 0);
    for (int t = 1; t < 4; ++t) CHECK(seen[t] == seen[0]);  // one leaf, made once
    CHECK(at::equal(r.get({"n", "deep", "z"}), plain.get({"n", "deep", "z"}) * 2));
  }
}

TEST_CASE("concurrent ops over an operand whose kept shape went stale replace it once, safely",
          "[unit][shared_shape]") {
  TensorDict plain = shaped_tree();
  const std::vector<DimNames> names{{std::string("env"), std::string("agent")},
                                    {std::string("env"), std::string("other")}};
  for (int round = 0; round < 20; ++round) {
    TensorDict c = consolidate(plain);
    c.unlock_();
    (void)(c * 2);  // c keeps a shape
    const DimNames& now = names[round % 2];
    c.get_tensordict("n").set_names(now);  // which no longer fits
    std::atomic<int> bad{0};
    std::vector<std::thread> ops;
    for (int t = 0; t < 4; ++t) {
      ops.emplace_back([&] {
        // Each finds the kept shape stale, makes one, and keeps it unless another did first,
        // while the others may be reading the one it replaces.
        for (int i = 0; i < 5; ++i) {
          TensorDict r = c * 2;
          if (r.get_tensordict("n").names() != now) ++bad;
          if (!at::equal(r.get({"n", "m"}), plain.get({"n", "m"}) * 2)) ++bad;
        }
      });
    }
    for (auto& th : ops) th.join();
    CHECK(bad.load() == 0);
    CHECK(level_of(c * 2).shape() == in_memory::packed_level(*c.impl())->shape());
  }
}

TEST_CASE("trees laid out alike share one shape, and any difference keeps them apart", "[unit][shared_shape]") {
  TensorDict c1 = consolidate(shaped_tree(false)), c2 = consolidate(shaped_tree(false));
  const LevelShape* shared = level_of(c1 * 2).shape();
  CHECK(level_of(c2 * 2).shape() == shared);  // two consolidations, one shape
  testing_support::require_same_leaves(c1 + c2, shaped_tree(false) * 2);
  SECTION("a nested level named otherwise") {
    TensorDict plain = shaped_tree(false);
    plain.get_tensordict("n").set_names({std::string("env"), std::string("agent")});
    TensorDict c3 = consolidate(plain);
    CHECK(level_of(c3 * 2).shape() != shared);
    CHECK((c3 + c1).get_tensordict("n").names() == plain.get_tensordict("n").names());
  }
  SECTION("another key order") {
    TensorDict plain({}, {10});
    plain.set("b", c1.get("b").clone());
    plain.set("a", c1.get("a").clone());
    plain.set("n", c1.get_tensordict("n").clone());
    plain.set_names({std::string("env")});
    TensorDict c3 = consolidate(plain);
    CHECK(level_of(c3 * 2).shape() != shared);
    testing_support::require_same_leaves(c3 + c1, plain + plain);
  }
  SECTION("a non-tensor: the shape is not shared") {
    TensorDict c3 = consolidate(shaped_tree(true)), c4 = consolidate(shaped_tree(true));
    CHECK(level_of(c3 * 2).shape() != level_of(c4 * 2).shape());
    CHECK((c3 + c4).get_non_tensor("note") == c3.get_non_tensor("note"));
  }
}
