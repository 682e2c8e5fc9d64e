// Contract: key selection and transforms (1.5), the update family (1.4, 1.6), locking of the
// mutating ops (1.7), grad helpers and sizes, state dicts (1.16) on every backend; and
// torch::nn::Module interop, which makes in-memory tensordicts.
#include "support/catch_torch.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/TensorIndexing.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>

#include <tensordict/module.h>

#include "contract/backends.h"

using namespace tensordict;
using contract::ContractBackends;
using at::indexing::Slice;

namespace {
// A module tree: a linear layer, a batch norm (with buffers) and a child without parameters.
struct Net : torch::nn::Module {
  Net() {
    lin = register_module("lin", torch::nn::Linear(3, 2));
    bn = register_module("bn", torch::nn::BatchNorm1d(2));
    act = register_module("act", torch::nn::Sequential());
  }
  torch::nn::Linear lin{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
  torch::nn::Sequential act{nullptr};
};

// Leaves before the nested level, so that backends listing leaves first (memmap, as Python's
// load order) give the same order.
TensorDict state_abc() {
  return TensorDict({{"a", at::zeros({3})}, {"e", at::ones({3})}, {"b", {{"c", at::ones({3})}, {"d", at::ones({3, 2})}}}},
                    {3});
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("select keeps argument order, shares leaves, nested keys keep sub-entries (case 27)", "[ops][keys][errors]", ContractBackends) {
  TensorDict td = TestType::make(state_abc());
  TensorDict s = td.select({"e", "a"});
  CHECK(s.keys() == (std::vector<NestedKey>{"e", "a"}));
  if (TestType::kLeavesAliasStorage) CHECK(s.get("a").is_same(td.get("a")));
  TensorDict n = td.select({{"b", "d"}});
  CHECK(n.keys(true) == (std::vector<NestedKey>{"b", {"b", "d"}}));
  // Naming a level whole and a key under it narrows the level, as v0.14 does (finding A3);
  // a key under a leaf does not exist.
  CHECK(td.select({"b", {"b", "c"}}).keys(true, true) == (std::vector<NestedKey>{{"b", "c"}}));
  REQUIRE_THROWS_AS(td.select({"a", {"a", "missing"}}), KeyError);
  CHECK(td.select({"a", {"a", "missing"}}, /*strict=*/false).keys() == std::vector<NestedKey>{"a"});
  REQUIRE_THROWS_AS(td.select({"zz"}), KeyError);
  REQUIRE_THROWS_WITH(td.select({"zz"}), Catch::Contains("zz"));
  CHECK(td.select({"zz"}, /*strict=*/false).num_keys() == 0);
  CHECK(td.select({}).num_keys() == 0);
  // The nested key's full path in the error of a key under a leaf.
  REQUIRE_THROWS_WITH(td.select({{"b", "c", "x"}}), Catch::Contains("('b', 'c') holds a tensor, so the nested key ('b', 'c', 'x')"));
}

TEMPLATE_LIST_TEST_CASE("select and exclude past 16 distinct heads (grouped through an index) keep order and duplicates", "[ops][keys]", ContractBackends) {
  std::vector<TensorDict::Item> items;
  for (int i = 0; i < 20; ++i) items.emplace_back("k" + std::to_string(i), at::full({2}, static_cast<double>(i)));
  items.emplace_back("n", EntryInit({{"c", at::ones({2})}, {"d", at::zeros({2})}}));
  TensorDict td = TestType::make(TensorDict(items, {2}));
  std::vector<NestedKey> keys;
  for (int i = 19; i >= 0; --i) keys.emplace_back("k" + std::to_string(i));  // 20 heads, reversed
  keys.push_back({"n", "d"});
  keys.emplace_back("k3");  // named again: once in the result, at its first place
  const TensorDict s = td.select(keys);
  const std::vector<NestedKey> got = s.keys(true);
  CHECK(got.size() == 22u);
  CHECK(got.front() == NestedKey("k19"));
  CHECK(got[19] == NestedKey("k0"));
  CHECK(got[20] == NestedKey("n"));
  CHECK(got[21] == NestedKey({"n", "d"}));
  CHECK(at::equal(s.get("k7"), at::full({2}, 7.0)));
  const TensorDict e = td.exclude(keys);
  CHECK(e.keys(true) == (std::vector<NestedKey>{"n", {"n", "c"}}));
}

TEMPLATE_LIST_TEST_CASE("select_ and exclude_ work in place, nested levels included, and respect the lock", "[ops][keys][lock][errors]", ContractBackends) {
  TensorDict locked = TestType::make(state_abc());
  locked.lock_();
  REQUIRE_THROWS_AS(locked.select_({"a"}), LockedError);
  REQUIRE_THROWS_AS(locked.exclude_({"a"}), LockedError);
  REQUIRE_THROWS_WITH(locked.exclude_({"a"}), Catch::Contains("Cannot modify locked TensorDict"));
  CHECK(locked.keys() == TestType::make(state_abc()).keys());
  if (!TestType::kMutableKeys) return;

  TensorDict td = TestType::make(state_abc());
  TensorDict b = td.get_tensordict("b");
  at::Tensor a = td.get("a");
  TensorDict& same = td.select_({{"b", "d"}, "a"});
  CHECK(&same == &td);
  CHECK(td.keys() == (std::vector<NestedKey>{"b", "a"}));  // argument order
  if (TestType::kLeavesAliasStorage) CHECK(td.get("a").is_same(a));
  CHECK(b.keys() == std::vector<NestedKey>{"d"});  // the nested level itself was narrowed
  if (!TestType::kLazyStack) CHECK(td.get_tensordict("b").is_same(b));  // lazy: a new stack of the same members

  TensorDict missing = TestType::make(state_abc());
  REQUIRE_THROWS_AS(missing.select_({"a", "zz"}), KeyError);
  CHECK(missing.keys() == state_abc().keys());  // nothing changed before the error
  missing.select_({"a", "zz"}, /*strict=*/false);
  CHECK(missing.keys() == std::vector<NestedKey>{"a"});

  TensorDict ex = TestType::make(state_abc());
  TensorDict exb = ex.get_tensordict("b");
  CHECK(&ex.exclude_({{"b", "c"}, "zz"}) == &ex);
  CHECK(exb.keys() == std::vector<NestedKey>{"d"});
  CHECK(ex.keys() == state_abc().keys());
  ex.exclude_({"a", "b"});
  CHECK(ex.keys(true, true) == state_abc().exclude({"a", "b"}).keys(true, true));
}

TEMPLATE_LIST_TEST_CASE("exclude and split_keys", "[ops][keys]", ContractBackends) {
  TensorDict td = TestType::make(state_abc());
  TensorDict ex = td.exclude({"zz", {"b", "c"}, "e"});  // missing keys ignored
  // A nested key under a leaf is missing too: ignored, where v0.14 raises AttributeError from
  // inside its implementation (finding A15, a quirk fixed).
  CHECK(td.exclude({{"a", "missing"}}).keys() == td.keys());
  CHECK(ex.keys(true, true) == (std::vector<NestedKey>{"a", {"b", "d"}}));
  CHECK(td.contains({"b", "c"}));  // td itself unchanged
  std::vector<TensorDict> parts = td.split_keys({{"a"}, {{"b", "c"}}});
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].keys() == std::vector<NestedKey>{"a"});
  CHECK((parts[1].keys(true, true) == std::vector<NestedKey>{{"b", "c"}}));
  CHECK(parts[2].keys(true, true) == (std::vector<NestedKey>{"e", {"b", "d"}}));
  REQUIRE_THROWS_AS(td.split_keys({{"zz"}}), KeyError);
}

TEMPLATE_LIST_TEST_CASE("flatten_keys and unflatten_keys, with collisions (case 26)", "[ops][keys][errors]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"c", at::ones({2})}, {"a", {{"b", at::zeros({2})}}}}, {2}));
  TensorDict flat = td.flatten_keys();
  CHECK(flat.keys() == (std::vector<NestedKey>{"c", "a.b"}));
  if (TestType::kLeavesAliasStorage) CHECK(flat.get("a.b").is_same(td.get({"a", "b"})));
  CHECK(td.flatten_keys("/").keys() == (std::vector<NestedKey>{"c", "a/b"}));
  TensorDict back = flat.unflatten_keys();
  CHECK(back.keys(true, true) == (std::vector<NestedKey>{"c", {"a", "b"}}));
  // v0.14 order: plain keys keep their places, new groups come after them (finding A6).
  TensorDict mixed = TestType::make(TensorDict({{"a.b", at::zeros({2})}, {"c", at::ones({2})}}, {2}));
  CHECK(mixed.unflatten_keys().keys() == (std::vector<NestedKey>{"c", "a"}));
  // Empty nested levels are not leaves: flatten_keys drops them (finding A4); non-tensor data stays.
  TensorDict with_empty = TestType::make(TensorDict({{"x", at::ones({2})}, {"e", TensorDict({}, {2})}, {"s", "t"}}, {2}));
  CHECK(with_empty.flatten_keys().keys() == (std::vector<NestedKey>{"x", "s"}));
  CHECK((back.get_tensordict("a").batch_size() == c10::IntArrayRef{2}));

  TensorDict clash = TestType::make(TensorDict({{"a.b", at::zeros({2})}, {"a", {{"b", at::zeros({2})}}}}, {2}));
  REQUIRE_THROWS_AS(clash.flatten_keys(), KeyError);
  REQUIRE_THROWS_WITH(clash.flatten_keys(), Catch::Contains("to collide") && Catch::Contains("a.b"));
  REQUIRE_THROWS_AS(clash.unflatten_keys(), KeyError);
  REQUIRE_THROWS_WITH(clash.unflatten_keys(), Catch::Contains("Unflattening key(s) in tensordict will override"));
  TensorDict leaf_clash = TestType::make(TensorDict({{"a", at::zeros({2})}, {"a.b", at::zeros({2})}}, {2}));
  REQUIRE_THROWS_AS(leaf_clash.unflatten_keys(), KeyError);
}

TEMPLATE_LIST_TEST_CASE("flatten_keys joins empty keys, long keys and multi-character separators", "[ops][keys]", ContractBackends) {
  const std::string long_key(120, 'k');  // longer than the on-stack join buffer
  const TensorDict reference({{"top", at::ones({2})},
                              {"", {{"a", at::zeros({2})}}},
                              {long_key, {{long_key, at::ones({2})}, {"", {{"z", at::ones({2})}}}}}},
                             {2});
  if (TestType::kAnyKeyName) {
    TensorDict td = TestType::make(reference);
    TensorDict flat = td.flatten_keys("::");
    CHECK(flat.keys() == (std::vector<NestedKey>{"top", "::a", long_key + "::" + long_key, long_key + "::::z"}));
    if (TestType::kLeavesAliasStorage) CHECK(flat.get(long_key + "::" + long_key).is_same(td.get({long_key, long_key})));
    CHECK(flat.unflatten_keys("::").keys(true, true) == td.keys(true, true));
    // A key holding a multi-character separator is seen: the joined keys collide.
    TensorDict clash = TestType::make(TensorDict({{"a::b", at::zeros({2})}, {"a", {{"b", at::zeros({2})}}}}, {2}));
    REQUIRE_THROWS_WITH(clash.flatten_keys("::"), Catch::Contains("to collide") && Catch::Contains("a::b"));
    CHECK(clash.flatten_keys(":::").keys() == (std::vector<NestedKey>{"a::b", "a:::b"}));
  } else {
    // An empty key names no file object: refused up front, naming the key.
    REQUIRE_THROWS_AS(TestType::make(reference), ValueError);
    REQUIRE_THROWS_WITH(TestType::make(reference), Catch::Contains("the key ''"));
  }
  // 40 flattened keys: past the linear-scan limit, so collisions are found through the index.
  std::vector<TensorDict::Item> groups;
  for (int g = 0; g < 4; ++g) {
    std::vector<TensorDict::Item> leaves;
    for (int x = 0; x < 10; ++x) leaves.emplace_back("x" + std::to_string(x), at::zeros({2}));
    groups.emplace_back("g" + std::to_string(g), EntryInit(leaves));
  }
  groups.emplace_back("g3.x9", at::zeros({2}));
  TensorDict many = TestType::make(TensorDict(groups, {2}));
  REQUIRE_THROWS_WITH(many.flatten_keys(), Catch::Contains("to collide") && Catch::Contains("g3.x9"));
  CHECK(many.exclude({"g3.x9"}).flatten_keys().num_keys() == 40u);
}

TEMPLATE_LIST_TEST_CASE("update merges recursively, clones on request, refuses other batch sizes (case 28)", "[ops][update][errors]", ContractBackends) {
  if (!TestType::kMutableKeys) {
    REQUIRE_THROWS_AS(TestType::make(state_abc()).update(TensorDict({{"x", at::ones({3})}}, {3})), LockedError);
    return;
  }
  REQUIRE_THROWS_AS(TestType::make(TensorDict({}, {3})).update(TensorDict({{"x", at::ones({4})}}, {4})), ShapeError);
  REQUIRE_THROWS_WITH(TestType::make(TensorDict({}, {3})).update(TensorDict({{"x", at::ones({4})}}, {4})),
                      Catch::Contains("update_batch_size"));
  TensorDict td = TestType::make(state_abc());
  TensorDict src({{"b", {{"c", at::full({3}, 5.0)}, {"new", at::ones({3})}}}, {"f", at::ones({3})}}, {3});
  TensorDict b = td.get_tensordict("b");
  td.update(src);
  if (!TestType::kLazyStack) CHECK(td.get_tensordict("b").is_same(b));  // lazy: a new stack of the same members  // nested tensordict updated, not replaced
  CHECK(at::equal(b.get("c"), at::full({3}, 5.0)));
  if (TestType::kLeavesAliasStorage) CHECK(td.get({"b", "c"}).is_same(src.get({"b", "c"})));
  CHECK(td.contains({"b", "new"}));
  CHECK(td.contains("f"));
  TensorDict cloned = TestType::make(state_abc());
  cloned.update(src, /*clone=*/true);
  CHECK_FALSE(cloned.get("f").is_same(src.get("f")));
  CHECK(at::equal(cloned.get("f"), src.get("f")));
  TensorDict only = TestType::make(state_abc());
  only.update(src, false, false, std::vector<NestedKey>{{"b", "c"}});
  CHECK_FALSE(only.contains("f"));
  CHECK(at::equal(only.get({"b", "c"}), at::full({3}, 5.0)));
}

TEMPLATE_LIST_TEST_CASE("update(inplace) and update_ copy into existing storage - unknown keys are refused", "[ops][update][errors]", ContractBackends) {
  TensorDict td = TestType::make(state_abc());
  at::Tensor a = td.get("a");
  td.update(TensorDict({{"a", at::full({3}, 2.0)}}, {3}), false, /*inplace=*/true);
  if (TestType::kLeavesAliasStorage) CHECK(td.get("a").is_same(a));
  CHECK(at::equal(td.get("a"), at::full({3}, 2.0)));
  td.update_(TensorDict({{"b", {{"c", at::full({3}, 7.0, at::kDouble)}}}}, {3}));
  CHECK(td.get({"b", "c"}).scalar_type() == at::kFloat);
  CHECK(at::equal(td.get({"b", "c"}), at::full({3}, 7.0)));
  REQUIRE_THROWS_AS(td.update_(TensorDict({{"zz", at::ones({3})}, {"a", at::zeros({3})}}, {3})), KeyError);
  REQUIRE_THROWS_WITH(td.update_(TensorDict({{"zz", at::ones({3})}}, {3})),
                      Catch::Contains("The key 'zz' was not found in the dest tensordict."));
  CHECK(at::equal(td.get("a"), at::full({3}, 2.0)));  // nothing written when a key is unknown
  // copy_ is Python's alias of update_.
  td.copy_(TensorDict({{"a", at::full({3}, 6.0)}}, {3}));
  CHECK(at::equal(td.get("a"), at::full({3}, 6.0)));
}

TEMPLATE_LIST_TEST_CASE("update and update_ walk both trees in step - keys in another order, full keys in errors, a tensordict updated from itself", "[ops][update][errors]", ContractBackends) {
  // b's keys listed the other way round: found where they are, not at the same position.
  TensorDict td = TestType::make(state_abc());
  TensorDict swapped({{"b", {{"d", at::full({3, 2}, 4.0)}, {"c", at::full({3}, 3.0)}}}, {"a", at::full({3}, 2.0)}}, {3});
  td.update_(swapped);
  CHECK(at::equal(td.get("a"), at::full({3}, 2.0)));
  CHECK(at::equal(td.get({"b", "c"}), at::full({3}, 3.0)));
  CHECK(at::equal(td.get({"b", "d"}), at::full({3, 2}, 4.0)));
  CHECK(at::equal(td.get("e"), at::ones({3})));
  // update_'s errors two levels down name the whole key; nothing is written before them.
  REQUIRE_THROWS_WITH(td.update_(TensorDict({{"a", at::zeros({3})}, {"b", {{"zz", at::ones({3})}}}}, {3})),
                      Catch::Contains("The key ('b', 'zz') was not found in the dest tensordict."));
  REQUIRE_THROWS_WITH(td.update_(TensorDict({{"a", at::zeros({4})}, {"b", {{"c", at::ones({4})}}}}, {})),
                      Catch::Contains("batch dimension mismatch") && Catch::Contains("for key 'a'"));
  REQUIRE_THROWS_WITH(td.update_(TensorDict({{"b", {{"c", at::ones({4})}}}}, {})),
                      Catch::Contains("value.shape=torch.Size([4]) for key ('b', 'c')"));
  CHECK(at::equal(td.get("a"), at::full({3}, 2.0)));
  if (!TestType::kMutableKeys) return;
  td.update(swapped.apply([](const at::Tensor& x) { return x + 1; }));
  CHECK(at::equal(td.get({"b", "d"}), at::full({3, 2}, 5.0)));
  CHECK(at::equal(td.get({"b", "c"}), at::full({3}, 4.0)));
  // update's errors name the whole key too (they named its last part).
  REQUIRE_THROWS_WITH(td.update(TensorDict({{"b", {{"x", at::ones({4})}}}}, {})),
                      Catch::Contains("value.shape=torch.Size([4]) for key ('b', 'x')"));
  // A tensordict updated from itself, whole or a level of it shared: nothing changes, and a
  // cloning update gives every leaf new storage with the same values.
  const TensorDict before = td.clone();
  td.update(td);
  td.update(TensorDict({{"b", td.get_tensordict("b")}}, {3}));
  CHECK(td.keys(true, true) == before.keys(true, true));
  CHECK((td == before).all());
  const at::Tensor a = td.get("a");
  td.update(td, /*clone=*/true);
  CHECK((td == before).all());
  if (TestType::kLeavesAliasStorage) CHECK_FALSE(td.get("a").is_same(a));
  // Locked: an in-place update of existing leaves is allowed, a new key is not.
  td.lock_();
  td.update(TensorDict({{"b", {{"c", at::full({3}, 8.0)}}}}, {3}), false, /*inplace=*/true);
  CHECK(at::equal(td.get({"b", "c"}), at::full({3}, 8.0)));
  REQUIRE_THROWS_AS(td.update(TensorDict({{"b", {{"new", at::ones({3})}}}}, {3}), false, /*inplace=*/true), LockedError);
  CHECK_FALSE(td.contains({"b", "new"}));
}

TEMPLATE_LIST_TEST_CASE("update writes each leaf over the leaf at its position, with every check of a write", "[ops][update][errors][lock]", ContractBackends) {
  if (!TestType::kMutableKeys) return;
  // The source lists td's keys in td's order: each leaf lands where td holds it.
  TensorDict td = TestType::make(state_abc());
  const TensorDict plus_one = state_abc().apply([](const at::Tensor& x) { return x + 1; });
  td.update(plus_one);
  CHECK((td == plus_one).all());
  if (TestType::kLeavesAliasStorage) CHECK(td.get("a").is_same(plus_one.get("a")));
  // A value of another batch size at the same position is refused, naming its key.
  REQUIRE_THROWS_WITH(td.update(TensorDict({{"a", at::ones({4})}}, {})),
                      Catch::Contains("value.shape=torch.Size([4]) for key 'a'"));
  CHECK(at::equal(td.get("a"), at::ones({3})));
  // A tensor at the position of a nested level replaces the level.
  td.update(TensorDict({{"a", at::zeros({3})}, {"e", at::zeros({3})}, {"b", at::full({3}, 2.0)}}, {3}));
  CHECK(td.get_entry("b").is_tensor());
  CHECK(at::equal(td.get("b"), at::full({3}, 2.0)));
  // Locked: refused before anything is written, the root (checked first) or a nested level.
  TensorDict nested_locked = TestType::make(state_abc());
  nested_locked.get_tensordict("b").lock_();
  REQUIRE_THROWS_AS(nested_locked.update(TensorDict({{"b", {{"c", at::full({3}, 5.0)}}}}, {3})), LockedError);
  CHECK(at::equal(nested_locked.get({"b", "c"}), at::ones({3})));
  td.lock_();
  REQUIRE_THROWS_AS(td.update(TensorDict({{"a", at::ones({3})}}, {3})), LockedError);
  CHECK(at::equal(td.get("a"), at::zeros({3})));
}

TEMPLATE_LIST_TEST_CASE("update_at_, set_at_ and get_at write and read at a batch index", "[ops][update][errors]", ContractBackends) {
  TensorDict td = TestType::make(state_abc());
  td.set_at_({"b", "c"}, at::full({2}, 9.0), {Slice(0, 2)});
  CHECK(at::equal(td.get({"b", "c"}), at::tensor({9.0f, 9.0f, 1.0f})));
  CHECK(td.get_at({"b", "c"}, {2}).dim() == 0);
  CHECK(td.get_at({"b", "c"}, {2}).item<float>() == 1.0f);
  td.update_at_(TensorDict({{"a", at::full({1}, 4.0)}, {"b", {{"d", at::zeros({1, 2})}}}}, {1}), {Slice(1, 2)});
  CHECK(at::equal(td.get("a"), at::tensor({0.0f, 4.0f, 0.0f})));
  CHECK(at::equal(td.get({"b", "d"}).sum(1), at::tensor({2.0f, 0.0f, 2.0f})));
  REQUIRE_THROWS_AS(td.set_at_("zz", at::ones({1}), {0}), KeyError);
  REQUIRE_THROWS_AS(td.set_at_("a", at::ones({5}), {Slice(0, 2)}), ShapeError);
  REQUIRE_THROWS_AS(td.update_at_(TensorDict({{"zz", at::ones({1})}}, {1}), {0}), KeyError);
  REQUIRE_THROWS_AS(td.get_at("a", {7}), IndexError);
}

TEMPLATE_LIST_TEST_CASE("update from a level of the destination (td.update(td[a])) gives what a copy of it would", "[ops][update]", ContractBackends) {
  if (!TestType::kMutableKeys) return;
  // td = {a: {a: {a: 1, b: 2}}}: the walk of td["a"]["a"] writes into td["a"], replacing the
  // level being walked (its last reference) and adding a key to the level walked above it.
  TensorDict inner({{"a", at::full({3}, 1.0)}, {"b", at::full({3}, 2.0)}}, {3});
  TensorDict td = TestType::make(TensorDict({{"a", TensorDict({{"a", inner}}, {3})}}, {3}));
  td.update(td.get_tensordict("a"));
  CHECK(td.keys(true) == (std::vector<NestedKey>{"a", {"a", "a"}, {"a", "b"}}));
  CHECK(at::equal(td.get({"a", "a"}), at::full({3}, 1.0)));
  CHECK(at::equal(td.get({"a", "b"}), at::full({3}, 2.0)));
}

TEMPLATE_LIST_TEST_CASE("update_at_ finds keys in another order, names the whole key, writes nothing before a missing one", "[ops][update][errors]", ContractBackends) {
  TensorDict td = TestType::make(state_abc());
  // b's keys the other way round, and a nested level and a non-tensor value that have no tensor
  // leaf to write: skipped, as by the key list update_at_ takes (tensor leaves).
  TensorDict src({{"b", {{"d", at::full({2, 2}, 4.0)}, {"c", at::full({2}, 3.0)}}},
                  {"a", at::full({2}, 2.0)},
                  {"empty", TensorDict({}, {2})}},
                 {2});
  src.set_non_tensor("note", "not written");
  td.update_at_(src, {Slice(1, 3)});
  CHECK(at::equal(td.get("a"), at::tensor({0.0f, 2.0f, 2.0f})));
  CHECK(at::equal(td.get({"b", "c"}), at::tensor({1.0f, 3.0f, 3.0f})));
  CHECK(at::equal(td.get({"b", "d"}).select(1, 0), at::tensor({1.0f, 4.0f, 4.0f})));
  CHECK_FALSE(td.contains("empty"));
  CHECK_FALSE(td.contains("note"));
  // No tensor leaf to write: the index is not read (three indices for one batch dim).
  CHECK_NOTHROW(td.update_at_(TensorDict({}, {}), {0, 0, 0}));
  CHECK_THROWS_AS(td.update_at_(TensorDict({{"a", at::ones({1})}}, {1}), {0, 0, 0}), IndexError);
  // A missing key two levels down is named whole, before anything is written.
  REQUIRE_THROWS_WITH(td.update_at_(TensorDict({{"a", at::full({1}, 9.0)}, {"b", {{"zz", at::ones({1})}}}}, {1}), {0}),
                      Catch::Contains("The key ('b', 'zz') was not found in the dest tensordict."));
  CHECK(td.get("a").select(0, 0).item<float>() == 0.0f);
  // A value LibTorch cannot write there: a ShapeError naming the whole key and both shapes.
  REQUIRE_THROWS_WITH(td.update_at_(TensorDict({{"b", {{"d", at::ones({1, 5})}}}}, {1}), {0}),
                      Catch::Contains("into ('b', 'd')[(0)]") && Catch::Contains("leaf shape torch.Size([3, 2])"));
}

TEMPLATE_LIST_TEST_CASE("setdefault returns the existing entry or stores the default", "[ops][update][lock]", ContractBackends) {
  TensorDict td = TestType::make(state_abc());
  CHECK(at::equal(td.setdefault("a", at::ones({3})).tensor(), at::zeros({3})));
  if (TestType::kMutableKeys) {
    Entry e = td.setdefault({"b", "z"}, at::full({3}, 3.0));
    CHECK(at::equal(e.tensor(), at::full({3}, 3.0)));
    CHECK(td.contains({"b", "z"}));
  }
  td.lock_();
  CHECK(at::equal(td.setdefault("a", at::ones({3})).tensor(), at::zeros({3})));
  REQUIRE_THROWS_AS(td.setdefault("new", at::ones({3})), LockedError);
}

TEMPLATE_LIST_TEST_CASE("a locked tensordict refuses the new structural ops with Python's message (1.7)", "[ops][lock][errors]", ContractBackends) {
  TensorDict td = TestType::make(state_abc());
  td.lock_();
  const char* msg = "Cannot modify locked TensorDict. For in-place modification, consider using the `set_()` method";
  REQUIRE_THROWS_AS(td.update(TensorDict({{"f", at::ones({3})}}, {3})), LockedError);
  REQUIRE_THROWS_WITH(td.update(TensorDict({{"a", at::ones({3})}}, {3})), Catch::Contains(msg));
  REQUIRE_THROWS_AS(td.load_state_dict(td.state_dict(), true, /*assign=*/true), LockedError);
  REQUIRE_THROWS_AS(td.setdefault("g", at::ones({3})), LockedError);
  // In-place forms stay allowed.
  td.update(TensorDict({{"a", at::ones({3})}}, {3}), false, /*inplace=*/true);
  td.update_(TensorDict({{"a", at::full({3}, 2.0)}}, {3}));
  td.update_at_(TensorDict({{"a", at::zeros({})}}, {}), {0});
  td.mul_(2);
  if (TestType::kLeavesAliasStorage) td.zero_grad();
  CHECK(at::equal(td.get("a"), at::tensor({0.0f, 4.0f, 4.0f})));
  // Results of select / exclude / flatten are new, unlocked tensordicts.
  CHECK_FALSE(td.select({"a"}).is_locked());
  CHECK_FALSE(td.exclude({"a"}).is_locked());
  CHECK_FALSE(td.flatten_keys().is_locked());
}

TEMPLATE_LIST_TEST_CASE("requires_grad_, zero_grad, numel, ndimension, is_empty, pin_memory", "[ops][grad]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"w", at::ones({2, 3})}, {"n", {{"v", at::ones({2})}}}}, {2}));
  CHECK(td.numel() == 2);
  CHECK(td.ndimension() == 1);
  CHECK_FALSE(td.is_empty());
  CHECK(TestType::make(TensorDict({{"n", {{"s", "text"}}}}, {})).is_empty());
  CHECK(TestType::make(TensorDict()).is_empty());
  if (!TestType::kLeavesAliasStorage) {
    // Flags set on copies would be lost: refused, naming the backend.
    REQUIRE_THROWS_AS(td.requires_grad_(), NotImplementedError);
    REQUIRE_THROWS_WITH(td.zero_grad(), Catch::Contains(td.type_name()) && Catch::Contains("zero_grad"));
    return;
  }
  td.requires_grad_();
  CHECK(td.get("w").requires_grad());
  CHECK(td.get({"n", "v"}).requires_grad());
  (td.get("w").sum() + td.get({"n", "v"}).sum()).backward();
  CHECK(td.get("w").grad().defined());
  td.zero_grad(/*set_to_none=*/false);
  CHECK(at::equal(td.get("w").grad(), at::zeros({2, 3})));
  td.zero_grad();
  CHECK_FALSE(td.get("w").grad().defined());
  td.requires_grad_(false);
  CHECK_FALSE(td.get("w").requires_grad());
  REQUIRE_THROWS_WITH(TestType::make(TensorDict({{"i", at::arange(2)}}, {2})).requires_grad_(), Catch::Contains("'i'"));

  // Without CUDA there is no pinned allocator: pin_memory returns the same leaves.
  TensorDict pinned = td.pin_memory();
  if (!at::hasCUDA()) {
    CHECK(pinned.get("w").is_same(td.get("w")));
  } else {
    CHECK(pinned.get("w").is_pinned());
  }
}

TEMPLATE_LIST_TEST_CASE("state_dict is flat with batch sizes per level - load_state_dict restores (case 29)", "[ops][state]", ContractBackends) {
  TensorDict td = TestType::make(
      TensorDict({{"a", at::tensor(1.0f)}, {"b", {{"c", at::tensor(2.0f)}, {"d", {{"e", at::tensor(3.0f)}}}}}}, {}));
  StateDict sd = td.state_dict();
  std::vector<std::string> keys;
  for (const auto& kv : sd.tensors) keys.push_back(kv.first);
  CHECK(keys == (std::vector<std::string>{"a", "b.c", "b.d.e"}));
  std::vector<std::string> levels;
  for (const auto& kv : sd.batch_sizes) levels.push_back(kv.first);
  CHECK(levels == (std::vector<std::string>{"", "b", "b.d"}));
  CHECK_FALSE(sd.at("a").requires_grad());
  REQUIRE_THROWS_AS(sd.at("zz"), KeyError);

  TensorDict zeroed = TestType::make(td.clone().zero_());
  CHECK(zeroed.get({"b", "d", "e"}).item<float>() == 0.0f);
  at::Tensor e = zeroed.get({"b", "d", "e"});
  zeroed.load_state_dict(sd);
  CHECK(zeroed.get({"b", "d", "e"}).item<float>() == 3.0f);  // copied in place
  if (TestType::kLeavesAliasStorage) CHECK(e.item<float>() == 3.0f);
  CHECK((zeroed == td).all());

  StateDict slash = td.state_dict("/");
  CHECK(slash.contains("b/d/e"));
  if (!TestType::kMutableKeys) return;
  TensorDict other = TestType::make(td.clone().zero_());
  other.load_state_dict(slash, true, /*assign=*/true);
  CHECK(at::equal(other.get({"b", "d", "e"}), slash.at("b/d/e")));
  if (TestType::kLeavesAliasStorage) CHECK(other.get({"b", "d", "e"}).is_same(slash.at("b/d/e")));
}

TEMPLATE_LIST_TEST_CASE("load_state_dict errors: key sets, batch sizes with assign", "[ops][state][errors]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({2})}, {"b", {{"c", at::zeros({2, 3})}}}}, {2}));
  StateDict sd = td.state_dict();
  sd.tensors.pop_back();
  REQUIRE_THROWS_AS(td.load_state_dict(sd), RuntimeError);
  REQUIRE_THROWS_WITH(td.load_state_dict(sd), Catch::Contains("Cannot load state-dict because the key sets don't match"));
  td.load_state_dict(sd, /*strict=*/false);  // partial load is fine
  StateDict bigger = TensorDict({{"a", at::ones({5})}, {"b", {{"c", at::ones({5, 3})}}}}, {5}).state_dict();
  REQUIRE_THROWS_AS(td.load_state_dict(bigger), RuntimeError);  // in-place copy of a different shape
  if (!TestType::kMutableKeys || TestType::kLazyStack) return;  // a lazy stack's batch size is fixed
  td.load_state_dict(bigger, true, /*assign=*/true);
  CHECK((td.batch_size() == c10::IntArrayRef{5}));
  CHECK((td.get_tensordict("b").batch_size() == c10::IntArrayRef{5}));
  StateDict other_device = td.state_dict();
  other_device.device = at::Device(at::kCPU);
  TensorDict meta_td = TensorDict::empty_with({}, at::Device(at::kMeta));
  REQUIRE_THROWS_WITH(meta_td.load_state_dict(other_device), Catch::Contains("another device"));
}

TEST_CASE("from_module gives the module's own parameters and buffers as nested keys (case 30)", "[ops][module]") {
  torch::nn::Linear lin(3, 4);
  TensorDict td = from_module(*lin);
  CHECK(td.batch_size().empty());
  CHECK(td.keys() == (std::vector<NestedKey>{"weight", "bias"}));
  CHECK(td.get("weight").is_same(lin->weight));
  CHECK_FALSE(td.is_locked());
  CHECK(from_module(*lin, /*lock=*/true).is_locked());

  Net net;
  TensorDict nested = from_module(net);
  CHECK(nested.contains({"lin", "weight"}));
  CHECK(nested.get({"lin", "weight"}).is_same(net.lin->weight));
  CHECK(nested.contains({"bn", "running_mean"}));
  CHECK_FALSE(nested.contains("act"));  // no parameters: filtered
  CHECK(from_module(net, false, /*filter_empty=*/false).contains("act"));
}

TEST_CASE("to_module swaps values in and its guard restores them", "[ops][module][errors]") {
  torch::nn::Linear lin(3, 2);
  at::Tensor weight = lin->weight;
  at::Tensor original = weight.detach().clone();
  TensorDict values({{"weight", at::zeros({2, 3})}, {"bias", at::ones({2})}}, {});
  {
    ModuleSwap swap = to_module(values, *lin);
    CHECK(at::equal(lin->forward(at::ones({1, 3})), at::ones({1, 2})));
    CHECK(lin->weight.is_same(weight));  // same parameter object, new data
    CHECK(at::equal(swap.previous().get("weight"), original));
  }
  CHECK(at::equal(lin->weight, original));
  {
    ModuleSwap kept = to_module(values, *lin);
    kept.release();
  }
  CHECK(at::equal(lin->weight, at::zeros({2, 3})));

  Net net;
  at::Tensor before = net.lin->weight.detach().clone();
  TensorDict wrong({{"lin", {{"weight", at::zeros({2, 3})}, {"nope", at::ones({2})}}}}, {});
  REQUIRE_THROWS_AS(to_module(wrong, net), KeyError);
  REQUIRE_THROWS_WITH(to_module(wrong, net), Catch::Contains("('lin', 'nope')"));
  CHECK(at::equal(net.lin->weight, before));  // restored after the error
  {
    ModuleSwap nested_swap = to_module(TensorDict({{"lin", {{"bias", at::full({2}, 3.0)}}}}, {}), net);
    CHECK(at::equal(net.lin->bias, at::full({2}, 3.0)));
  }
  CHECK_FALSE(at::equal(net.lin->bias, at::full({2}, 3.0)));
}
