// Note [Direct writes]: set and erase of a leaf on an in-memory tree go straight to the slots
// when nothing on the way asks for more. These cases check that the direct path is taken where
// it should be, that it keeps the order, values and index a general write keeps (a random run of
// writes against a model, over small and indexed levels), and that it steps aside, changing
// nothing, wherever the general path has more to do: missing levels to create, locks, errors,
// unmade or intact packed leaves, another backend on the way.
#include "support/catch_torch.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/errors.h>
#include <tensordict/ops.h>

#include "backends/in_memory/in_memory.h"
#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/tensor_dict_impl.h"

using namespace tensordict;

namespace {

bool direct_set(TensorDict& td, KeyRef key, at::Tensor value) {
  return in_memory::try_set_tensor(*td.impl(), key, value);
}
bool direct_erase(TensorDict& td, KeyRef key) { return in_memory::try_erase(*td.impl(), key); }

std::vector<NestedKey> leaf_keys(const TensorDict& td) { return td.keys(/*include_nested=*/true, /*leaves_only=*/true); }

TensorDict two_levels() {
  TensorDict td({}, {4});
  td.set("top", at::zeros({4}));
  td.set({"g", "a"}, at::ones({4, 2}));
  td.set({"g", "b"}, at::full({4, 2}, 2.0));
  return td;
}

}  // namespace

TEST_CASE("set and erase on an open in-memory tree take the direct path", "[unit][direct_write]") {
  TensorDict td = two_levels();
  const at::Tensor c = at::full({4, 3}, 3.0);
  REQUIRE(direct_set(td, {"g", "c"}, c));
  CHECK(td.get({"g", "c"}).is_same(c));  // stored as given: the same tensor, not a copy
  CHECK(leaf_keys(td) == std::vector<NestedKey>{"top", NestedKey({"g", "a"}), NestedKey({"g", "b"}),
                                                NestedKey({"g", "c"})});
  // Over an existing key: the value changes, the key keeps its place.
  const at::Tensor a2 = at::full({4, 5}, 7.0);
  REQUIRE(direct_set(td, {"g", "a"}, a2));
  CHECK(td.get({"g", "a"}).is_same(a2));
  CHECK(leaf_keys(td)[1] == NestedKey({"g", "a"}));
  // A root key too.
  REQUIRE(direct_set(td, "top", at::ones({4})));
  CHECK(td.get("top").sum().item<float>() == 4.0f);
  // Erase: the keys after it move up, in order.
  REQUIRE(direct_erase(td, {"g", "a"}));
  CHECK(leaf_keys(td) == std::vector<NestedKey>{"top", NestedKey({"g", "b"}), NestedKey({"g", "c"})});
  CHECK(td.get({"g", "b"}).equal(at::full({4, 2}, 2.0)));
  // A missing key is left to the general path, which raises.
  CHECK_FALSE(direct_erase(td, {"g", "a"}));
  CHECK_THROWS_AS(td.erase({"g", "a"}), KeyError);
  CHECK_FALSE(direct_erase(td, {"nope", "a"}));
  CHECK_THROWS_AS(td.erase({"nope", "a"}), KeyError);
}

TEST_CASE("direct writes keep order, values and the index over a random run", "[unit][direct_write]") {
  // 24 keys under "g" cross the 16 keys where the level gets its index and tombstones; 6 at the
  // root stay under it. Every write goes through the handle (the direct path when open) and
  // the model's listing and values must match after each.
  std::mt19937 rng(1234);
  TensorDict td({}, {2});
  td.set({"g", "seed"}, at::zeros({2}));  // so that "g" exists: every write below is direct
  std::map<std::string, std::vector<std::pair<std::string, float>>> model{{"", {}}, {"g", {{"seed", 0.0f}}}};
  auto find = [](std::vector<std::pair<std::string, float>>& v, const std::string& k) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it->first == k) return it;
    }
    return v.end();
  };
  int direct = 0;
  for (int step = 0; step < 3000; ++step) {
    const bool nested = rng() % 2 == 0;
    const std::string name = "k" + std::to_string(rng() % (nested ? 24 : 6));
    auto& level = model[nested ? "g" : ""];
    const NestedKey key = nested ? NestedKey({"g", name}) : NestedKey(name);
    const auto it = find(level, name);
    if (rng() % 3 != 0) {
      const float v = static_cast<float>(step);
      at::Tensor value = at::full({2}, v);
      direct += direct_set(td, key, value) ? 1 : 0;
      if (it == level.end()) {
        level.emplace_back(name, v);
      } else {
        it->second = v;
      }
      // The handle's set gives the same (the value again, over the key now there).
      td.set(key, at::full({2}, v));
    } else if (it != level.end()) {
      REQUIRE(direct_erase(td, key));
      ++direct;
      level.erase(it);
    } else {
      CHECK_FALSE(direct_erase(td, key));
      CHECK_THROWS_AS(td.erase(key), KeyError);
    }
    std::vector<NestedKey> expected{"g"};  // made first, never erased
    for (const auto& [k, v] : model[""]) expected.emplace_back(k);
    REQUIRE(td.keys() == expected);
    std::vector<NestedKey> nested_expected;
    for (const auto& [k, v] : model["g"]) {
      nested_expected.emplace_back(NestedKey({"g", k}));
      REQUIRE(td.get({"g", k})[0].item<float>() == v);
      REQUIRE(td.contains({"g", k}));
    }
    std::vector<NestedKey> nested_keys;
    for (const NestedKey& k : leaf_keys(td)) {
      if (k.size() == 2) nested_keys.push_back(k);
    }
    REQUIRE(nested_keys == nested_expected);
  }
  CHECK(direct > 1500);  // most writes took the direct path
}

TEST_CASE("a stale write hint never redirects a direct write", "[unit][direct_write]") {
  // Note [Write hints]: each level remembers the slot its last direct write used. Erases shift
  // slots, renames change keys, a nested level is replaced: the hint then points at another
  // key (or past the end), and each write must still reach its own key.
  TensorDict td({}, {2});
  for (const char* k : {"a", "b", "c"}) td.set(k, at::zeros({2}));
  REQUIRE(direct_set(td, "b", at::full({2}, 1.0)));  // the hint: slot 1, "b"
  REQUIRE(direct_erase(td, "a"));                     // "c" moves to slot 1
  REQUIRE(direct_set(td, "b", at::full({2}, 2.0)));
  CHECK(td.get("b")[0].item<float>() == 2.0f);
  CHECK(td.get("c")[0].item<float>() == 0.0f);
  CHECK(td.keys() == std::vector<NestedKey>{"b", "c"});
  // Renamed away from the hinted key: an erase of the old name finds nothing.
  REQUIRE(direct_set(td, "c", at::full({2}, 3.0)));  // the hint: slot 1, "c"
  td.rename_key_("c", "d");
  CHECK_FALSE(direct_erase(td, "c"));
  CHECK_THROWS_AS(td.erase("c"), KeyError);
  CHECK(td.get("d")[0].item<float>() == 3.0f);
  // A new key set where the hint points past the end, then erased through the hint.
  REQUIRE(direct_erase(td, "d"));
  REQUIRE(direct_set(td, "e", at::full({2}, 4.0)));
  REQUIRE(direct_erase(td, "e"));
  CHECK(td.keys() == std::vector<NestedKey>{"b"});
  // The nested level at the hinted prefix slot replaced by another: writes go to the new one.
  td.set({"g", "x"}, at::zeros({2}));
  REQUIRE(direct_set(td, {"g", "x"}, at::ones({2})));  // the root's hint: "g"
  TensorDict old_g = td.get_tensordict("g");
  TensorDict new_g({}, {2});
  new_g.set("y", at::zeros({2}));
  td.set("g", new_g);
  REQUIRE(direct_set(td, {"g", "x"}, at::full({2}, 5.0)));
  CHECK(new_g.get("x")[0].item<float>() == 5.0f);
  CHECK(old_g.get("x")[0].item<float>() == 1.0f);
  // An indexed level (over 16 keys) with tombstones: a hint at an erased slot is no match.
  TensorDict big({}, {2});
  for (int i = 0; i < 20; ++i) big.set("k" + std::to_string(i), at::full({2}, static_cast<float>(i)));
  REQUIRE(direct_set(big, "k5", at::full({2}, 50.0)));  // the hint: slot 5
  REQUIRE(direct_erase(big, "k5"));                     // a tombstone at slot 5
  CHECK_FALSE(direct_erase(big, "k5"));
  REQUIRE(direct_set(big, "k5", at::full({2}, 55.0)));  // appended, last
  CHECK(big.keys().back() == NestedKey("k5"));
  CHECK(big.get("k5")[0].item<float>() == 55.0f);
  CHECK(big.get("k6")[0].item<float>() == 6.0f);
  CHECK(big.num_keys() == 20);
}

TEST_CASE("direct writes step aside, changing nothing, where the general path has more to do",
          "[unit][direct_write]") {
  SECTION("a missing level: the general path creates it") {
    TensorDict td = two_levels();
    CHECK_FALSE(direct_set(td, {"h", "x"}, at::ones({4})));
    CHECK_FALSE(td.contains("h"));
    td.set({"h", "x"}, at::ones({4}));
    CHECK(td.get({"h", "x"}).equal(at::ones({4})));
  }
  SECTION("a leaf on the way: KeyError") {
    TensorDict td = two_levels();
    CHECK_FALSE(direct_set(td, {"top", "x"}, at::ones({4})));
    CHECK_THROWS_AS(td.set({"top", "x"}, at::ones({4})), KeyError);
    CHECK_FALSE(direct_erase(td, {"top", "x"}));
    CHECK_THROWS_AS(td.erase({"top", "x"}), ValueError);
  }
  SECTION("a value whose shape does not lead with the batch size: ShapeError") {
    TensorDict td = two_levels();
    CHECK_FALSE(direct_set(td, {"g", "x"}, at::ones({3})));
    CHECK_THROWS_AS(td.set({"g", "x"}, at::ones({3})), ShapeError);
    CHECK_FALSE(direct_set(td, {"g", "x"}, at::Tensor()));
    CHECK_THROWS_AS(td.set({"g", "x"}, at::Tensor()), ValueError);
    CHECK_FALSE(td.contains({"g", "x"}));
  }
  SECTION("a locked tree: LockedError, nothing written") {
    TensorDict td = two_levels();
    td.lock_();
    CHECK_FALSE(direct_set(td, {"g", "a"}, at::zeros({4, 2})));
    CHECK_FALSE(direct_erase(td, {"g", "a"}));
    CHECK_THROWS_AS(td.set({"g", "a"}, at::zeros({4, 2})), LockedError);
    CHECK_THROWS_AS(td.erase({"g", "a"}), LockedError);
    CHECK_THROWS_AS(td.erase("top"), LockedError);
    td.unlock_();
    CHECK(td.get({"g", "a"}).equal(at::ones({4, 2})));
    CHECK(direct_set(td, {"g", "a"}, at::zeros({4, 2})));  // open again once unlocked
  }
  SECTION("a nested level of another backend") {
    TensorDict td({}, {});
    TensorDict m0({{"x", at::zeros({3})}}, {3});
    TensorDict m1({{"x", at::ones({3})}}, {3});
    td.set("stack", EntryInit(TensorDict(lazy_stack({m0, m1}))));
    CHECK_FALSE(direct_set(td, {"stack", "y"}, at::ones({2, 3})));
    td.set({"stack", "y"}, at::ones({2, 3}));
    CHECK(m1.get("y").equal(at::ones({3})));  // the stack wrote through to its members
    CHECK_FALSE(direct_erase(td, {"stack", "y"}));
    td.erase({"stack", "y"});
    CHECK_FALSE(m0.contains("y"));
  }
  SECTION("a packed op's result: unmade leaves and intact storage") {
    TensorDict plain({}, {4});
    for (int i = 0; i < 4; ++i) plain.set({"g", "l" + std::to_string(i)}, at::randn({4, 8}));
    plain.set("r", at::randn({4, 8}));
    TensorDict r = consolidate(plain) * 2;
    r.unlock_();  // built locked as its operand: unlocked, the lock is not what stops the direct path
    const auto* root = dynamic_cast<const TensorDictImpl*>(r.impl());
    REQUIRE(root != nullptr);
    REQUIRE((root->is_deferred() || root->has_lazy_leaves()));
    REQUIRE(in_memory::intact_packed_storage(*r.impl()).defined());
    CHECK_FALSE(direct_set(r, "r", at::zeros({4, 8})));
    CHECK_FALSE(direct_erase(r, {"g", "l0"}));
    // Through the handle: the write lands, the other leaves read as the per-leaf op gives, and
    // the result is no longer intact (its storage no longer holds every leaf).
    r.set("r", at::zeros({4, 8}));
    r.erase({"g", "l0"});
    CHECK_FALSE(in_memory::intact_packed_storage(*r.impl()).defined());
    CHECK(r.get("r").equal(at::zeros({4, 8})));
    CHECK_FALSE(r.contains({"g", "l0"}));
    for (int i = 1; i < 4; ++i) {
      const std::string k = "l" + std::to_string(i);
      CHECK(r.get({"g", k}).equal(plain.get({"g", k}) * 2));
    }
    // Written, the levels are plain again: the next writes are direct.
    CHECK(direct_set(r, "r", at::ones({4, 8})));
    CHECK(direct_erase(r, {"g", "l1"}));
  }
  SECTION("a packed op's result whose leaves were read: its layout records must go") {
    TensorDict plain({}, {4});
    for (int i = 0; i < 3; ++i) plain.set("l" + std::to_string(i), at::randn({4, 8}));
    TensorDict r = consolidate(plain) * 2;
    r.unlock_();
    CHECK(r.get("l0").equal(plain.get("l0") * 2));  // makes the leaves
    REQUIRE_FALSE(dynamic_cast<const TensorDictImpl&>(*r.impl()).has_lazy_leaves());
    REQUIRE(in_memory::intact_packed_storage(*r.impl()).defined());
    CHECK_FALSE(direct_set(r, "l1", at::zeros({4, 8})));
    r.set("l1", at::zeros({4, 8}));
    CHECK_FALSE(in_memory::intact_packed_storage(*r.impl()).defined());
    CHECK((r * 1).get("l1").equal(at::zeros({4, 8})));  // the next op sees the write
  }
}

TEST_CASE("select_ rebuilds an in-memory level at once, in selection order", "[unit][direct_write]") {
  SECTION("a level of 40 keys, some erased first (tombstones, an index)") {
    TensorDict td({}, {2});
    for (int i = 0; i < 40; ++i) td.set("k" + std::to_string(i), at::full({2}, static_cast<double>(i)));
    for (int i = 0; i < 40; i += 3) td.erase("k" + std::to_string(i));
    td.select_({"k35", "k1", "k20", "k7"});
    CHECK(td.keys() == std::vector<NestedKey>{"k35", "k1", "k20", "k7"});
    CHECK(td.get("k20")[0].item<float>() == 20.0f);
    CHECK(td.get("k35")[1].item<float>() == 35.0f);
    // The rebuilt level takes writes and lookups as any other.
    for (int i = 100; i < 130; ++i) td.set("k" + std::to_string(i), at::zeros({2}));
    CHECK(td.num_keys() == 34);
    td.erase("k1");
    CHECK_FALSE(td.contains("k1"));
    CHECK(td.get("k7")[0].item<float>() == 7.0f);
    CHECK(td.keys().front() == NestedKey("k35"));
  }
  SECTION("nested keys select inside their level; a missing key is refused, or ignored when not strict") {
    TensorDict td = two_levels();
    td.set({"g", "c"}, at::zeros({4, 1}));
    CHECK_THROWS_AS(td.select_({NestedKey({"g", "c"}), NestedKey("nope")}), KeyError);  // strict
    CHECK(td.num_keys() == 2);  // refused before anything changed
    td.select_({NestedKey({"g", "c"}), NestedKey({"g", "a"}), NestedKey("nope")}, /*strict=*/false);
    CHECK(leaf_keys(td) == std::vector<NestedKey>{NestedKey({"g", "c"}), NestedKey({"g", "a"})});
    CHECK(td.get({"g", "a"}).equal(at::ones({4, 2})));
  }
  SECTION("a packed result: unmade leaves keep their values; keeping everything keeps it intact") {
    TensorDict plain({}, {4});
    for (int i = 0; i < 5; ++i) plain.set("l" + std::to_string(i), at::randn({4, 3}));
    TensorDict r = consolidate(plain) * 2;
    r.unlock_();
    // Not strict: a strict select_ first builds the selection out of place, which makes the leaves.
    r.select_({"l0", "l1", "l2", "l3", "l4"}, /*strict=*/false);
    CHECK(in_memory::intact_packed_storage(*r.impl()).defined());  // nothing to change
    const auto& root = dynamic_cast<const TensorDictImpl&>(*r.impl());
    REQUIRE((root.is_deferred() || root.has_lazy_leaves()));  // the leaves are not made yet
    r.select_({"l3", "l0"}, /*strict=*/false);
    CHECK_FALSE(in_memory::intact_packed_storage(*r.impl()).defined());
    CHECK(r.keys() == std::vector<NestedKey>{"l3", "l0"});
    CHECK(r.get("l3").equal(plain.get("l3") * 2));
    CHECK(r.get("l0").equal(plain.get("l0") * 2));
  }
}
