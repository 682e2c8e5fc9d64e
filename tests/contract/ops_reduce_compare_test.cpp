// Contract: comparisons (tensordicts of bools, the all/any fast path) and reductions
// (semantics 1.12, 1.13) on every backend, with v0.14's reduce-along-a-dim rule and the
// reductions v0.14 adds (amax, amin, max, min, logsumexp, quantile).

#include "support/catch_torch.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;

namespace {
// A bool tensor from 0/1 values (LibTorch 1.13's at::tensor has no bool overload).
using contract::bools;
}  // namespace

TEMPLATE_LIST_TEST_CASE("comparisons give tensordicts of bools matching LibTorch", "[ops][compare]", ContractBackends) {
  TensorDict a = TestType::make(TensorDict({{"x", at::tensor({1.0f, 2.0f, 3.0f})}, {"n", {{"y", at::tensor({1, 5, 3})}}}}, {3}));
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

TEMPLATE_LIST_TEST_CASE("(a == b).all() and any(): equal, different, NaN, aliasing, broadcasting", "[ops][compare]", ContractBackends) {
  TensorDict a = TestType::make(TensorDict({{"x", at::randn({4, 3})}, {"n", {{"y", at::arange(4)}}}}, {4}));
  CHECK((a == a.clone()).all());  // case 22
  CHECK((a == a).all());
  CHECK_FALSE((a != a.clone()).any());
  TensorDict b = a.clone();
  at::Tensor y = b.get({"n", "y"});
  y[2].fill_(-1);
  b.set_({"n", "y"}, y);
  CHECK_FALSE((a == b).all());
  CHECK((a == b).any());
  CHECK((a != b).any());
  CHECK_FALSE((a != b).all());

  // NaN is never equal to itself, whether the leaves alias or not.
  TensorDict nan = TestType::make(TensorDict({{"x", at::full({2}, std::numeric_limits<float>::quiet_NaN())}}, {2}));
  CHECK_FALSE((nan == nan).all());
  CHECK_FALSE((nan == nan.clone()).all());
  CHECK((nan != nan).all());

  // Different dtypes or shapes take the general path with LibTorch's promotion/broadcasting.
  TensorDict f = TestType::make(TensorDict({{"x", at::ones({2, 3})}}, {2}));
  TensorDict d({{"x", at::ones({2, 3}, at::kDouble)}}, {2});
  CHECK((f == d).all());
  TensorDict bcast({{"x", at::ones({2, 1})}}, {2});
  CHECK((f == bcast).all());
  CHECK(at::equal(TensorDict((f == d).all(0)).get("x"), at::ones({3}, at::kBool)));
}

TEMPLATE_LIST_TEST_CASE("comparison errors: key mismatch, incompatible shapes", "[ops][compare][errors]", ContractBackends) {
  TensorDict a = TestType::make(TensorDict({{"a", at::ones({3})}, {"b", at::ones({3})}}, {3}));
  REQUIRE_THROWS_AS((a == a.exclude({"a"})).all(), KeyError);  // case 22
  REQUIRE_THROWS_WITH(TensorDict(a == a.exclude({"a"})),
                      Catch::Contains("keys in tensordicts mismatch") && Catch::Contains("'a'"));
  TensorDict wrong = TestType::make(TensorDict({{"a", at::ones({3, 2})}, {"b", at::ones({3, 5})}}, {3}));
  TensorDict wrong2({{"a", at::ones({3, 3})}, {"b", at::ones({3, 4})}}, {3});
  REQUIRE_THROWS_WITH((wrong == wrong2).all(), Catch::Contains("'a'"));
}

TEMPLATE_LIST_TEST_CASE("isnan, isfinite, isposinf, isneginf, isreal", "[ops][compare]", ContractBackends) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TensorDict td = TestType::make(TensorDict({{"x", at::tensor({1.0f, nan, inf, -inf})}}, {4}));
  CHECK(at::equal(td.isnan().get("x"), bools({0, 1, 0, 0})));
  CHECK(at::equal(td.isfinite().get("x"), bools({1, 0, 0, 0})));
  CHECK(at::equal(td.isposinf().get("x"), bools({0, 0, 1, 0})));
  CHECK(at::equal(td.isneginf().get("x"), bools({0, 0, 0, 1})));
  CHECK(at::equal(td.isreal().get("x"), at::ones({4}, at::kBool)));
}

TEMPLATE_LIST_TEST_CASE("reductions: no dim, a batch dim, keepdim (case 23)", "[ops][reduce]", ContractBackends) {
  at::manual_seed(3);
  at::Tensor a = at::randn({3, 4, 5});
  TensorDict td = TestType::make(TensorDict({{"a", a}, {"n", {{"b", at::randn({3, 4})}}}}, {3, 4}));
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
  TensorDict tn = TestType::make(TensorDict({{"a", with_nan}}, {3, 4}));
  CHECK(at::equal(tn.nansum().get("a"), with_nan.nansum()));
  CHECK(at::equal(tn.nanmean(0).get("a"), with_nan.nanmean(at::IntArrayRef{0})));
  REQUIRE_THROWS_AS(td.sum(2), IndexError);  // Python's kind for a reduction dim (finding A9)
  REQUIRE_THROWS_WITH(td.all(2), Catch::Contains("dim must be greater than or equal to -tensordict.batch_dims"));
}

TEMPLATE_LIST_TEST_CASE("reductions with reduce: one tensor over all leaves", "[ops][reduce]", ContractBackends) {
  at::Tensor a = at::arange(60, at::kFloat).reshape({3, 4, 5});
  at::Tensor b = at::arange(12, at::kFloat).reshape({3, 4});
  TensorDict td = TestType::make(TensorDict({{"a", a}, {"n", {{"b", b}}}}, {3, 4}));
  at::Tensor total = td.sum(reduce);
  CHECK(total.dim() == 0);
  CHECK(total.item<float>() == a.sum().item<float>() + b.sum().item<float>());
  at::Tensor joined = at::cat({a.reshape(-1), b.reshape(-1)});
  CHECK(at::equal(td.mean(reduce), joined.mean()));
  CHECK(at::equal(td.std(reduce), joined.std()));
  // Along a dim, v0.14 concatenates the leaves along it and reduces there (finding A1).
  at::Tensor by_dim = TestType::make(TensorDict({{"a", a}, {"c", a * 2}}, {3, 4})).sum(reduce, 1);
  CHECK((by_dim.sizes() == c10::IntArrayRef{3, 5}));
  CHECK(at::equal(by_dim, at::cat({a, a * 2}, 1).sum(at::IntArrayRef{1})));
  CHECK(at::equal(TestType::make(TensorDict({{"a", a}, {"c", a}}, {3, 4})).mean(reduce, 0),
                  at::cat({a, a}, 0).mean(at::IntArrayRef{0})));
  // Leaves that cannot be concatenated along the dim name the operation.
  REQUIRE_THROWS_WITH(td.sum(reduce, 1), Catch::Contains("sum(reduce)"));
  REQUIRE_THROWS_AS(TensorDict().sum(reduce), ValueError);
}

TEMPLATE_LIST_TEST_CASE("reductions over the feature dims keep every level's batch size (dim feature)", "[ops][reduce]", ContractBackends) {
  // Python's docstring example: batch [3, 4]; a [3, 4, 5]; b has batch [3, 4, 5] with c [3, 4, 5, 6]
  // and d [3, 4, 5], so c is reduced over its last dim and d (no feature dim) over a unit dim.
  at::manual_seed(5);
  at::Tensor a = at::randn({3, 4, 5});
  at::Tensor c = at::randn({3, 4, 5, 6});
  at::Tensor d = at::randn({3, 4, 5});
  TensorDict td = TestType::make(TensorDict({{"a", a}, {"b", TensorDict({{"c", c}, {"d", d}}, {3, 4, 5})}}, {3, 4}));
  TensorDict m = td.mean(feature);
  CHECK((m.batch_size() == c10::IntArrayRef{3, 4}));
  CHECK((m.get_tensordict("b").batch_size() == c10::IntArrayRef{3, 4, 5}));
  CHECK(at::equal(m.get("a"), a.mean(at::IntArrayRef{-1})));
  CHECK(at::equal(m.get({"b", "c"}), c.mean(at::IntArrayRef{-1})));
  CHECK(at::equal(m.get({"b", "d"}), d));
  at::Tensor w = at::randn({3, 4, 2, 5});
  TensorDict two = TestType::make(TensorDict({{"w", w}}, {3, 4}));
  CHECK(at::allclose(two.sum(feature).get("w"), w.sum(at::IntArrayRef{2, 3})));
  CHECK(at::equal(two.prod(feature).get("w"), w.flatten(2).prod(-1)));
  CHECK(at::equal(two.norm(feature).get("w"), at::norm(w.flatten(2), 2, {-1})));
  CHECK(at::equal(two.std(feature).get("w"), w.flatten(2).std(-1)));
  CHECK(at::equal(two.var(feature, /*unbiased=*/false).get("w"), w.flatten(2).var(-1, false)));
  at::Tensor with_nan = w.clone();
  with_nan[0][0][0][0] = std::numeric_limits<float>::quiet_NaN();
  TensorDict tn = TestType::make(TensorDict({{"w", with_nan}}, {3, 4}));
  CHECK(at::equal(tn.nansum(feature).get("w"), with_nan.flatten(2).nansum(-1)));
  CHECK(at::equal(tn.nanmean(feature).get("w"), with_nan.flatten(2).nanmean(-1)));
}

TEMPLATE_LIST_TEST_CASE("reduce over the feature dims gives one tensor of the batch size", "[ops][reduce]", ContractBackends) {
  // Python's example: every leaf all ones, batch [3, 4] -> mean(reduce=True, dim="feature") is
  // ones [3, 4]; the sum counts every feature element of every leaf.
  TensorDict ones = TestType::make(
      TensorDict({{"a", at::ones({3, 4, 5})}, {"b", TensorDict({{"c", at::ones({3, 4, 5})}}, {3, 4, 5})}}, {3, 4}));
  CHECK(at::equal(ones.mean(reduce, feature), at::ones({3, 4})));
  CHECK(at::equal(ones.sum(reduce, feature), at::full({3, 4}, 10.0)));
  at::Tensor a = at::arange(60, at::kFloat).reshape({3, 4, 5});
  at::Tensor b = at::arange(12, at::kFloat).reshape({3, 4});
  TensorDict td = TestType::make(TensorDict({{"a", a}, {"n", {{"b", b}}}}, {3, 4}));
  at::Tensor joined = at::cat({a, b.unsqueeze(-1)}, -1);
  CHECK(at::equal(td.sum(reduce, feature), joined.sum(-1)));
  CHECK(at::equal(td.var(reduce, feature), joined.var(-1)));
  CHECK(at::equal(td.std(reduce, feature, /*unbiased=*/false), joined.std(-1, false)));
  REQUIRE_THROWS_AS(TensorDict({}, {3}).mean(reduce, feature), ValueError);
}

TEMPLATE_LIST_TEST_CASE("all and any without and with a dim", "[ops][reduce]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"x", bools({1, 0})}, {"y", at::tensor({1, 1})}}, {2}));
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

TEMPLATE_LIST_TEST_CASE("amax, amin, max and min: values, indices, reduce and feature forms",
                        "[ops][reduce][python]", ContractBackends) {
  at::manual_seed(11);
  const at::Tensor a = at::randn({3, 4, 5});
  const at::Tensor b = at::randn({3, 4});
  TensorDict td = TestType::make(TensorDict({{"a", a}, {"n", {{"b", b}}}}, {3, 4}));
  CHECK(at::equal(td.amax().get("a"), a.amax(c10::IntArrayRef{})));
  CHECK(at::equal(td.amin(1).get({"n", "b"}), b.amin(1)));
  CHECK((td.amax(0, /*keepdim=*/true).batch_size() == c10::IntArrayRef{1, 4}));
  CHECK(at::equal(td.amax(feature).get("a"), a.amax(-1)));
  CHECK(at::equal(td.amax(reduce), at::cat({a.reshape(-1), b.reshape(-1)}).amax(c10::IntArrayRef{})));
  CHECK(at::equal(td.max().get("a"), a.max()));
  CHECK(td.max().batch_size().empty());
  CHECK(at::equal(td.min(reduce), at::cat({a.reshape(-1), b.reshape(-1)}).min()));
  // With a dim: the values and their indices, each a tensordict of the reduced batch (Python's
  // named tuple of two tensordicts).
  ValuesIndices m = td.max(1);
  CHECK((m.values.batch_size() == c10::IntArrayRef{3}));
  CHECK((m.indices.batch_size() == c10::IntArrayRef{3}));
  CHECK(at::equal(m.values.get("a"), std::get<0>(a.max(1))));
  CHECK(at::equal(m.indices.get({"n", "b"}), std::get<1>(b.max(1))));
  CHECK(m.indices.get("a").scalar_type() == at::kLong);
  ValuesIndices low = td.min(-1, /*keepdim=*/true);
  CHECK((low.values.batch_size() == c10::IntArrayRef{3, 1}));
  CHECK(at::equal(low.values.get("a"), std::get<0>(a.min(1, true))));
  REQUIRE_THROWS_AS(td.max(2), IndexError);
}

TEMPLATE_LIST_TEST_CASE("logsumexp reduces every batch dim by default, a given one otherwise",
                        "[ops][reduce][python]", ContractBackends) {
  at::manual_seed(12);
  const at::Tensor a = at::randn({3, 4, 5});
  TensorDict td = TestType::make(TensorDict({{"a", a}}, {3, 4}));
  TensorDict all = td.logsumexp();
  CHECK(all.batch_size().empty());
  CHECK(at::allclose(all.get("a"), at::logsumexp(a, at::IntArrayRef{0, 1})));  // the feature dim stays: [5]
  TensorDict one = td.logsumexp(-1, /*keepdim=*/true);
  CHECK((one.batch_size() == c10::IntArrayRef{3, 1}));
  CHECK(at::allclose(one.get("a"), at::logsumexp(a, at::IntArrayRef{1}, true)));
  REQUIRE_THROWS_AS(td.logsumexp(2), ValueError);
  REQUIRE_THROWS_WITH(td.logsumexp(2), Catch::Contains("incompatible with a tensordict with batch_size"));
}

TEMPLATE_LIST_TEST_CASE("quantile over a dim, all elements, the feature dims and with reduce",
                        "[ops][reduce][python]", ContractBackends) {
  const at::Tensor a = at::arange(60, at::kFloat).reshape({3, 4, 5});
  TensorDict td = TestType::make(TensorDict({{"a", a}}, {3, 4}));
  CHECK(at::equal(td.quantile(0.5).get("a"), at::quantile(a, 0.5)));
  TensorDict q0 = td.quantile(0.25, 0);
  CHECK((q0.batch_size() == c10::IntArrayRef{4}));
  CHECK(at::equal(q0.get("a"), at::quantile(a, 0.25, 0)));
  CHECK(at::equal(td.quantile(feature, 0.5, "lower").get("a"), at::quantile(a, 0.5, -1, false, "lower")));
  CHECK(at::equal(td.quantile(reduce, 0.9), at::quantile(a.reshape(-1), 0.9)));
  CHECK(at::equal(td.quantile(reduce, feature, 0.5), at::quantile(a.flatten(2), 0.5, -1)));
  REQUIRE_THROWS_AS(td.quantile(1.5), ValueError);
  REQUIRE_THROWS_AS(td.quantile(0.5, 0, false, "cubic"), RuntimeError);
}
