// The comparison loops of ops/compare_kernel.cpp give exactly LibTorch's results (NaNs, signed
// zeros, every dtype they take, scalars as LibTorch converts them), decline what they do not
// take, and back the TensorDict comparisons.
#include "support/catch_torch.h"

#include <limits>

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/ops.h>

#include "ops/compare_kernel.h"

using namespace tensordict;
using ops::CompareOp;

namespace {

const CompareOp kOps[] = {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge};

template <typename Other>
at::Tensor reference(CompareOp op, const at::Tensor& a, const Other& b) {
  switch (op) {
    case CompareOp::Eq: return at::eq(a, b);
    case CompareOp::Ne: return at::ne(a, b);
    case CompareOp::Lt: return at::lt(a, b);
    case CompareOp::Le: return at::le(a, b);
    case CompareOp::Gt: return at::gt(a, b);
    case CompareOp::Ge: return at::ge(a, b);
  }
  return at::Tensor();
}

// Values with many ties, so that every comparison comes out both ways.
at::Tensor sample(at::ScalarType dtype, int64_t n, int seed) {
  at::manual_seed(seed);
  if (dtype == at::kBool) return at::randint(0, 2, {n}).to(at::kBool);
  if (dtype == at::kByte) return at::randint(0, 4, {n}).to(dtype);
  return at::randint(-2, 3, {n}).to(dtype);
}

void check_same(const at::Tensor& got, const at::Tensor& want) {
  REQUIRE(got.defined());
  CHECK(got.scalar_type() == at::kBool);
  CHECK(got.sizes() == want.sizes());
  CHECK(at::equal(got, want));
}

}  // namespace

TEST_CASE("compare kernel: every dtype and op against two tensors matches LibTorch", "[unit][compare_kernel]") {
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kShort, at::kChar, at::kByte, at::kBool}) {
    // 70k elements: more than one thread's grain, and a tail after the last full block.
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{257}, int64_t{70001}}) {
      const at::Tensor a = sample(dtype, n, 1).reshape({-1, 1}), b = sample(dtype, n, 2).reshape({-1, 1});
      for (CompareOp op : kOps) {
        INFO("dtype " << dtype << ", n " << n << ", op " << static_cast<int>(op));
        check_same(ops::compare_contiguous(op, a, b), reference(op, a, b));
      }
    }
  }
}

TEST_CASE("compare kernel: NaNs, infinities and signed zeros compare as in LibTorch", "[unit][compare_kernel]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const at::Tensor a = at::tensor({nan, nan, 1.f, -0.f, inf, -inf, 0.f, 2.f});
  const at::Tensor b = at::tensor({nan, 1.f, nan, 0.f, inf, inf, -0.f, 1.f});
  for (CompareOp op : kOps) {
    INFO("op " << static_cast<int>(op));
    check_same(ops::compare_contiguous(op, a, b), reference(op, a, b));
    check_same(ops::compare_contiguous(op, a, c10::Scalar(std::nan(""))), reference(op, a, c10::Scalar(std::nan(""))));
    check_same(ops::compare_contiguous(op, a, c10::Scalar(-0.0)), reference(op, a, c10::Scalar(-0.0)));
  }
}

TEST_CASE("compare kernel: scalars convert as LibTorch converts them, or are left to it", "[unit][compare_kernel]") {
  const at::Tensor f = at::tensor({0.1f, 0.2f, 1e30f, -1.f});
  // A double scalar compares in float: 0.1 equals the float 0.1f; 1e300 becomes infinity.
  for (const c10::Scalar& s : {c10::Scalar(0.1), c10::Scalar(1e300), c10::Scalar(int64_t{-1}), c10::Scalar(true)}) {
    for (CompareOp op : kOps) check_same(ops::compare_contiguous(op, f, s), reference(op, f, s));
  }
  CHECK(ops::compare_contiguous(CompareOp::Eq, f, c10::Scalar(0.1)).all().item<bool>() == false);
  CHECK(ops::compare_contiguous(CompareOp::Eq, f, c10::Scalar(0.1))[0].item<bool>());

  const at::Tensor i = at::tensor({-3, 0, 7}, at::kInt);
  for (const c10::Scalar& s : {c10::Scalar(int64_t{0}), c10::Scalar(int64_t{7}), c10::Scalar(false)}) {
    for (CompareOp op : kOps) check_same(ops::compare_contiguous(op, i, s), reference(op, i, s));
  }
  // An integer tensor against a float promotes; an integer beyond int32 is not converted here.
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Gt, i, c10::Scalar(0.5)).defined());
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Gt, i, c10::Scalar(int64_t{1} << 40)).defined());
  const at::Tensor bools = at::tensor({1, 0}).to(at::kBool);
  check_same(ops::compare_contiguous(CompareOp::Eq, bools, c10::Scalar(true)), at::eq(bools, true));
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Eq, bools, c10::Scalar(int64_t{1})).defined());
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Eq, f, c10::Scalar(c10::complex<double>(1, 1))).defined());
}

TEST_CASE("compare kernel: declines what its loops cannot read as flat values", "[unit][compare_kernel]") {
  const at::Tensor a = at::randn({4, 3}), b = at::randn({4, 3});
  CHECK(ops::compare_contiguous(CompareOp::Lt, a, b).defined());
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Lt, a.t(), b.t()).defined());            // not contiguous
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Lt, a, b.to(at::kDouble)).defined());     // dtypes differ
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Lt, a, b[0]).defined());                  // shapes differ
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Lt, a.to(at::kHalf), b.to(at::kHalf)).defined());
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Lt, at::_neg_view(a), b).defined());      // values negated lazily
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Lt, at::Tensor(), b).defined());
  const at::Tensor named = a.refine_names({at::Dimname::wildcard(), at::Dimname::fromSymbol(at::Symbol::dimname("c"))});
  CHECK_FALSE(ops::compare_contiguous(CompareOp::Lt, named, named).defined());  // names: LibTorch's result has them
  CHECK_FALSE(ops::equal_contiguous(a.t(), b.t()).has_value());
  CHECK_FALSE(ops::equal_contiguous(at::_neg_view(a), at::_neg_view(a).clone()).has_value());
}

TEST_CASE("compare kernel: equality finds a difference wherever it is", "[unit][compare_kernel]") {
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kByte, at::kBool}) {
    const int64_t n = 70001;  // two threads' grains, full blocks and a tail
    const at::Tensor a = sample(dtype, n, 3);
    CHECK(ops::equal_contiguous(a, a.clone()) == std::optional<bool>(true));
    for (int64_t pos : {int64_t{0}, int64_t{300}, int64_t{40000}, n - 2, n - 1}) {
      at::Tensor b = a.clone();
      b[pos] = dtype == at::kBool ? at::logical_not(b[pos]) : b[pos] + 1;
      INFO("dtype " << dtype << ", difference at " << pos);
      CHECK(ops::equal_contiguous(a, b) == std::optional<bool>(false));
    }
  }
  for (at::ScalarType dtype : {at::kFloat, at::kLong, at::kBool}) {
    const at::Tensor a = sample(dtype, 600, 4);  // two full blocks and a tail: every lane of each
    for (int64_t pos = 0; pos < 600; ++pos) {
      at::Tensor b = a.clone();
      b[pos] = dtype == at::kBool ? at::logical_not(b[pos]) : b[pos] + 1;
      if (ops::equal_contiguous(a, b) != std::optional<bool>(false)) FAIL("dtype " << dtype << ": missed at " << pos);
    }
  }
  const at::Tensor with_nan = at::tensor({1.f, std::nanf(""), 0.f});
  CHECK(ops::equal_contiguous(with_nan, with_nan) == std::optional<bool>(false));  // NaN != NaN, aliases too
  CHECK(ops::equal_contiguous(at::tensor({0.f}), at::tensor({-0.f})) == std::optional<bool>(true));
  CHECK(ops::equal_contiguous(at::empty({0}), at::empty({0})) == std::optional<bool>(true));
}

TEST_CASE("compare kernel: TensorDict comparisons through it equal the per-leaf LibTorch results", "[unit][compare_kernel]") {
  TensorDict td({}, {8});
  td.set("a", at::randn({8, 5}));
  td.set({"n", "b"}, at::randn({8}));
  td.set({"n", "i"}, at::randint(-2, 3, {8, 2}, at::kLong));
  td.set("h", at::randn({8, 2}).to(at::kHalf));  // no loop for half: LibTorch's path
  td.get("a")[3][1] = std::nanf("");
  for (const TensorDict& lhs : {td, consolidate(td)}) {
    const TensorDict rhs = lhs.clone();
    rhs.get({"n", "b"})[2] = 100.f;
    const TensorDict gt = lhs.gt(rhs), eq = lhs.eq(rhs), le = lhs.le(0);
    for (const auto& key : td.keys(true, true)) {
      INFO("key " << key.repr());
      CHECK(at::equal(gt.get(key), at::gt(lhs.get(key), rhs.get(key))));
      CHECK(at::equal(eq.get(key), at::eq(lhs.get(key), rhs.get(key))));
      CHECK(at::equal(le.get(key), at::le(lhs.get(key), 0)));
    }
    CHECK_FALSE((lhs == lhs).all());  // the NaN
    lhs.get("a")[3][1] = 0.f;
    CHECK((lhs == lhs.clone()).all());
    CHECK_FALSE((lhs == rhs).all());
    lhs.get("a")[3][1] = std::nanf("");
  }
}

TEST_CASE("compare kernel: isnan, isfinite, isposinf and isneginf match LibTorch", "[unit][compare_kernel]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const double tiny = std::numeric_limits<double>::denorm_min(), big = std::numeric_limits<double>::max();
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor a = at::tensor({0.0, -0.0, 1.5, -2.0, nan, -nan, inf, -inf, tiny, big, -big}).to(dtype).repeat({70});
    INFO("dtype " << dtype);
    check_same(ops::test_contiguous(ops::ValueTest::IsNan, a), at::isnan(a));
    check_same(ops::test_contiguous(ops::ValueTest::IsFinite, a), at::isfinite(a));
    check_same(ops::test_contiguous(ops::ValueTest::IsPosInf, a), at::isposinf(a));
    check_same(ops::test_contiguous(ops::ValueTest::IsNegInf, a), at::isneginf(a));
  }
  CHECK_FALSE(ops::test_contiguous(ops::ValueTest::IsNan, at::ones({3}, at::kInt)).defined());
  CHECK_FALSE(ops::test_contiguous(ops::ValueTest::IsNan, at::ones({3}, at::kHalf)).defined());
  CHECK_FALSE(ops::test_contiguous(ops::ValueTest::IsNan, at::ones({3, 2}).t()).defined());
}

TEST_CASE("compare kernel: all and any find the one element that decides", "[unit][compare_kernel]") {
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kChar, at::kByte, at::kBool}) {
    INFO("dtype " << dtype);
    const at::Tensor ones = at::ones({600}, dtype), zeros = at::zeros({600}, dtype);
    CHECK(ops::all_contiguous(ones) == std::optional<bool>(true));
    CHECK(ops::any_contiguous(zeros) == std::optional<bool>(false));
    for (int64_t pos = 0; pos < 600; ++pos) {  // every lane of two blocks and the tail
      at::Tensor one_zero = ones.clone(), one_set = zeros.clone();
      one_zero[pos] = 0;
      one_set[pos] = 1;
      if (ops::all_contiguous(one_zero) != std::optional<bool>(false)) FAIL("all missed a zero at " << pos);
      if (ops::any_contiguous(one_set) != std::optional<bool>(true)) FAIL("any missed a one at " << pos);
    }
    at::Tensor far = at::ones({70001}, dtype);  // over two threads' grains
    far[70000] = 0;
    CHECK(ops::all_contiguous(far) == std::optional<bool>(false));
    CHECK(ops::any_contiguous(at::zeros({0}, dtype)) == std::optional<bool>(false));
    CHECK(ops::all_contiguous(at::zeros({0}, dtype)) == std::optional<bool>(true));
  }
  // As at::all: NaN is nonzero, -0.0 is zero.
  CHECK(ops::all_contiguous(at::tensor({std::nanf(""), 1.f})) == std::optional<bool>(true));
  CHECK(ops::all_contiguous(at::tensor({-0.f, 1.f})) == std::optional<bool>(false));
  CHECK(ops::any_contiguous(at::tensor({-0.f, 0.f})) == std::optional<bool>(false));
  CHECK_FALSE(ops::all_contiguous(at::ones({3}, at::kHalf)).has_value());
}

TEST_CASE("compare kernel: a tensordict's NaN check and all/any, packed or not", "[unit][compare_kernel]") {
  TensorDict td({}, {6});
  for (int i = 0; i < 5; ++i) td.set(i % 2 ? NestedKey({"n", "x" + std::to_string(i)}) : NestedKey("x" + std::to_string(i)), at::rand({6, 40}) + 1);
  for (const TensorDict& t : {td, consolidate(td)}) {
    CHECK_FALSE(t.isnan().any());
    CHECK(t.isfinite().all());
    CHECK(t.all());
    t.get({"n", "x3"})[5][39] = std::nanf("");
    CHECK(t.isnan().any());
    CHECK_FALSE(t.isfinite().all());
    CHECK(t.all());  // NaN is nonzero
    t.get("x4")[0][0] = 0.f;
    CHECK_FALSE(t.all());
    CHECK(t.any());
    CHECK_FALSE(t.isposinf().any());
    t.get("x0")[2][7] = -std::numeric_limits<float>::infinity();
    CHECK(t.isneginf().any());
    for (const auto& key : td.keys(true, true)) {
      CHECK(at::equal(t.isfinite().get(key), at::isfinite(t.get(key))));
    }
    CHECK((t * 0).any());  // NaN * 0 is NaN: nonzero
    td.get({"n", "x3"})[5][39] = 1.f;
    td.get("x4")[0][0] = 1.f;
    td.get("x0")[2][7] = 1.f;
  }
  CHECK_FALSE((td * 0).any());
  CHECK_FALSE((consolidate(td) * 0).any());
}
