// Contract: pointwise math and arithmetic (semantics 1.12) on every backend. Results equal
// LibTorch's per-leaf results bit for bit (dtype included); key matching and `default`, tensor
// operands left-aligned to the batch dims; in-place forms reach the storage (the proving
// backend only sees writes made through the backend interface); locks.

#include "support/catch_torch.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "contract/backends.h"

using namespace tensordict;
using contract::ContractBackends;

namespace {

TensorDict make_td() {
  at::manual_seed(1);
  return TensorDict({{"a", at::rand({3, 4}) + 0.5},
                     {"n", {{"b", at::rand({3}) + 0.5}, {"c", at::rand({3, 2}, at::kDouble) + 0.5}}}},
                    {3});
}

// Every leaf of `td` equals fn(leaf of `ref`) exactly, dtype included.
template <typename Fn>
void check_leafwise(const TensorDict& td, const TensorDict& ref, Fn fn) {
  auto keys = ref.keys(true, true);
  REQUIRE(td.keys(true, true) == keys);
  for (const auto& k : keys) {
    at::Tensor expected = fn(ref.get(k));
    at::Tensor got = td.get(k);
    INFO("key " << k.repr());
    CHECK(got.scalar_type() == expected.scalar_type());
    CHECK(at::equal(got, expected));
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("unary math matches LibTorch leaf by leaf, out of place and in place", "[ops][pointwise]", ContractBackends) {
  TensorDict td = TestType::make(make_td());
  check_leafwise(td.abs(), td, [](const at::Tensor& t) { return t.abs(); });
  check_leafwise(td.sqrt(), td, [](const at::Tensor& t) { return t.sqrt(); });
  check_leafwise(td.log(), td, [](const at::Tensor& t) { return t.log(); });
  check_leafwise(td.sigmoid(), td, [](const at::Tensor& t) { return t.sigmoid(); });
  check_leafwise(td.sign(), td, [](const at::Tensor& t) { return t.sign(); });
  check_leafwise(td.frac(), td, [](const at::Tensor& t) { return t.frac(); });
  check_leafwise(td.lgamma(), td, [](const at::Tensor& t) { return t.lgamma(); });
  check_leafwise(td.reciprocal(), td, [](const at::Tensor& t) { return t.reciprocal(); });
  check_leafwise(td.clamp(0.7, 0.9), td, [](const at::Tensor& t) { return t.clamp(0.7, 0.9); });
  check_leafwise(td.clamp_min(0.8), td, [](const at::Tensor& t) { return t.clamp_min(0.8); });
  check_leafwise(td.clamp_max(0.8), td, [](const at::Tensor& t) { return t.clamp_max(0.8); });
  check_leafwise(td.pow(2), td, [](const at::Tensor& t) { return t.pow(2); });

  TensorDict ref = td.clone();
  TensorDict& same = td.exp_();
  CHECK(same.is_same(td));
  check_leafwise(td, ref, [](const at::Tensor& t) { return t.exp(); });
  td.trunc_();
  check_leafwise(td, ref, [](const at::Tensor& t) { return t.exp().trunc(); });
}

TEMPLATE_LIST_TEST_CASE("unary math on integer leaves follows LibTorch promotion - in-place errors name the key",
          "[ops][pointwise][errors]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"i", at::arange(3)}, {"f", at::ones({3})}}, {3}));
  check_leafwise(td.sqrt(), td, [](const at::Tensor& t) { return t.sqrt(); });
  CHECK(td.sqrt().get("i").scalar_type() == at::kFloat);
  REQUIRE_THROWS_AS(td.sqrt_(), RuntimeError);
  REQUIRE_THROWS_WITH(TestType::make(TensorDict({{"i", at::arange(3)}}, {3})).sqrt_(),
                      Catch::Contains("sqrt_") && Catch::Contains("'i'"));
  REQUIRE_THROWS_AS(td.clamp(std::nullopt, std::nullopt), ValueError);
}

TEMPLATE_LIST_TEST_CASE("pointwise results keep the lock - in-place math is allowed on locked tensordicts", "[ops][pointwise][lock]", ContractBackends) {
  TensorDict td = TestType::make(make_td());
  td.lock_();
  CHECK(td.neg().is_locked());
  CHECK((td + 1).is_locked());
  TensorDict before = td.clone();
  td.add_(1);
  check_leafwise(td, before, [](const at::Tensor& t) { return t + 1; });
  CHECK_FALSE(td.clone().is_locked());
}

TEMPLATE_LIST_TEST_CASE("scalar arithmetic gives exactly LibTorch's scalar results and dtypes", "[ops][arithmetic]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"f", at::randn({4, 3})},
                                             {"d", at::randn({4}, at::kDouble)},
                                             {"h", at::randn({4, 2}).to(at::kHalf)},
                                             {"i", at::arange(4)}},
                                            {4}));
  for (double s : {0.5, 0.1, 3.0, -1.7e-3}) {
    INFO("scalar " << s);
    check_leafwise(td * s, td, [&](const at::Tensor& t) { return t * s; });
    check_leafwise(td + s, td, [&](const at::Tensor& t) { return t + s; });
    check_leafwise(td - s, td, [&](const at::Tensor& t) { return t - s; });
    check_leafwise(td / s, td, [&](const at::Tensor& t) { return t / s; });
    check_leafwise(td.add(s, 2), td, [&](const at::Tensor& t) { return at::add(t, s, 2); });
    check_leafwise(s - td, td, [&](const at::Tensor& t) { return at::rsub(t, s); });
  }
  check_leafwise(td * 2, td, [](const at::Tensor& t) { return t * 2; });
  CHECK(td.mul(2).get("i").scalar_type() == at::kLong);
  CHECK(td.mul(0.5).get("i").scalar_type() == at::kFloat);
  CHECK(td.mul(0.5).get("h").scalar_type() == at::kHalf);
  check_leafwise(2.0 / td, td, [](const at::Tensor& t) { return t.reciprocal() * 2.0; });
  TensorDict flags = TestType::make(TensorDict({{"b", at::ones({4}, at::kBool)}}, {4}));
  check_leafwise(flags * 0.5, flags, [](const at::Tensor& t) { return t * 0.5; });
  check_leafwise(flags + 1, flags, [](const at::Tensor& t) { return t + 1; });
}

TEMPLATE_LIST_TEST_CASE("in-place scalar arithmetic equals LibTorch's in-place ops", "[ops][arithmetic]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"f", at::randn({4, 3})}, {"i", at::arange(4)}}, {4}));
  TensorDict ref = td.clone();
  td.mul_(3);
  td.add_(1, 2);
  check_leafwise(td, ref, [](const at::Tensor& t) { return t.mul(3).add(1, 2); });
  TensorDict floats = TestType::make(TensorDict({{"f", at::randn({4, 3})}, {"g", {{"h", at::randn({4}, at::kDouble)}}}}, {4}));
  TensorDict fref = floats.clone();
  floats /= 0.3;
  floats -= 0.2;
  check_leafwise(floats, fref, [](const at::Tensor& t) { return t.div(0.3).sub(0.2); });
  // A float result cannot be written into an integer leaf.
  REQUIRE_THROWS_WITH(TestType::make(TensorDict({{"i", at::arange(4)}}, {4})).mul_(0.5),
                      Catch::Contains("mul_") && Catch::Contains("'i'"));
}

TEMPLATE_LIST_TEST_CASE("td op td at one batch size has the first operand's structure", "[ops][arithmetic]",
                        ContractBackends) {
  TensorDict a = TestType::make(TensorDict({{"x", at::ones({3, 4})},
                                            {"n", TensorDict({{"y", at::ones({3, 2})}, {"z", at::ones({3, 2, 5})}}, {3, 2})},
                                            {"s", "first"},
                                            {"e", TensorDict({}, {3})}},
                                           {3}));
  // The same keys, inserted in another order at every level.
  TensorDict b({{"e", TensorDict({}, {3})},
                {"s", "second"},
                {"n", TensorDict({{"z", at::full({3, 2, 5}, 2.0)}, {"y", at::full({3, 2}, 2.0)}}, {3, 2})},
                {"x", at::full({3, 4}, 2.0)}},
               {3});
  auto top_keys = [](const TensorDict& td) {
    std::vector<std::string> out;
    for (const NestedKey& k : td.keys()) out.push_back(k.join("."));
    return out;
  };
  // The first operand's order (a backend may list its keys in its own order), less the empty level.
  std::vector<std::string> expected = top_keys(a);
  REQUIRE(expected.size() == 4);
  expected.erase(std::find(expected.begin(), expected.end(), "e"));
  TensorDict sum = a + b;
  CHECK(top_keys(sum) == expected);
  CHECK((sum.get_tensordict("n").batch_size().vec() == std::vector<int64_t>{3, 2}));
  CHECK(top_keys(sum.get_tensordict("n")) == top_keys(a.get_tensordict("n")));
  CHECK(at::equal(sum.get({"n", "z"}), at::full({3, 2, 5}, 3.0)));
  CHECK(at::equal(sum.get("x"), at::full({3, 4}, 3.0)));
  CHECK(sum.get_non_tensor("s").value().as_string() == "first");
  // Comparisons keep empty levels (Python's filter_empty=False there).
  TensorDict eq = a == b;
  CHECK(top_keys(eq) == top_keys(a));
  CHECK_FALSE(eq.get("x").any().item<bool>());
}

TEMPLATE_LIST_TEST_CASE("td op td matches keys - default none raises, intersection and values fill", "[ops][arithmetic]", ContractBackends) {
  TensorDict a = TestType::make(TensorDict({{"x", at::ones({3, 4})}, {"y", at::ones({3})}}, {3}));
  TensorDict b({{"y", at::full({3}, 2.0)}, {"x", at::full({3, 4}, 3.0)}}, {3});
  TensorDict sum = a + b;
  CHECK(at::equal(sum.get("x"), at::full({3, 4}, 4.0)));
  CHECK(at::equal(sum.get("y"), at::full({3}, 3.0)));
  CHECK(at::equal(a.add(b, 2).get("x"), at::full({3, 4}, 7.0)));
  CHECK(at::equal(a.sub(b).get("y"), at::full({3}, -1.0)));
  CHECK(at::equal((a * b).get("x"), at::full({3, 4}, 3.0)));
  CHECK(at::equal((a / b).get("y"), at::full({3}, 0.5)));

  TensorDict missing({{"x", at::ones({3, 4})}, {"z", at::ones({3})}}, {3});
  REQUIRE_THROWS_AS(a.add(missing), KeyError);
  REQUIRE_THROWS_WITH(a + missing, Catch::Contains("keys in tensordicts mismatch") && Catch::Contains("'y'"));
  REQUIRE_THROWS_WITH(a.add(b.exclude({"y"})), Catch::Contains("'y'"));

  TensorDict inter = a.add(missing, 1, "intersection");
  CHECK(inter.keys() == std::vector<NestedKey>{"x"});
  CHECK(at::equal(inter.get("x"), at::full({3, 4}, 2.0)));

  TensorDict uni = a.add(missing, 1, 0);
  CHECK(uni.keys().size() == 3);
  CHECK(at::equal(uni.get("y"), at::ones({3})));
  CHECK(at::equal(uni.get("z"), at::ones({3})));
  REQUIRE_THROWS_AS(a.add(b, 1, "union"), ValueError);
}

TEMPLATE_LIST_TEST_CASE("td op td errors: leaf shapes, nested kinds, batch sizes", "[ops][arithmetic][errors]", ContractBackends) {
  TensorDict a = TestType::make(TensorDict({{"x", at::ones({3, 4})}}, {3}));
  TensorDict bad_shape({{"x", at::ones({3, 5})}}, {3});
  REQUIRE_THROWS_AS(a + bad_shape, RuntimeError);
  REQUIRE_THROWS_WITH(a + bad_shape, Catch::Contains("add") && Catch::Contains("'x'"));
  TensorDict nested({{"x", {{"y", at::ones({3})}}}}, {3});
  REQUIRE_THROWS_AS(a + nested, TypeError);
  TensorDict other_batch({{"x", at::ones({2, 4})}}, {2});
  REQUIRE_THROWS_AS(a + other_batch, ShapeError);
  REQUIRE_THROWS_WITH(a + other_batch, Catch::Contains("torch.Size([3])") && Catch::Contains("torch.Size([2])"));
  // In place: the destination's dtype is kept, shapes must fit.
  TensorDict ints = TestType::make(TensorDict({{"x", at::zeros({3, 4}, at::kLong)}}, {3}));
  REQUIRE_THROWS_WITH(ints.add_(TensorDict({{"x", at::ones({3, 4})}}, {3})), Catch::Contains("'x'"));
}

TEMPLATE_LIST_TEST_CASE("td op td broadcasts batch sizes and recurses into nested tensordicts", "[ops][arithmetic]", ContractBackends) {
  TensorDict a = TestType::make(TensorDict({{"x", at::ones({3, 4})}, {"n", {{"y", at::ones({3, 2})}}}}, {3}));
  TensorDict b({{"x", at::ones({1, 4})}, {"n", {{"y", at::full({1, 2}, 2.0)}}}}, {1});
  TensorDict r = a * b;
  CHECK((r.batch_size() == c10::IntArrayRef{3}));
  CHECK((r.get_tensordict("n").batch_size() == c10::IntArrayRef{3}));
  CHECK(at::equal(r.get({"n", "y"}), at::full({3, 2}, 2.0)));
  a.mul_(b);
  CHECK(at::equal(a.get({"n", "y"}), at::full({3, 2}, 2.0)));
}

TEMPLATE_LIST_TEST_CASE("td op tensor left-aligns the tensor to the batch dims (case 21)", "[ops][arithmetic]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::ones({3, 4})}, {"b", at::ones({3})}}, {3}));
  at::Tensor scale = at::tensor({1.0f, 2.0f, 3.0f});
  TensorDict r = td * scale;
  CHECK(at::equal(r.get("a"), scale.unsqueeze(1).expand({3, 4})));
  CHECK(at::equal(r.get("b"), scale));
  CHECK(at::equal((td + at::tensor(2.0f)).get("a"), at::full({3, 4}, 3.0)));
  td.mul_(scale);
  CHECK(at::equal(td.get("a"), scale.unsqueeze(1).expand({3, 4})));
  // Broadcasting the batch: [3] with a tensor of shape [2, 3] gives batch [2, 3].
  TensorDict wide = TestType::make(TensorDict({{"b", at::ones({3})}}, {3})) + at::ones({2, 3});
  CHECK((wide.batch_size() == c10::IntArrayRef{2, 3}));
  REQUIRE_THROWS_AS(td * at::ones({4}), ShapeError);
  REQUIRE_THROWS_WITH(td * at::ones({4}), Catch::Contains("torch.Size([4])") && Catch::Contains("torch.Size([3])"));
  REQUIRE_THROWS_AS(td.mul_(at::ones({2, 3})), ShapeError);
}

TEMPLATE_LIST_TEST_CASE("pow, maximum, minimum, lerp, addcmul and addcdiv with tensordicts", "[ops][pointwise]", ContractBackends) {
  TensorDict a = TestType::make(make_td());
  TensorDict b = a.mul(0.5).add(0.25);
  TensorDict c = a.sqrt();
  for (const auto& k : a.keys(true, true)) {
    INFO("key " << k.repr());
    const at::Tensor x = a.get(k), y = b.get(k), z = c.get(k);
    CHECK(at::equal(a.pow(b).get(k), at::pow(x, y)));
    CHECK(at::equal(a.maximum(b).get(k), at::maximum(x, y)));
    CHECK(at::equal(maximum(a, b).get(k), at::maximum(x, y)));
    CHECK(at::equal(minimum(a, b).get(k), at::minimum(x, y)));
    CHECK(at::equal(a.lerp(b, 0.3).get(k), at::lerp(x, y, 0.3)));
    CHECK(at::equal(a.lerp(b, c).get(k), at::lerp(x, y, z)));
    CHECK(at::equal(a.addcmul(b, c, 2).get(k), at::addcmul(x, y, z, 2)));
    CHECK(at::equal(a.addcdiv(b, c, 2).get(k), at::addcdiv(x, y, z, 2)));
  }
  TensorDict in = a.clone();
  in.addcmul_(b, c, 0.5).maximum_(b).lerp_(c, 0.1);
  for (const auto& k : a.keys(true, true)) {
    at::Tensor expected = at::lerp(at::maximum(at::addcmul(a.get(k), b.get(k), c.get(k), 0.5), b.get(k)), c.get(k), 0.1);
    CHECK(at::allclose(in.get(k), expected));
  }
  REQUIRE_THROWS_AS(a.maximum(a.exclude({"a"})), KeyError);
  REQUIRE_THROWS_AS(a.addcmul(b, c.exclude({{"n", "b"}})), KeyError);
}

// Autograd state is not stored by any backend (a file or a store keeps data): in memory only.
TEST_CASE("arithmetic on leaves that require grad keeps the autograd graph", "[ops][arithmetic][autograd]") {
  at::Tensor w = at::ones({2, 3}).requires_grad_();  // at:: factories ignore requires_grad in 1.13
  TensorDict td({{"w", w}}, {2});
  TensorDict scaled = td * 3.0;
  REQUIRE(scaled.get("w").requires_grad());
  TensorDict out = (scaled + td).sum();
  REQUIRE(out.get("w").requires_grad());
  out.get("w").backward();
  CHECK(at::equal(w.grad(), at::full({2, 3}, 4.0)));
}

TEMPLATE_LIST_TEST_CASE("math results drop nested tensordicts left empty, as Python's (finding A5)",
                        "[ops][arithmetic][python]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"x", at::ones({2})}, {"e", TensorDict({}, {2})}}, {2}));
  CHECK(td.contains("e"));
  CHECK((td + 1).keys() == std::vector<NestedKey>{"x"});
  CHECK(td.abs().keys() == std::vector<NestedKey>{"x"});
  CHECK((td * at::scalar_tensor(2.0)).keys() == std::vector<NestedKey>{"x"});  // a 0-dim tensor: as a scalar
  CHECK((td * at::ones({2})).keys() == (std::vector<NestedKey>{"x", "e"}));      // an n-d tensor keeps it (A16)
  CHECK(td.add(td).keys() == std::vector<NestedKey>{"x"});
  // apply keeps Python's own rule (filter_empty=None): only levels emptied by the call go.
  CHECK(td.apply([](const at::Tensor& t) { return t; }).contains("e"));
}

TEMPLATE_LIST_TEST_CASE("in-place arithmetic ignores keys only the other tensordict has (finding A13)",
                        "[ops][arithmetic][python]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"x", at::ones({2})}, {"n", {{"y", at::ones({2})}}}}, {2}));
  TensorDict other({{"x", at::full({2}, 2.0)}, {"extra", at::ones({2})}, {"n", {{"y", at::ones({2})}, {"z", at::ones({2})}}}},
                   {2});
  td.add_(other);
  CHECK(at::equal(td.get("x"), at::full({2}, 3.0)));
  CHECK(at::equal(td.get({"n", "y"}), at::full({2}, 2.0)));
  CHECK_FALSE(td.contains("extra"));
  // A key of td missing from the other one is still an error, and nothing is written.
  REQUIRE_THROWS_AS(td.mul_(TensorDict({{"x", at::ones({2})}}, {2})), KeyError);
  CHECK(at::equal(td.get("x"), at::full({2}, 3.0)));
  // Out of place, Python requires the same keys on both sides.
  REQUIRE_THROWS_AS(td.add(other), KeyError);
}
