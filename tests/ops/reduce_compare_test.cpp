// Comparisons (tensordicts of bools, all/any fast path) and reductions (semantics 1.12, 1.13).

#include "support/catch_torch.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>

using namespace tensordict;

namespace {
// A bool tensor from 0/1 values (LibTorch 1.13's at::tensor has no bool overload).
at::Tensor bools(std::initializer_list<int64_t> values) { return at::tensor(values).to(at::kBool); }
}  // namespace

TEST_CASE("comparisons give tensordicts of bools matching LibTorch", "[ops][compare]") {
  TensorDict a({{"x", at::tensor({1.0f, 2.0f, 3.0f})}, {"n", {{"y", at::tensor({1, 5, 3})}}}}, {3});
  TensorDict b({{"x", at::tensor({1.0f, 0.0f, 4.0f})}, {"n", {{"y", at::tensor({1, 2, 3})}}}}, {3});
  TensorDict eq = a == b;
  CHECK(eq.get("x").scalar_type() == at::kBool);
  CHECK(at::equal(eq.get("x"), bools({1, 0, 0})));
  CHECK(at::equal(TensorDict(a != b).get({"n", "y"}), bools({0, 1, 0})));
  CHECK(at::equal(TensorDict(a < b).get("x"), bools({0, 0, 1})));
  CHECK(at::equal(TensorDict(a >= b).get("x"), bools({1, 1, 0})));
  CHECK(at::equal(a.le(b).get("x"), bools({1, 0, 1})));
  CHECK(at::equal(a.gt(2).get("x"), bools({0, 0, 1})));
  CHECK(at::equal(TensorDict(a == 2).get({"n", "y"}), bools({0, 0, 0})));
  CHECK(at::equal(TensorDict(a > at::tensor({0.0f, 5.0f, 0.0f})).get("x"), bools({1, 0, 1})));
  CHECK_FALSE(eq.is_locked());
}

TEST_CASE("(a == b).all() and any(): equal, different, NaN, aliasing, broadcasting", "[ops][compare]") {
  TensorDict a({{"x", at::randn({4, 3})}, {"n", {{"y", at::arange(4)}}}}, {4});
  CHECK((a == a.clone()).all());  // case 22
  CHECK((a == a).all());
  CHECK_FALSE((a != a.clone()).any());
  TensorDict b = a.clone();
  b.get({"n", "y"})[2].fill_(-1);
  CHECK_FALSE((a == b).all());
  CHECK((a == b).any());
  CHECK((a != b).any());
  CHECK_FALSE((a != b).all());

  // NaN is never equal to itself, whether the leaves alias or not.
  TensorDict nan({{"x", at::full({2}, std::numeric_limits<float>::quiet_NaN())}}, {2});
  CHECK_FALSE((nan == nan).all());
  CHECK_FALSE((nan == nan.clone()).all());
  CHECK((nan != nan).all());

  // Different dtypes or shapes take the general path with LibTorch's promotion/broadcasting.
  TensorDict f({{"x", at::ones({2, 3})}}, {2});
  TensorDict d({{"x", at::ones({2, 3}, at::kDouble)}}, {2});
  CHECK((f == d).all());
  TensorDict bcast({{"x", at::ones({2, 1})}}, {2});
  CHECK((f == bcast).all());
  CHECK(at::equal(TensorDict((f == d).all(0)).get("x"), at::ones({3}, at::kBool)));
}

TEST_CASE("comparison errors: key mismatch, incompatible shapes", "[ops][compare][errors]") {
  TensorDict a({{"a", at::ones({3})}, {"b", at::ones({3})}}, {3});
  REQUIRE_THROWS_AS((a == a.exclude({"a"})).all(), KeyError);  // case 22
  REQUIRE_THROWS_WITH(TensorDict(a == a.exclude({"a"})),
                      Catch::Contains("keys in tensordicts mismatch") && Catch::Contains("'a'"));
  TensorDict wrong({{"a", at::ones({3, 2})}, {"b", at::ones({3, 5})}}, {3});
  TensorDict wrong2({{"a", at::ones({3, 3})}, {"b", at::ones({3, 4})}}, {3});
  REQUIRE_THROWS_WITH((wrong == wrong2).all(), Catch::Contains("'a'"));
}

TEST_CASE("isnan, isfinite, isposinf, isneginf, isreal", "[ops][compare]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TensorDict td({{"x", at::tensor({1.0f, nan, inf, -inf})}}, {4});
  CHECK(at::equal(td.isnan().get("x"), bools({0, 1, 0, 0})));
  CHECK(at::equal(td.isfinite().get("x"), bools({1, 0, 0, 0})));
  CHECK(at::equal(td.isposinf().get("x"), bools({0, 0, 1, 0})));
  CHECK(at::equal(td.isneginf().get("x"), bools({0, 0, 0, 1})));
  CHECK(at::equal(td.isreal().get("x"), at::ones({4}, at::kBool)));
}

TEST_CASE("reductions: no dim, a batch dim, keepdim (case 23)", "[ops][reduce]") {
  at::manual_seed(3);
  at::Tensor a = at::randn({3, 4, 5});
  TensorDict td({{"a", a}, {"n", {{"b", at::randn({3, 4})}}}}, {3, 4});
  TensorDict s = td.sum();
  CHECK(s.batch_size().empty());
  CHECK(s.get_tensordict("n").batch_size().empty());
  CHECK(at::equal(s.get("a"), a.sum()));
  TensorDict s1 = td.sum(1);
  CHECK((s1.batch_size() == c10::IntArrayRef{3}));
  CHECK(at::equal(s1.get("a"), a.sum(at::IntArrayRef{1})));
  CHECK((s1.get({"n", "b"}).sizes() == c10::IntArrayRef{3}));
  TensorDict k = td.sum(1, /*keepdim=*/true);
  CHECK((k.batch_size() == c10::IntArrayRef{3, 1}));
  CHECK(at::equal(td.mean(-2).get("a"), a.mean(at::IntArrayRef{0})));
  CHECK(at::equal(td.prod(0).get("a"), a.prod(0)));
  CHECK(at::equal(td.std().get("a"), a.std()));
  CHECK(at::equal(td.var(0, false, false).get("a"), a.var(at::IntArrayRef{0}, false, false)));
  CHECK(at::equal(td.norm().get("a"), a.norm()));
  at::Tensor with_nan = a.clone();
  with_nan[0][0][0] = std::numeric_limits<float>::quiet_NaN();
  TensorDict tn({{"a", with_nan}}, {3, 4});
  CHECK(at::equal(tn.nansum().get("a"), with_nan.nansum()));
  CHECK(at::equal(tn.nanmean(0).get("a"), with_nan.nanmean(at::IntArrayRef{0})));
  REQUIRE_THROWS_AS(td.sum(2), RuntimeError);
  REQUIRE_THROWS_WITH(td.all(2), Catch::Contains("dim must be greater than or equal to -tensordict.batch_dims"));
}

TEST_CASE("reductions with reduce: one tensor over all leaves", "[ops][reduce]") {
  at::Tensor a = at::arange(60, at::kFloat).reshape({3, 4, 5});
  at::Tensor b = at::arange(12, at::kFloat).reshape({3, 4});
  TensorDict td({{"a", a}, {"n", {{"b", b}}}}, {3, 4});
  at::Tensor total = td.sum(reduce);
  CHECK(total.dim() == 0);
  CHECK(total.item<float>() == a.sum().item<float>() + b.sum().item<float>());
  at::Tensor joined = at::cat({a.reshape(-1), b.reshape(-1)});
  CHECK(at::equal(td.mean(reduce), joined.mean()));
  CHECK(at::equal(td.std(reduce), joined.std()));
  at::Tensor by_dim = TensorDict({{"a", a}}, {3, 4}).sum(reduce, 1);
  CHECK((by_dim.sizes() == c10::IntArrayRef{3, 5}));
  CHECK(at::equal(by_dim, a.sum(at::IntArrayRef{1})));
  at::Tensor both = td.sum(reduce, 1);
  CHECK((both.sizes() == c10::IntArrayRef{3, 6}));
  REQUIRE_THROWS_AS(TensorDict().sum(reduce), ValueError);
}

TEST_CASE("reductions over the feature dims keep every level's batch size (dim feature)", "[ops][reduce]") {
  // Python's docstring example: batch [3, 4]; a [3, 4, 5]; b has batch [3, 4, 5] with c [3, 4, 5, 6]
  // and d [3, 4, 5], so c is reduced over its last dim and d (no feature dim) over a unit dim.
  at::manual_seed(5);
  at::Tensor a = at::randn({3, 4, 5});
  at::Tensor c = at::randn({3, 4, 5, 6});
  at::Tensor d = at::randn({3, 4, 5});
  TensorDict td({{"a", a}, {"b", TensorDict({{"c", c}, {"d", d}}, {3, 4, 5})}}, {3, 4});
  TensorDict m = td.mean(feature);
  CHECK((m.batch_size() == c10::IntArrayRef{3, 4}));
  CHECK((m.get_tensordict("b").batch_size() == c10::IntArrayRef{3, 4, 5}));
  CHECK(at::equal(m.get("a"), a.mean(at::IntArrayRef{-1})));
  CHECK(at::equal(m.get({"b", "c"}), c.mean(at::IntArrayRef{-1})));
  CHECK(at::equal(m.get({"b", "d"}), d));
  at::Tensor w = at::randn({3, 4, 2, 5});
  TensorDict two({{"w", w}}, {3, 4});
  CHECK(at::allclose(two.sum(feature).get("w"), w.sum(at::IntArrayRef{2, 3})));
  CHECK(at::equal(two.prod(feature).get("w"), w.flatten(2).prod(-1)));
  CHECK(at::equal(two.norm(feature).get("w"), at::norm(w.flatten(2), 2, {-1})));
  CHECK(at::equal(two.std(feature).get("w"), w.flatten(2).std(-1)));
  CHECK(at::equal(two.var(feature, /*unbiased=*/false).get("w"), w.flatten(2).var(-1, false)));
  at::Tensor with_nan = w.clone();
  with_nan[0][0][0][0] = std::numeric_limits<float>::quiet_NaN();
  TensorDict tn({{"w", with_nan}}, {3, 4});
  CHECK(at::equal(tn.nansum(feature).get("w"), with_nan.flatten(2).nansum(-1)));
  CHECK(at::equal(tn.nanmean(feature).get("w"), with_nan.flatten(2).nanmean(-1)));
}

TEST_CASE("reduce over the feature dims gives one tensor of the batch size", "[ops][reduce]") {
  // Python's example: every leaf all ones, batch [3, 4] -> mean(reduce=True, dim="feature") is
  // ones [3, 4]; the sum counts every feature element of every leaf.
  TensorDict ones({{"a", at::ones({3, 4, 5})}, {"b", TensorDict({{"c", at::ones({3, 4, 5})}}, {3, 4, 5})}}, {3, 4});
  CHECK(at::equal(ones.mean(reduce, feature), at::ones({3, 4})));
  CHECK(at::equal(ones.sum(reduce, feature), at::full({3, 4}, 10.0)));
  at::Tensor a = at::arange(60, at::kFloat).reshape({3, 4, 5});
  at::Tensor b = at::arange(12, at::kFloat).reshape({3, 4});
  TensorDict td({{"a", a}, {"n", {{"b", b}}}}, {3, 4});
  at::Tensor joined = at::cat({a, b.unsqueeze(-1)}, -1);
  CHECK(at::equal(td.sum(reduce, feature), joined.sum(-1)));
  CHECK(at::equal(td.var(reduce, feature), joined.var(-1)));
  CHECK(at::equal(td.std(reduce, feature, /*unbiased=*/false), joined.std(-1, false)));
  REQUIRE_THROWS_AS(TensorDict({}, {3}).mean(reduce, feature), ValueError);
}

TEST_CASE("all and any without and with a dim", "[ops][reduce]") {
  TensorDict td({{"x", bools({1, 0})}, {"y", at::tensor({1, 1})}}, {2});
  CHECK_FALSE(td.all());
  CHECK(td.any());
  CHECK(TensorDict({{"y", at::ones({2})}}, {2}).all());
  CHECK(TensorDict().all());
  CHECK_FALSE(TensorDict().any());
  TensorDict per = td.all(0);
  CHECK(per.batch_size().empty());
  CHECK_FALSE(per.get("x").item<bool>());
  CHECK(per.get("y").item<bool>());
}
