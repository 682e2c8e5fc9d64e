// Contract: keys, nested keys, lookup, writes, erase/pop/rename and insertion order
// (semantics.md 1.3-1.5, cases 1.19.6-10 and 27).
#include "support/catch_torch.h"

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;
using contract::joined_keys;
using contract::Sizes;
using contract::sizes_of;
using contract::Strings;

namespace {
// TD({c: 1, a: {b: 0}}): semantics.md 1.3's example with the leaf first, so that backends that
// load leaves before sub-collections (memmap, as Python) list the same order.
TensorDict keys_abc() { return TensorDict({{"c", 1}, {"a", {{"b", 0}}}}); }
}  // namespace

TEMPLATE_LIST_TEST_CASE("key listings: nested, leaves only, pre-order (case 6)", "[contract][keys]",
                        ContractBackends) {
  TensorDict td = TestType::make(keys_abc());
  CHECK((joined_keys(td) == Strings{"c", "a"}));
  CHECK((joined_keys(td, true) == Strings{"c", "a", "a.b"}));
  CHECK((joined_keys(td, true, true) == Strings{"c", "a.b"}));
  CHECK(joined_keys(td, false, true) == Strings{"c"});
  CHECK((td.keys(true)[2] == NestedKey({"a", "b"})));
  CHECK(td.num_keys() == 2);

  auto items = td.items(true);
  REQUIRE(items.size() == 3);
  CHECK(items[0].first == NestedKey("c"));
  CHECK(items[0].second.tensor().item<int64_t>() == 1);
  CHECK(items[1].first == NestedKey("a"));
  CHECK(items[1].second.is_tensordict());
  CHECK((items[2].first == NestedKey({"a", "b"})));
  CHECK(items[2].second.tensor().item<int64_t>() == 0);

  auto values = td.values();
  REQUIRE(values.size() == 2);
  CHECK(values[0].is_tensor());
  CHECK(values[1].is_tensordict());
  auto leaves = td.values(true, true);
  REQUIRE(leaves.size() == 2);
  CHECK(leaves[0].tensor().item<int64_t>() == 1);
  CHECK(leaves[1].tensor().item<int64_t>() == 0);
}

TEMPLATE_LIST_TEST_CASE("non-tensor data is listed but is not a leaf", "[contract][keys][non_tensor]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"t", at::zeros({2})}, {"s", "hello"}, {"n", {{"u", "x"}}}}, {2}));
  CHECK((joined_keys(td, true) == Strings{"t", "s", "n", "n.u"}));
  CHECK(joined_keys(td, true, true) == Strings{"t"});
}

TEMPLATE_LIST_TEST_CASE("contains looks through nested keys", "[contract][keys]", ContractBackends) {
  TensorDict td = TestType::make(keys_abc());
  CHECK(td.contains("a"));
  CHECK((td.contains({"a", "b"})));
  CHECK((td.contains(NestedKey({"a", "b"}))));
  CHECK_FALSE(td.contains("b"));
  CHECK_FALSE((td.contains({"a", "z"})));
  CHECK_FALSE((td.contains({"z", "b"})));
  // Python: ("c", "x") in td is False when c is a tensor.
  CHECK_FALSE((td.contains({"c", "x"})));
  // A one-part tuple is the plain key.
  CHECK(td.contains(std::vector<std::string>{"c"}));
}

TEMPLATE_LIST_TEST_CASE("the empty key is refused", "[contract][keys][errors]", ContractBackends) {
  TensorDict td = TestType::make(keys_abc());
  const std::vector<std::string> none;
  REQUIRE_THROWS_AS(td.contains(none), KeyError);
  REQUIRE_THROWS_WITH(td.get(none), Catch::Contains("Only NestedKeys are supported. Got key ()."));
}

TEMPLATE_LIST_TEST_CASE("get: missing keys name the key and the keys at that level (case 8)",
                        "[contract][keys][errors]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"b", at::zeros({2})}, {"a", at::zeros({2})}, {"n", {{"x", at::zeros({2})}}}}, {2}));
  REQUIRE_THROWS_AS(td.get("zz"), KeyError);
  REQUIRE_THROWS_WITH(td.get("zz"),
                      Catch::Contains("key \"zz\" not found in") && Catch::Contains("with keys ['a', 'b', 'n']"));
  REQUIRE_THROWS_WITH(td.get({"n", "zz"}),
                      Catch::Contains("key \"zz\" not found") && Catch::Contains("at 'n'") &&
                          Catch::Contains("with keys ['x']") && Catch::Contains("('n', 'zz')"));
  // The path breaks off at the first level.
  REQUIRE_THROWS_AS(td.get({"zz", "x"}), KeyError);
  REQUIRE_THROWS_WITH(td.get({"zz", "x"}),
                      Catch::Contains("key \"zz\" not found") && Catch::Contains("['a', 'b', 'n']"));
  // Control bytes in the missing key are escaped: the message goes on past a NUL.
  REQUIRE_THROWS_WITH(td.get(std::string("z\0z\n", 4)),
                      Catch::Contains("key \"z\\x00z\\n\" not found") && Catch::Contains("['a', 'b', 'n']"));
  REQUIRE_THROWS_AS(td.get_entry("zz"), KeyError);
  REQUIRE_THROWS_AS(td.get_tensordict("zz"), KeyError);
  REQUIRE_THROWS_AS(td.get_non_tensor("zz"), KeyError);
  CHECK_FALSE(td.find("zz").defined());
  CHECK((td.find({"n", "x"}).is_tensor()));
}

TEMPLATE_LIST_TEST_CASE("get with a default, typed getters and non-tensordict intermediates",
                        "[contract][keys]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", 0}, {"n", {{"x", at::ones({})}}}}));
  at::Tensor fallback = at::full({}, 7);
  CHECK(td.get("zz", fallback).is_same(fallback));
  CHECK((td.get({"n", "zz"}, fallback).is_same(fallback)));
  CHECK((td.get({"n", "x"}, fallback).item<float>() == 1.0f));
  CHECK((td[{"n", "x"}].item<float>() == 1.0f));
  CHECK(td.get_tensordict("n").contains("x"));
  REQUIRE_THROWS_AS(td.get("n"), TypeError);
  REQUIRE_THROWS_WITH(td.get("n"), Catch::Contains("'n'") && Catch::Contains("get_tensordict()"));
  REQUIRE_THROWS_AS(td.get_tensordict("a"), TypeError);
  REQUIRE_THROWS_AS(td.get_non_tensor("a"), TypeError);
  // TD({a: 0})["a", "b"]: a is not a tensordict (even with a default, like Python).
  REQUIRE_THROWS_AS(td.get({"a", "b"}), ValueError);
  REQUIRE_THROWS_WITH(td.get({"a", "b"}),
                      Catch::Contains("Expected a TensorDictBase instance") && Catch::Contains("'a'"));
  REQUIRE_THROWS_AS(td.get({"a", "b"}, fallback), ValueError);
}

TEMPLATE_LIST_TEST_CASE("set_ copies into the existing leaf (case 9)", "[contract][keys]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({3})}, {"n", {{"x", at::zeros({3, 2})}}}}, {3}));
  at::Tensor before = td.get("a");
  td.set_("a", at::ones({3}, at::kDouble));
  CHECK(td.get("a").scalar_type() == at::kFloat);  // destination dtype kept
  CHECK(at::equal(td.get("a"), at::ones({3})));
  if (TestType::kLeavesAliasStorage) CHECK(contract::shares_storage(td.get("a"), before));  // written in place
  td.set_({"n", "x"}, at::ones({3, 2}));
  CHECK((at::equal(td.get({"n", "x"}), at::ones({3, 2}))));
  // Broadcast of the feature dims, like copy_.
  td.set_({"n", "x"}, at::full({3, 1}, 2.0));
  CHECK((at::equal(td.get({"n", "x"}), at::full({3, 2}, 2.0))));
  // A tensordict value is copied leaf by leaf.
  td.set_("n", TensorDict({{"x", at::full({3, 2}, 5.0)}}, {3}));
  CHECK((at::equal(td.get({"n", "x"}), at::full({3, 2}, 5.0))));
}

TEMPLATE_LIST_TEST_CASE("set_ errors: missing key, batch mismatch, failed copy, wrong kind",
                        "[contract][keys][errors]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({3})}, {"n", {{"x", at::zeros({3})}}}}, {3}));
  REQUIRE_THROWS_AS(td.set_("zz", at::zeros({3})), KeyError);
  REQUIRE_THROWS_WITH(td.set_("zz", at::zeros({3})),
                      Catch::Contains("key \"zz\" not found") && Catch::Contains("['a', 'n']"));
  REQUIRE_THROWS_AS(td.set_({"n", "zz"}, at::zeros({3})), KeyError);
  REQUIRE_THROWS_AS(td.set_({"zz", "x"}, at::zeros({3})), KeyError);
  REQUIRE_THROWS_AS(td.set_("a", at::zeros({4})), ShapeError);
  REQUIRE_THROWS_WITH(td.set_("a", at::zeros({4})),
                      Catch::Contains("batch dimension mismatch") && Catch::Contains("torch.Size([4])"));
  REQUIRE_THROWS_AS(td.set_("a", at::zeros({3, 2})), ValueError);
  REQUIRE_THROWS_WITH(td.set_("a", at::zeros({3, 2})), Catch::Contains("Failed to update 'a'"));
  REQUIRE_THROWS_AS(td.set_("n", at::zeros({3})), TypeError);
  REQUIRE_THROWS_AS(td.set_("a", TensorDict({{"x", at::zeros({3})}}, {3})), TypeError);
}

TEST_CASE("set_ of a wrongly shaped value into a 0-dim leaf fails with ValueError", "[keys][errors]") {
  TensorDict td({{"a", at::rand({})}});
  REQUIRE_THROWS_AS(td.set_("a", at::randn({2})), ValueError);
  REQUIRE_THROWS_WITH(td.set_("a", at::randn({2})), Catch::Contains("Failed to update 'a'"));
}

TEMPLATE_LIST_TEST_CASE("set stores without copying, replaces in place in the order, creates levels (case 7)",
                        "[contract][keys]", ContractBackends) {
  if (!TestType::kMutableKeys) return;
  TensorDict td = TestType::make(TensorDict({{"z", at::zeros({2})}, {"a", at::zeros({2})}}, {2}));
  at::Tensor m = at::ones({2, 3});
  td.set("m", m);
  if (TestType::kLeavesAliasStorage) CHECK(td.get("m").is_same(m));
  CHECK(at::equal(td.get("m"), m));
  CHECK((joined_keys(td) == Strings{"z", "a", "m"}));
  td.set("z", at::ones({2}));  // a replaced key keeps its position (Python dict)
  CHECK((joined_keys(td) == Strings{"z", "a", "m"}));
  CHECK(at::equal(td.get("z"), at::ones({2})));
  td.set("z", at::ones({2, 5}, at::kInt));  // also with another shape and dtype
  CHECK((joined_keys(td) == Strings{"z", "a", "m"}));
  CHECK(at::equal(td.get("z"), at::ones({2, 5}, at::kInt)));

  td.set({" a ", "little", "story", "about"}, at::zeros({2}));
  CHECK((td.contains({" a ", "little", "story", "about"})));
  TensorDict little = td.get_tensordict({" a ", "little"});
  CHECK(sizes_of(little.batch_size()) == Sizes{2});
  CHECK((td.contains({" a ", "little", "story"})));
  // Dots are plain characters.
  td.set("x.y", at::zeros({2}));
  CHECK(td.contains("x.y"));
  CHECK_FALSE(td.contains("x"));
  // Entries of any kind.
  td.set("s", "text");
  CHECK(td.get_non_tensor("s").value().as_string() == "text");
  td.set("nested", {{"k", at::ones({2, 4})}});
  CHECK(sizes_of(td.get_tensordict("nested").batch_size()) == Sizes{2});
  td.set_non_tensor("j", json::Value(json::Array{1, 2}));
  CHECK(td.get_non_tensor("j").value().python_str() == "[1, 2]");
}

TEMPLATE_LIST_TEST_CASE("insertion order survives many keys", "[contract][keys]", ContractBackends) {
  if (!TestType::kMutableKeys) return;
  TensorDict td = TestType::make(TensorDict({}, {2}));
  Strings expected;
  for (int i = 30; i > 0; --i) {
    std::string key = "k" + std::to_string(i * 7 % 31);
    td.set(key, at::full({2}, static_cast<double>(i)));
    expected.push_back(key);
  }
  CHECK(joined_keys(td) == expected);
  for (int i = 30; i > 0; --i) {
    CHECK(td.get("k" + std::to_string(i * 7 % 31))[0].item<double>() == static_cast<double>(i));
  }
  td.erase(expected[3]);
  expected.erase(expected.begin() + 3);
  CHECK(joined_keys(td) == expected);
  CHECK_FALSE(td.contains("k" + std::to_string(27 * 7 % 31)));
  CHECK(td.contains(expected.back()));
}

TEMPLATE_LIST_TEST_CASE("set over a non-tensordict intermediate is a KeyError (case 10)",
                        "[contract][keys][errors]", ContractBackends) {
  if (!TestType::kMutableKeys) return;
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({2})}}, {2}));
  REQUIRE_THROWS_AS(td.set({"a", "b"}, at::zeros({2})), KeyError);
  REQUIRE_THROWS_WITH(td.set({"a", "b"}, at::zeros({2})),
                      Catch::Contains("The entry 'a' is already present in tensordict"));
  REQUIRE_THROWS_AS(td.set("u", at::Tensor()), ValueError);
}

TEMPLATE_LIST_TEST_CASE("erase and pop remove entries - missing keys are KeyErrors (case 27)",
                        "[contract][keys]", ContractBackends) {
  if (!TestType::kMutableKeys) return;
  TensorDict td = TestType::make(
      TensorDict({{"a", at::zeros({2})}, {"b", at::ones({2})}, {"n", {{"x", at::zeros({2})}, {"y", at::zeros({2})}}}}, {2}));
  td.erase("a");
  CHECK((joined_keys(td) == Strings{"b", "n"}));
  td.erase({"n", "x"});
  CHECK((joined_keys(td, true) == Strings{"b", "n", "n.y"}));
  REQUIRE_THROWS_AS(td.erase("a"), KeyError);
  REQUIRE_THROWS_WITH(td.erase("a"), Catch::Contains("key \"a\" not found") && Catch::Contains("['b', 'n']"));
  REQUIRE_THROWS_AS(td.erase({"n", "x"}), KeyError);
  REQUIRE_THROWS_AS(td.erase({"zz", "x"}), KeyError);

  Entry popped = td.pop("b");
  CHECK(at::equal(popped.tensor(), at::ones({2})));
  CHECK_FALSE(td.contains("b"));
  Entry nested = td.pop({"n", "y"});
  CHECK(nested.is_tensor());
  CHECK(td.get_tensordict("n").num_keys() == 0);
  REQUIRE_THROWS_AS(td.pop("zz"), KeyError);
  REQUIRE_THROWS_WITH(td.pop("zz"), Catch::Contains("You are trying to pop key 'zz'") &&
                                        Catch::Contains("without providing default value"));
  CHECK_FALSE(td.pop("zz", Entry()).defined());
  CHECK_FALSE(td.pop({"zz", "x"}, Entry()).defined());  // a level on the way is missing
  REQUIRE_THROWS_WITH(td.pop({"zz", "x"}), Catch::Contains("You are trying to pop key ('zz', 'x')"));
  Entry fallback(at::ones({2}));
  CHECK(td.pop("zz", fallback).is_tensor());
  CHECK(joined_keys(td) == Strings{"n"});
}

TEMPLATE_LIST_TEST_CASE("rename_key_ moves the entry without copying (case 27)", "[contract][keys]",
                        ContractBackends) {
  if (!TestType::kMutableKeys) return;
  TensorDict td = TestType::make(
      TensorDict({{"a", at::zeros({2})}, {"c", at::ones({2})}, {"n", {{"x", at::zeros({2, 3})}}}}, {2}));
  at::Tensor a = td.get("a");
  REQUIRE_THROWS_AS(td.rename_key_("a", "c", /*safe=*/true), KeyError);
  REQUIRE_THROWS_WITH(td.rename_key_("a", "c", true), Catch::Contains("key 'c' already present in TensorDict."));
  CHECK(td.contains("a"));
  REQUIRE_THROWS_AS(td.rename_key_("zz", "y"), KeyError);
  REQUIRE_THROWS_WITH(td.rename_key_("zz", "y"), Catch::Contains("key \"zz\" not found"));

  td.rename_key_("a", "b");
  CHECK_FALSE(td.contains("a"));
  CHECK(td.keys() == (std::vector<NestedKey>{"b", "c", "n"}));  // the entry keeps its position
  if (TestType::kLeavesAliasStorage) CHECK(contract::shares_storage(td.get("b"), a));
  CHECK(at::equal(td.get("b"), a));
  CHECK(td.num_keys() == 3);
  // Without safe, an existing destination is replaced.
  td.rename_key_("b", "c");
  CHECK(at::equal(td.get("c"), at::zeros({2})));
  CHECK(joined_keys(td).size() == 2);
  // Across levels.
  td.rename_key_({"n", "x"}, "y");
  CHECK((sizes_of(td.get("y").sizes()) == Sizes{2, 3}));
  CHECK_FALSE((td.contains({"n", "x"})));
  td.rename_key_({"n"}, {"m"});
  CHECK(td.contains("m"));
}
