// Contract: batch shape operations (semantics.md 1.9, case 1.19.18). Each changes batch dims
// only, keeps the leaves' own dims and nested tensordicts' extra batch dims, and shares storage
// where the leaf op gives a view.
#include "support/catch_torch.h"

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;
using contract::shares_storage;
using contract::Sizes;
using contract::sizes_of;

namespace {
// bs [3, 4]: a [3, 4, 5], n (bs [3, 4, 2]) with x [3, 4, 2, 6], non-tensor s.
TensorDict shape_grid() {
  TensorDict inner({{"x", at::randn({3, 4, 2, 6})}}, {3, 4, 2});
  return TensorDict({{"a", at::arange(60, at::kFloat).view({3, 4, 5})}, {"n", inner}, {"s", "hi"}}, {3, 4});
}
Sizes nested_batch(const TensorDict& td) { return sizes_of(td.get_tensordict("n").batch_size()); }
}  // namespace

TEMPLATE_LIST_TEST_CASE("unsqueeze and squeeze (case 18)", "[contract][shape]", ContractBackends) {
  TensorDict td = TestType::make(shape_grid());
  TensorDict u = td.unsqueeze(-1);
  CHECK((sizes_of(u.batch_size()) == Sizes{3, 4, 1}));
  CHECK((sizes_of(u.get("a").sizes()) == Sizes{3, 4, 1, 5}));
  CHECK((nested_batch(u) == Sizes{3, 4, 1, 2}));
  CHECK((sizes_of(u.get({"n", "x"}).sizes()) == Sizes{3, 4, 1, 2, 6}));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(u.get("a"), td.get("a")));
  CHECK(u.get_non_tensor("s").value().as_string() == "hi");
  CHECK((sizes_of(td.unsqueeze(0).batch_size()) == Sizes{1, 3, 4}));
  CHECK((sizes_of(td.unsqueeze(-3).get("a").sizes()) == Sizes{1, 3, 4, 5}));
  CHECK((sizes_of(td.unsqueeze(2).get("a").sizes()) == Sizes{3, 4, 1, 5}));

  REQUIRE_THROWS_AS(td.unsqueeze(3), RuntimeError);
  REQUIRE_THROWS_WITH(td.unsqueeze(3),
                      Catch::Contains("unsqueezing is allowed for dims comprised between `-td.batch_dims - 1` "
                                      "and `td.batch_dims` only."));
  REQUIRE_THROWS_AS(td.unsqueeze(-4), RuntimeError);

  CHECK(td.squeeze(0).is_same(td));  // size 3: nothing to squeeze
  CHECK(td.squeeze().is_same(td));
  TensorDict back = u.squeeze(-1);
  CHECK((sizes_of(back.batch_size()) == Sizes{3, 4}));
  CHECK((sizes_of(back.get("a").sizes()) == Sizes{3, 4, 5}));
  CHECK((nested_batch(back) == Sizes{3, 4, 2}));
  TensorDict all = td.unsqueeze(0).unsqueeze(2).squeeze();
  CHECK((sizes_of(all.batch_size()) == Sizes{3, 4}));
  CHECK((sizes_of(all.get({"n", "x"}).sizes()) == Sizes{3, 4, 2, 6}));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(all.get("a"), td.get("a")));
  REQUIRE_THROWS_AS(td.squeeze(2), IndexError);
}

TEMPLATE_LIST_TEST_CASE("view and reshape (case 18)", "[contract][shape]", ContractBackends) {
  TensorDict td = TestType::make(shape_grid());
  TensorDict flat = td.view({-1});
  CHECK(sizes_of(flat.batch_size()) == Sizes{12});
  CHECK((sizes_of(flat.get("a").sizes()) == Sizes{12, 5}));
  CHECK((nested_batch(flat) == Sizes{12, 2}));
  CHECK((sizes_of(flat.get({"n", "x"}).sizes()) == Sizes{12, 2, 6}));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(flat.get("a"), td.get("a")));
  CHECK((at::equal(flat.get("a"), td.get("a").reshape({12, 5}))));
  CHECK((td.view({3, 4}).is_same(td)));
  CHECK((td.view({3, -1}).is_same(td)));
  CHECK((sizes_of(td.view({2, 6}).batch_size()) == Sizes{2, 6}));
  REQUIRE_THROWS_AS(td.view({5, -1}), ShapeError);
  REQUIRE_THROWS_WITH(td.view({5, -1}), Catch::Contains("torch.Size([3, 4])") && Catch::Contains("12 elements"));
  // view of a non-contiguous batch fails like the leaf op; reshape copies instead.
  TensorDict t = td.transpose(0, 1);
  if (!TestType::kLazyStack) {  // a lazy stack's view reads stacked (contiguous) leaves
    REQUIRE_THROWS_AS(t.view({-1}), ShapeError);
    REQUIRE_THROWS_WITH(t.view({-1}), Catch::Contains("torch.Size([4, 3])") && Catch::Contains("use reshape()"));
  }
  TensorDict r = t.reshape({-1});
  CHECK(sizes_of(r.batch_size()) == Sizes{12});
  CHECK((at::equal(r.get("a"), td.get("a").transpose(0, 1).reshape({12, 5}))));
  CHECK((td.reshape({3, 4}).is_same(td)));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(td.reshape({12}).get("a"), td.get("a")));
  REQUIRE_THROWS_AS(td.reshape({7}), ShapeError);
}

TEMPLATE_LIST_TEST_CASE("permute and transpose (case 18)", "[contract][shape]", ContractBackends) {
  TensorDict td = TestType::make(shape_grid());
  TensorDict p = td.permute({1, 0});
  CHECK((sizes_of(p.batch_size()) == Sizes{4, 3}));
  CHECK((sizes_of(p.get("a").sizes()) == Sizes{4, 3, 5}));
  CHECK((nested_batch(p) == Sizes{4, 3, 2}));
  CHECK((sizes_of(p.get({"n", "x"}).sizes()) == Sizes{4, 3, 2, 6}));
  CHECK((at::equal(p.get({"n", "x"}), td.get({"n", "x"}).permute({1, 0, 2, 3}))));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(p.get("a"), td.get("a")));
  CHECK((sizes_of(td.permute({-1, -2}).batch_size()) == Sizes{4, 3}));

  REQUIRE_THROWS_AS(td.permute({0, 0}), ValueError);
  REQUIRE_THROWS_WITH(td.permute({0, 0}),
                      Catch::Contains("Cannot compute the permutation, got dims=[0, 0] but expected a "
                                      "permutation of [0, 1]."));
  // Fewer dims permute the leading ones (v0.14, finding A7); they must be a permutation of those.
  CHECK((sizes_of(td.permute({0}).batch_size()) == Sizes{3, 4}));
  REQUIRE_THROWS_AS(td.permute({1}), ValueError);
  REQUIRE_THROWS_AS(td.permute({0, 2}), ValueError);

  TensorDict t = td.transpose(0, 1);
  CHECK((sizes_of(t.batch_size()) == Sizes{4, 3}));
  CHECK(at::equal(t.get("a"), td.get("a").transpose(0, 1)));
  CHECK((nested_batch(t) == Sizes{4, 3, 2}));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(t.get("a"), td.get("a")));
  CHECK(td.transpose(1, -1).is_same(td));
  REQUIRE_THROWS_AS(td.transpose(0, 2), ValueError);
}

TEMPLATE_LIST_TEST_CASE("expand (case 18)", "[contract][shape]", ContractBackends) {
  TensorDict td = TestType::make(shape_grid());
  TensorDict e = td.expand({2, 3, 4});
  CHECK((sizes_of(e.batch_size()) == Sizes{2, 3, 4}));
  CHECK((sizes_of(e.get("a").sizes()) == Sizes{2, 3, 4, 5}));
  CHECK((nested_batch(e) == Sizes{2, 3, 4, 2}));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(e.get("a"), td.get("a")));
  CHECK(at::equal(e.get("a")[1], td.get("a")));
  CHECK((td.expand({3, 4}).is_same(td)));
  CHECK((sizes_of(td.expand({2, -1, -1}).batch_size()) == Sizes{2, 3, 4}));

  TensorDict one = td.index({at::indexing::Slice(0, 1)});
  TensorDict b = one.expand({5, 4});
  CHECK((sizes_of(b.batch_size()) == Sizes{5, 4}));
  CHECK(at::equal(b.get("a")[4], td.get("a")[0]));

  REQUIRE_THROWS_AS(td.expand({4}), ShapeError);
  REQUIRE_THROWS_WITH(td.expand({4}),
                      Catch::Contains("the number of sizes provided (1) must be greater or equal to the number "
                                      "of dimensions in the TensorDict (2)"));
  REQUIRE_THROWS_AS(td.expand({3, 5}), ShapeError);
  REQUIRE_THROWS_WITH(td.expand({3, 5}), Catch::Contains("Incompatible expanded shape"));
  REQUIRE_THROWS_AS(td.expand({-1, 3, 4}), ShapeError);
}

TEMPLATE_LIST_TEST_CASE("flatten and unflatten", "[contract][shape]", ContractBackends) {
  TensorDict td = TestType::make(shape_grid());
  TensorDict f = td.flatten(0, 1);
  CHECK(sizes_of(f.batch_size()) == Sizes{12});
  CHECK((sizes_of(f.get("a").sizes()) == Sizes{12, 5}));
  CHECK((nested_batch(f) == Sizes{12, 2}));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(f.get("a"), td.get("a")));
  CHECK(at::equal(td.flatten().get("a"), f.get("a")));
  CHECK(td.flatten(1, 1).is_same(td));
  REQUIRE_THROWS_AS(td.flatten(1, 0), ValueError);
  REQUIRE_THROWS_AS(td.flatten(0, 2), IndexError);

  TensorDict u = f.unflatten(0, {3, 4});
  CHECK((sizes_of(u.batch_size()) == Sizes{3, 4}));
  CHECK(at::equal(u.get("a"), td.get("a")));
  CHECK((nested_batch(u) == Sizes{3, 4, 2}));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(u.get("a"), td.get("a")));
  CHECK((sizes_of(f.unflatten(-1, {2, -1}).batch_size()) == Sizes{2, 6}));
  REQUIRE_THROWS_AS(f.unflatten(0, {5, -1}), ShapeError);
  REQUIRE_THROWS_AS(f.unflatten(1, {12}), IndexError);

  // Python: flattening a tensordict without batch dims gives batch [1].
  TensorDict scalar = TestType::make(TensorDict({{"a", at::zeros({2})}}));
  CHECK(sizes_of(scalar.flatten().batch_size()) == Sizes{1});
  CHECK((sizes_of(scalar.flatten().get("a").sizes()) == Sizes{1, 2}));
}

TEMPLATE_LIST_TEST_CASE("shape ops carry non-tensor stacks along", "[contract][shape][non_tensor]",
                        ContractBackends) {
  TensorDict ref({{"a", at::zeros({2, 3})}}, {2, 3});
  ref.set("s", NonTensorData::from_list(json::Value(json::Array{json::Array{"a", "b", "c"}, json::Array{"d", "e", "f"}}), {2, 3}));
  if (!TestType::kNonTensorStacks) {
    // Refused with a typed error rather than stored as something else.
    REQUIRE_THROWS_AS(TestType::make(ref), NotImplementedError);
    return;
  }
  TensorDict td = TestType::make(ref);
  CHECK(td.permute({1, 0}).get_non_tensor("s").tolist().python_str() ==
        "[['a', 'd'], ['b', 'e'], ['c', 'f']]");
  CHECK(td.view({-1}).get_non_tensor("s").tolist().python_str() == "['a', 'b', 'c', 'd', 'e', 'f']");
  CHECK(td.unsqueeze(0).get_non_tensor("s").tolist().python_str() == "[[['a', 'b', 'c'], ['d', 'e', 'f']]]");
  CHECK(td.expand({2, 2, 3}).get_non_tensor("s").tolist().python_str() ==
        "[[['a', 'b', 'c'], ['d', 'e', 'f']], [['a', 'b', 'c'], ['d', 'e', 'f']]]");
}
