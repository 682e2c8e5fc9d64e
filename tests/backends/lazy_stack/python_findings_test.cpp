// Lazy stacks against Python tensordict v0.14: findings A18-A21 of the second differential run
// (key order, kept and documented; unbind, stack of lazy stacks, the stack-dim error, matched). A22 (unbind drops the lock)
// is a contract test (tests/contract/lock_test.cpp).

#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>

using namespace tensordict;
using at::indexing::Slice;
using Strings = std::vector<std::string>;
using Sizes = std::vector<int64_t>;

namespace {

Strings key_list(const TensorDict& td) {
  Strings out;
  for (const NestedKey& k : td.keys()) out.push_back(k.join("."));
  return out;
}

}  // namespace

TEST_CASE("A18 (kept): a lazy stack lists its keys in member 0's order, and what it builds follows",
          "[lazy][python]") {
  TensorDict m({{"z", at::zeros({2})}, {"b", at::ones({2})}, {"n", {{"y", at::zeros({2})}, {"c", at::zeros({2})}}}}, {2});
  // Member 1 inserted its keys in another order: member 0 decides.
  TensorDict other({{"b", at::ones({2})}, {"n", {{"c", at::zeros({2})}, {"y", at::zeros({2})}}}, {"z", at::zeros({2})}}, {2});
  LazyStackedTensorDict ls = lazy_stack({m, other});
  CHECK(key_list(ls) == Strings{"z", "b", "n"});
  CHECK(key_list(ls.get_tensordict("n")) == Strings{"y", "c"});
  CHECK(key_list(ls.contiguous()) == Strings{"z", "b", "n"});
  CHECK(key_list(ls.index({Slice(0, 1)})) == Strings{"z", "b", "n"});
  CHECK(key_list(ls.unbind(1)[0]) == Strings{"z", "b", "n"});
  CHECK(key_list(lazy_stack({other, m})) == Strings{"b", "n", "z"});
}

TEST_CASE("A19: unbind along the stack dim returns the members themselves", "[lazy][python]") {
  TensorDict a({{"x", at::zeros({3})}, {"only_a", at::ones({3})}}, {3});
  TensorDict b({{"x", at::ones({3})}}, {3});
  LazyStackedTensorDict ls = lazy_stack({a, b});
  std::vector<TensorDict> parts = ls.unbind(0);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].is_same(a));
  CHECK(parts[1].is_same(b));
  CHECK(parts[0].contains("only_a"));  // member 0's own key is not lost
  // Along another dim: lazy stacks of the members' pieces.
  std::vector<TensorDict> rows = ls.unbind(1);
  REQUIRE(rows.size() == 3);
  CHECK(LazyStackedTensorDict::is_lazy_stack(rows[0]));
  CHECK(at::equal(rows[2].get("x"), at::tensor({0.0f, 1.0f})));
}

TEST_CASE("A20: stack of lazy stacks stays lazy, with the dense values", "[lazy][python]") {
  TensorDict td({{"x", at::randn({2, 3})}}, {2});
  LazyStackedTensorDict l1 = lazy_stack(td.unbind(0)), l2 = lazy_stack(td.clone().unbind(0));
  for (int64_t dim : {0, 1, -1}) {
    TensorDict out = stack({l1, l2}, dim);
    CHECK(LazyStackedTensorDict::is_lazy_stack(out));
    CHECK(at::equal(out.get("x"), at::stack({td.get("x"), td.get("x")}, dim < 0 ? dim - 1 : dim)));
  }
  // Stacked along different dims: a lazy stack of the lazy stacks themselves.
  TensorDict grid({{"x", at::randn({2, 2})}}, {2, 2});
  LazyStackedTensorDict by_row = lazy_stack(grid.unbind(0), 0), by_col = lazy_stack(grid.unbind(1), 1);
  TensorDict mixed = stack({by_row, by_col}, 0);
  CHECK(LazyStackedTensorDict::is_lazy_stack(mixed));
  CHECK(LazyStackedTensorDict::from(mixed).member(1).is_same(by_col));
  CHECK(at::equal(mixed.get("x"), at::stack({grid.get("x"), grid.get("x")})));
  // Different batch sizes are refused, as v0.14 (no lazy fallback).
  REQUIRE_THROWS_AS(stack({l1, lazy_stack({td.index({0})})}, 0), ShapeError);
  // A lazy stack with a dense tensordict is dense, as before.
  CHECK(!LazyStackedTensorDict::is_lazy_stack(stack({l1, td}, 0)));
}

TEST_CASE("A21: a stack dim out of range is a RuntimeError, below the range too", "[lazy][python]") {
  TensorDict td({{"x", at::zeros({2, 3})}}, {2, 3});
  REQUIRE_THROWS_AS(lazy_stack({td, td}, 3), RuntimeError);
  REQUIRE_THROWS_WITH(lazy_stack({td, td}, 3), Catch::Contains("Stack dim 3 is too big"));
  REQUIRE_THROWS_AS(lazy_stack({td, td}, -5), RuntimeError);
  REQUIRE_THROWS_WITH(lazy_stack({td, td}, -5), Catch::Contains("is too big"));
  CHECK_NOTHROW(lazy_stack({td, td}, -3));
}
