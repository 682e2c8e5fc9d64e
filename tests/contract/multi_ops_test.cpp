// Contract: stack, cat, split, chunk, unbind (semantics.md 1.10, cases 1.19.19-20).
#include "support/catch_torch.h"

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;
using contract::joined_keys;
using contract::shares_storage;
using contract::Sizes;
using contract::sizes_of;
using contract::Strings;

namespace {
TensorDict sample(double value, int64_t n = 3) {
  return TensorDict({{"a", at::full({n, 2}, value)}, {"n", {{"x", at::full({n}, value, at::kLong)}}}}, {n});
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("stack makes a dense copy along a new batch dim (case 19)", "[contract][multi]",
                        ContractBackends) {
  TensorDict t0 = TestType::make(sample(0)), t1 = TestType::make(sample(1));
  TensorDict s = stack({t0, t1});
  // Lazy stacks stack into a lazy stack of their members' dense stacks, as v0.14 (A20).
  CHECK(std::string(s.type_name()) == (TestType::kLazyStack ? "LazyStackedTensorDict" : "TensorDict"));
  CHECK((sizes_of(s.batch_size()) == Sizes{2, 3}));
  CHECK((sizes_of(s.get("a").sizes()) == Sizes{2, 3, 2}));
  CHECK((sizes_of(s.get_tensordict("n").batch_size()) == Sizes{2, 3}));
  CHECK((at::equal(s.get({"n", "x"})[1], at::ones({3}, at::kLong))));
  CHECK((joined_keys(s, true) == Strings{"a", "n", "n.x"}));
  CHECK_FALSE(shares_storage(s.get("a"), t0.get("a")));

  TensorDict s1 = stack({t0, t1}, 1);
  CHECK((sizes_of(s1.batch_size()) == Sizes{3, 2}));
  CHECK(at::equal(s1.get("a").select(1, 1), t1.get("a")));
  TensorDict sm = stack({t0, t1, t0}, -1);
  CHECK((sizes_of(sm.batch_size()) == Sizes{3, 3}));
  CHECK((sizes_of(sm.get("a").sizes()) == Sizes{3, 3, 2}));  // new dim after the batch dims, before the event dims

  // A nested tensordict with extra batch dims keeps them.
  TensorDict deep = TestType::make(TensorDict({{"m", TensorDict({{"y", at::zeros({3, 4})}}, {3, 4})}}, {3}));
  TensorDict ds = stack({deep, deep}, 1);
  CHECK((sizes_of(ds.get_tensordict("m").batch_size()) == Sizes{3, 2, 4}));
}

TEMPLATE_LIST_TEST_CASE("stack errors name the differing key or shape (case 19)", "[contract][multi][errors]",
                        ContractBackends) {
  TensorDict t0 = TestType::make(TensorDict({{"a", at::zeros({3})}}, {3}));
  REQUIRE_THROWS_AS(stack({}), RuntimeError);
  REQUIRE_THROWS_WITH(stack({}), Catch::Contains("list_of_tensordicts cannot be empty"));

  TensorDict other_keys = TestType::make(TensorDict({{"b", at::zeros({3})}}, {3}));
  REQUIRE_THROWS_AS(stack({t0, other_keys}), RuntimeError);
  REQUIRE_THROWS_WITH(stack({t0, other_keys}),
                      Catch::Contains("The sets of keys in the tensordicts to stack are exclusive") &&
                          Catch::Contains("first differing key 'a'"));
  TensorDict nested_keys0 = TestType::make(TensorDict({{"n", {{"x", at::zeros({3})}}}}, {3}));
  TensorDict nested_keys1 = TestType::make(TensorDict({{"n", {{"y", at::zeros({3})}}}}, {3}));
  REQUIRE_THROWS_WITH(stack({nested_keys0, nested_keys1}),
                      Catch::Contains("exclusive in nested TensorDict 'n'"));

  TensorDict bs4 = TestType::make(TensorDict({{"a", at::zeros({4})}}, {4}));
  REQUIRE_THROWS_AS(stack({t0, bs4}), ShapeError);
  REQUIRE_THROWS_WITH(stack({t0, bs4}),
                      Catch::Contains("stacking tensordicts requires them to have congruent batch sizes, got "
                                      "td[1].batch_size=torch.Size([4]) and td[0].batch_size=torch.Size([3])"));

  TensorDict leaf3 = TestType::make(TensorDict({{"a", at::zeros({3})}}));
  TensorDict leaf4 = TestType::make(TensorDict({{"a", at::zeros({4})}}));
  REQUIRE_THROWS_AS(stack({leaf3, leaf4}), ShapeError);
  REQUIRE_THROWS_WITH(stack({leaf3, leaf4}),
                      Catch::Contains("The shapes of the tensors to stack is incompatible: torch.Size([4]) vs "
                                      "torch.Size([3]) for key 'a'."));

  TensorDict kind = TestType::make(TensorDict({{"a", "text"}}, {3}));
  REQUIRE_THROWS_AS(stack({t0, kind}), TypeError);
  REQUIRE_THROWS_WITH(stack({t0, kind}), Catch::Contains("'a'") && Catch::Contains("non-tensor data"));

  REQUIRE_THROWS_AS(stack({t0, t0}, 2), IndexError);
  REQUIRE_THROWS_AS(stack({t0, t0}, -3), IndexError);
}

TEMPLATE_LIST_TEST_CASE("cat joins along a batch dim (case 20)", "[contract][multi]", ContractBackends) {
  TensorDict t3 = TestType::make(sample(0, 3)), t2 = TestType::make(sample(1, 2));
  TensorDict c = cat({t3, t2});
  CHECK(sizes_of(c.batch_size()) == Sizes{5});
  CHECK((sizes_of(c.get("a").sizes()) == Sizes{5, 2}));
  CHECK(sizes_of(c.get_tensordict("n").batch_size()) == Sizes{5});
  CHECK((at::equal(c.get({"n", "x"}), at::tensor({0, 0, 0, 1, 1}, at::kLong))));

  TensorDict wide0 = TestType::make(TensorDict({{"a", at::zeros({2, 3})}}, {2, 3}));
  TensorDict wide1 = TestType::make(TensorDict({{"a", at::ones({2, 1})}}, {2, 1}));
  TensorDict w = cat({wide0, wide1}, -1);
  CHECK((sizes_of(w.batch_size()) == Sizes{2, 4}));
  CHECK(at::equal(w.get("a").select(1, 3), at::ones({2})));

  TensorDict other = TestType::make(TensorDict({{"b", at::zeros({2, 2})}, {"n", {{"x", at::zeros({2}, at::kLong)}}}}, {2}));
  REQUIRE_THROWS_AS(cat({t3, other}), KeyError);
  REQUIRE_THROWS_WITH(cat({t3, other}), Catch::Contains("got keys ['a', 'n'] and ['b', 'n'] which are incompatible"));
  REQUIRE_THROWS_AS(cat({t3, t2}, 1), RuntimeError);
  REQUIRE_THROWS_WITH(cat({t3, t2}, 1), Catch::Contains("dim must be in the range 0 <= dim < len(batch_size)"));
  REQUIRE_THROWS_AS(cat({wide0, t3}), ShapeError);
  REQUIRE_THROWS_AS(cat({wide0, wide1}, 0), ShapeError);
  REQUIRE_THROWS_WITH(cat({wide0, wide1}, 0), Catch::Contains("td[1].batch_size=torch.Size([2, 1])"));
  TensorDict feat = TestType::make(TensorDict({{"a", at::zeros({2, 5})}, {"n", {{"x", at::zeros({2}, at::kLong)}}}}, {2}));
  REQUIRE_THROWS_AS(cat({t3, feat}), ShapeError);
  REQUIRE_THROWS_WITH(cat({t3, feat}), Catch::Contains("for key 'a'"));
  // at::cat alone would skip a legacy empty 1-d leaf and join the rest.
  TensorDict empty1d =
      TestType::make(TensorDict({{"a", at::zeros({0})}, {"n", {{"x", at::zeros({0}, at::kLong)}}}}, {0}));
  REQUIRE_THROWS_AS(cat({t3, empty1d}), ShapeError);
  REQUIRE_THROWS_WITH(cat({t3, empty1d}), Catch::Contains("torch.Size([0]) vs torch.Size([3, 2]) for key 'a'"));
  REQUIRE_THROWS_AS(cat({}), RuntimeError);
}

TEMPLATE_LIST_TEST_CASE("split, chunk and unbind give views (case 20)", "[contract][multi]", ContractBackends) {
  TensorDict td = TestType::make(
      TensorDict({{"a", at::arange(10, at::kFloat).view({5, 2})}, {"n", {{"x", at::arange(5)}}}, {"s", "v"}}, {5}));
  auto parts = td.split(2);
  REQUIRE(parts.size() == 3);
  CHECK(sizes_of(parts[0].batch_size()) == Sizes{2});
  CHECK(sizes_of(parts[1].batch_size()) == Sizes{2});
  CHECK(sizes_of(parts[2].batch_size()) == Sizes{1});
  CHECK((at::equal(parts[2].get({"n", "x"}), at::tensor({4}, at::kLong))));
  CHECK(sizes_of(parts[2].get_tensordict("n").batch_size()) == Sizes{1});
  CHECK(parts[1].get_non_tensor("s").value().as_string() == "v");
  CHECK(shares_storage(parts[1].get("a"), td.get("a")) == TestType::kLeavesAliasStorage);

  auto sized = td.split({1, 4});
  REQUIRE(sized.size() == 2);
  CHECK(sizes_of(sized[1].batch_size()) == Sizes{4});
  CHECK(at::equal(sized[1].get("a"), td.get("a").slice(0, 1)));

  REQUIRE_THROWS_AS(td.split(0), ValueError);
  REQUIRE_THROWS_WITH(td.split(0), Catch::Contains("TensorDict.split: split_size must be positive, got 0."));
  REQUIRE_THROWS_AS(td.split({2, 2}), RuntimeError);  // Python's kind (finding A9)
  REQUIRE_THROWS_WITH(td.split({2, 2}), Catch::Contains("sum to 4") && Catch::Contains("has size 5"));
  REQUIRE_THROWS_AS(td.split(2, 1), IndexError);

  auto chunks = td.chunk(2);
  REQUIRE(chunks.size() == 2);
  CHECK(sizes_of(chunks[0].batch_size()) == Sizes{3});
  CHECK(sizes_of(chunks[1].batch_size()) == Sizes{2});
  CHECK(td.chunk(5).size() == 5);
  REQUIRE_THROWS_AS(td.chunk(0), ValueError);

  auto rows = td.unbind(0);
  REQUIRE(rows.size() == 5);
  for (int64_t i = 0; i < 5; ++i) {
    CHECK(rows[i].batch_size().empty());
    CHECK(at::equal(rows[i].get("a"), td.get("a")[i]));
    CHECK((rows[i].get({"n", "x"}).item<int64_t>() == i));
  }
  // stack(unbind) round-trips.
  CHECK(at::equal(stack(rows).get("a"), td.get("a")));
  // Views where leaves alias storage (a backend reading copies gives copies); a lazy stack's
  // pieces are its members themselves, so writes to them reach it (v0.14's _unbind, A19).
  CHECK(shares_storage(rows[3].get("a"), td.get("a")) == TestType::kLeavesAliasStorage);
  rows[3].set_("a", at::full({2}, -1.0));
  CHECK(at::equal(td.get("a")[3], at::full({2}, -1.0)) == (TestType::kLeavesAliasStorage || TestType::kLazyStack));
  REQUIRE_THROWS_AS(td.unbind(1), IndexError);
}

TEMPLATE_LIST_TEST_CASE("split and unbind along an inner batch dim", "[contract][multi]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::arange(24).view({2, 3, 4})}}, {2, 3}));
  auto cols = td.unbind(-1);
  REQUIRE(cols.size() == 3);
  CHECK(sizes_of(cols[1].batch_size()) == Sizes{2});
  CHECK(at::equal(cols[1].get("a"), td.get("a").select(1, 1)));
  auto halves = td.split(2, 1);
  REQUIRE(halves.size() == 2);
  CHECK((sizes_of(halves[1].batch_size()) == Sizes{2, 1}));
  CHECK(at::equal(cat(halves, 1).get("a"), td.get("a")));
}

TEMPLATE_LIST_TEST_CASE("stack, cat and td op td match members by key, whatever their key order", "[contract][multi]",
                        ContractBackends) {
  // Members built alike are matched position by position (TensorDictBase::peek_at); a member
  // whose keys are in another order, or sit after an erased slot, must still be matched by key.
  const TensorDict abc({{"a", at::full({2}, 1.0)}, {"b", at::full({2}, 2.0)}, {"c", at::full({2}, 3.0)}}, {2});
  const TensorDict cab({{"c", at::full({2}, 30.0)}, {"a", at::full({2}, 10.0)}, {"b", at::full({2}, 20.0)}}, {2});
  TensorDict erased({{"x", at::zeros({2})}, {"a", at::full({2}, 100.0)}, {"b", at::full({2}, 200.0)}}, {2});
  erased.erase("x");  // every key one place earlier than it was written
  erased.set("c", at::full({2}, 300.0));
  const TensorDict t0 = TestType::make(abc), t1 = TestType::make(cab), t2 = TestType::make(erased);
  const TensorDict s = stack({t0, t1, t2});
  CHECK(at::equal(s.get("a").select(1, 0), at::tensor({1.0, 10.0, 100.0}, at::kFloat)));
  CHECK(at::equal(s.get("c").select(1, 1), at::tensor({3.0, 30.0, 300.0}, at::kFloat)));
  const TensorDict c = cat({t1, t0, t2});
  CHECK((joined_keys(c, true) == Strings{"c", "a", "b"}));  // the first member's order
  CHECK(at::equal(c.get("b"), at::tensor({20.0, 20.0, 2.0, 2.0, 200.0, 200.0}, at::kFloat)));
  const TensorDict sum = t0 + t1;
  CHECK((joined_keys(sum, true) == Strings{"a", "b", "c"}));
  CHECK(at::equal(sum.get("b"), at::full({2}, 22.0)));
  CHECK(at::equal((t0 + t2).get("c"), at::full({2}, 303.0)));
  // A member with fewer keys, or with other keys of the same count, is refused by name.
  const TensorDict ab = TestType::make(abc.exclude({"c"}));
  REQUIRE_THROWS_WITH(stack({t0, ab}), Catch::Contains("exclusive") && Catch::Contains("td[1] has keys ['a', 'b']"));
  const TensorDict abd = TestType::make(TensorDict({{"a", at::zeros({2})}, {"b", at::zeros({2})}, {"d", at::zeros({2})}}, {2}));
  REQUIRE_THROWS_WITH(stack({t0, abd}), Catch::Contains("first differing key 'c'"));
  REQUIRE_THROWS_WITH(cat({t0, t1, abd}), Catch::Contains("got keys ['a', 'b', 'c'] and ['a', 'b', 'd']"));
}

TEST_CASE("stack matches members by key past an erased slot of a large level", "[contract][multi]") {
  // Above 16 keys an in-memory level erases by leaving a tombstone: the slot a key was written
  // to no longer matches its place in key order, and peek_at must fall back to the lookup.
  TensorDict plain({}, {2}), holed({}, {2});
  holed.set("x", at::zeros({2}));
  for (int i = 0; i < 17; ++i) {
    plain.set("k" + std::to_string(i), at::full({2}, static_cast<double>(i)));
    holed.set("k" + std::to_string(i), at::full({2}, 100.0 + i));
  }
  holed.erase("x");
  const TensorDict s = stack({plain, holed});
  for (int i = 0; i < 17; ++i) {
    INFO("k" << i);
    CHECK(at::equal(s.get("k" + std::to_string(i)).select(1, 0), at::tensor({1.0 * i, 100.0 + i}, at::kFloat)));
  }
  CHECK(at::equal((plain + holed).get("k16"), at::full({2}, 116.0 + 16)));
}
