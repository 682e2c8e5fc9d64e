// One kernel over a consolidated tensordict (issue 34 item 1): elementwise ops on a packed
// storage give exactly the per-leaf results, keep the result packed (so chains stay on the fast
// path), and fall back to the per-leaf path where the leaves do not tile one storage.
#include "support/catch_torch.h"
#include "support/dim_names_string.h"

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/ops.h>

using namespace tensordict;

namespace {
// 30 leaves of 1k floats in nested levels: consolidate packs them with no padding.
TensorDict fixture_f() {
  TensorDict td({}, {10});
  for (int i = 0; i < 30; ++i) {
    const NestedKey key = i % 3 == 0 ? NestedKey({"n", "l" + std::to_string(i)}) : NestedKey("l" + std::to_string(i));
    td.set(key, at::randn({10, 100}));
  }
  return td;
}

bool one_storage(const TensorDict& td) {
  const std::vector<Entry> leaves = td.values(/*include_nested=*/true, /*leaves_only=*/true);
  for (const Entry& e : leaves)
    if (!e.tensor().storage().is_alias_of(leaves.front().tensor().storage())) return false;
  return true;
}

bool same(const TensorDict& a, const TensorDict& b) {
  // consolidate lists a level's leaves before its nested levels (Python's order): compare by key.
  if (a.keys(true, true).size() != b.keys(true, true).size()) return false;
  for (const NestedKey& k : a.keys(true, true))
    if (!at::allclose(a.get(k), b.get(k), 1e-6, 1e-6, /*equal_nan=*/true)) return false;
  return true;
}
}  // namespace

TEST_CASE("unary ops and scalar arithmetic on a consolidated tensordict run over its storage, exactly",
          "[unit][packed]") {
  TensorDict plain = fixture_f();
  TensorDict packed = consolidate(plain);
  REQUIRE(one_storage(packed));
  CHECK(same(packed.exp(), plain.exp()));
  CHECK(same(packed.abs(), plain.abs()));
  CHECK(same(packed.clamp(-0.5, 0.5), plain.clamp(-0.5, 0.5)));
  CHECK(same(packed * 2.5, plain * 2.5));
  CHECK(same(packed + 1, plain + 1));
  CHECK(same(packed.sub(3, 2), plain.sub(3, 2)));
  // The result is packed too: a chain stays on the fast path, and is still exact.
  CHECK(one_storage(packed.exp()));
  CHECK(one_storage(packed * 2));
  CHECK(one_storage(packed.mul(2.0)));
  TensorDict chained = (packed * 2).exp().sub(1);
  CHECK(one_storage(chained));
  CHECK(same(chained, (plain * 2).exp().sub(1)));
  CHECK(chained.is_locked() == packed.is_locked());
}

TEST_CASE("in-place ops on a consolidated tensordict write its storage once, exactly", "[unit][packed]") {
  TensorDict plain = fixture_f();
  TensorDict packed = consolidate(plain);
  const at::Tensor storage = consolidated_storage(packed);
  packed.mul_(3).abs_().add_(1);
  plain.mul_(3).abs_().add_(1);
  CHECK(same(packed, plain));
  CHECK(consolidated_storage(packed).data_ptr() == storage.data_ptr());
  CHECK(is_consolidated(packed));
}

TEST_CASE("leaves that do not tile one storage take the per-leaf path, with the same results", "[unit][packed]") {
  // Mixed dtypes; padding after a 3-float leaf; a tensordict whose leaves are views of part of
  // a larger tensor (bytes outside the leaves must stay untouched). The first two take one kernel
  // a run (packed_runs_test.cpp), not one over the storage.
  TensorDict mixed({{"f", at::randn({4, 3})}, {"d", at::randn({4}, at::kDouble)}}, {4});
  CHECK(same(consolidate(mixed).exp(), mixed.exp()));
  TensorDict padded({{"a", at::randn({3})}, {"b", at::randn({3})}}, {3});
  TensorDict cp = consolidate(padded);
  CHECK(same(cp * 2, padded * 2));
  CHECK(one_storage(cp * 2));  // padding between float leaves: one run, read over it
  at::Tensor big = at::arange(10, at::kFloat);
  TensorDict views({{"a", big.slice(0, 0, 4)}, {"b", big.slice(0, 4, 8)}}, {4});
  views.mul_(10);
  CHECK(at::equal(big.slice(0, 8, 10), at::tensor({8.f, 9.f})));  // not part of any leaf
  CHECK(at::equal(big.slice(0, 0, 8), at::arange(8, at::kFloat) * 10));
  // Leaves with named dims tile one storage but take the per-leaf path: LibTorch's results
  // carry the names, a result cut from one flat storage would not.
  at::Tensor storage = at::randn({8});
  const std::vector<at::Dimname> n_dim = {at::Dimname::fromSymbol(at::Symbol::dimname("N"))};
  TensorDict named({{"a", storage.slice(0, 0, 4).refine_names(n_dim)}, {"b", storage.slice(0, 4, 8).refine_names(n_dim)}}, {4});
  const TensorDict doubled = named * 2;
  CHECK(doubled.get("a").has_names());
  CHECK(at::equal(doubled.get("b").rename(c10::nullopt), storage.slice(0, 4, 8) * 2));
  CHECK(named.exp().get("a").has_names());
  CHECK(named.gt(0).get("b").has_names());
  // A lazily negated view among leaves that tile one storage: its bytes are not its values.
  TensorDict negated({{"a", at::_neg_view(storage.slice(0, 0, 4))}, {"b", storage.slice(0, 4, 8)}}, {4});
  CHECK(at::equal((negated * 2).get("a"), -storage.slice(0, 0, 4) * 2));
  CHECK(at::equal((negated * 2).get("b"), storage.slice(0, 4, 8) * 2));
  // A dtype error names the key, as on the per-leaf path.
  TensorDict ints = consolidate(TensorDict({{"i", at::ones({4}, at::kLong)}, {"j", at::ones({4}, at::kLong)}}, {4}));
  CHECK_THROWS_WITH(ints.sqrt_(), Catch::Contains("'i'"));
}

TEST_CASE("ops between two consolidated tensordicts of one layout run over both storages, exactly", "[unit][packed]") {
  TensorDict x = fixture_f(), y = fixture_f();
  TensorDict a = consolidate(x), b = consolidate(y);
  CHECK(same(a + b, x + y));
  CHECK(one_storage(a + b));
  CHECK(same(a.mul(b), x.mul(y)));
  CHECK(same(a.sub(b, 0.5), x.sub(y, 0.5)));
  CHECK(same(a.maximum(b), x.maximum(y)));
  CHECK(same(a.lerp(b, 0.25), x.lerp(y, 0.25)));
  a.add_(b);
  x.add_(y);
  CHECK(same(a, x));
  a.mul_(a);  // the same storage on both sides
  x.mul_(x);
  CHECK(same(a, x));
  // Another layout (the same keys, inserted in another order): per leaf, the same values.
  TensorDict reordered({}, {10});
  const auto keys = y.keys(true, true);
  for (auto it = keys.rbegin(); it != keys.rend(); ++it) reordered.set(*it, y.get(*it));
  TensorDict c = consolidate(reordered);
  CHECK(same(consolidate(x) + c, x + y));
}

TEST_CASE("tensordicts whose leaves tile one storage without consolidate run over both storages, exactly",
          "[unit][packed]") {
  // Not consolidated, so not an intact result: the general path finds the packed storages. The
  // one-walk path for plain operands (zip_leaves) must leave such trees to it.
  const auto tiled = [](const at::Tensor& flat) {
    TensorDict td({}, {10});
    td.set("a", flat.narrow(0, 0, 100).view({10, 10}));
    td.set({"n", "b"}, flat.narrow(0, 100, 200).view({10, 20}));
    td.set("c", flat.narrow(0, 300, 50).view({10, 5}));
    return td;
  };
  TensorDict p = tiled(at::randn({350})), q = tiled(at::randn({350}));
  TensorDict sum = p + q;
  CHECK(one_storage(sum));
  CHECK(at::equal(sum.get({"n", "b"}), p.get({"n", "b"}) + q.get({"n", "b"})));
  CHECK(at::equal(sum.get("c"), p.get("c") + q.get("c")));
  // The same leaves in storages of their own: per leaf, the same values.
  TensorDict r({}, {10}), s({}, {10});
  for (const NestedKey& k : p.keys(true, true)) {
    r.set(k, p.get(k).clone());
    s.set(k, q.get(k).clone());
  }
  CHECK_FALSE(one_storage(r + s));
  CHECK(same(r + s, sum));
}

TEST_CASE("clone, to(dtype) and full reductions of a consolidated tensordict work on its storage", "[unit][packed]") {
  TensorDict plain = fixture_f();
  TensorDict packed = consolidate(plain);
  TensorDict copy = packed.clone();
  CHECK(same(copy, plain));
  CHECK(one_storage(copy));
  CHECK_FALSE(copy.get("l1").storage().is_alias_of(packed.get("l1").storage()));  // a copy
  CHECK_FALSE(copy.is_locked());
  TensorDict doubles = packed.to(at::kDouble);
  CHECK(one_storage(doubles));
  CHECK(doubles.get({"n", "l0"}).scalar_type() == at::kDouble);
  CHECK(same(doubles, plain.to(at::kDouble)));
  CHECK(at::allclose(packed.sum(reduce), plain.sum(reduce), 1e-4, 1e-4));
  CHECK(at::allclose(packed.mean(reduce), plain.mean(reduce), 1e-5, 1e-5));
  CHECK(at::equal(packed.amax(reduce), plain.amax(reduce)));
  CHECK(at::allclose(packed.std(reduce), plain.std(reduce), 1e-5, 1e-5));
}

TEST_CASE("(a == b).all() of two consolidated tensordicts compares their storages once", "[unit][packed]") {
  TensorDict x = fixture_f();
  TensorDict a = consolidate(x), b = consolidate(x.clone());
  CHECK((a == b).all());
  b.get({"n", "l9"}).index_put_({3, 7}, 42.f);
  CHECK_FALSE((a == b).all());
  CHECK((a != b).any());
  // NaN is not equal to itself, as (x == y).all() says leaf by leaf.
  TensorDict nan = consolidate(TensorDict({{"p", at::full({2}, NAN)}, {"q", at::zeros({2})}}, {2}));
  CHECK_FALSE((nan == nan).all());
}

TEST_CASE("comparisons and elementwise tests of consolidated tensordicts give packed bools, exactly",
          "[unit][packed]") {
  TensorDict x = fixture_f(), y = fixture_f();
  y.set("l1", x.get("l1").clone());  // equal in one leaf, different elsewhere
  at::Tensor with_nan = x.get("l2").clone();
  with_nan.index_put_({0, 0}, std::nan(""));
  x.set("l2", with_nan);
  TensorDict a = consolidate(x), b = consolidate(y);
  auto same_bools = [](const TensorDict& p, const TensorDict& q) {
    if (p.keys(true, true).size() != q.keys(true, true).size()) return false;
    for (const NestedKey& k : p.keys(true, true))
      if (p.get(k).scalar_type() != at::kBool || !at::equal(p.get(k), q.get(k))) return false;
    return true;
  };
  CHECK(same_bools(a == b, x == y));
  CHECK(same_bools(a != b, x != y));
  CHECK(same_bools(a.lt(b), x.lt(y)));
  CHECK(same_bools(a.ge(0.1), x.ge(0.1)));
  CHECK(same_bools(a.isnan(), x.isnan()));
  CHECK(same_bools(a.isfinite(), x.isfinite()));
  // One kernel: the bools are one storage, laid out as the operands.
  CHECK(one_storage(a == b));
  CHECK(one_storage(a.gt(0)));
  CHECK(one_storage(a.isnan()));
  CHECK((a == b).to_tensordict().get("l1").all().item<bool>());
  CHECK_FALSE((a == b).all());
  CHECK((a.isnan()).any());
  // A dtype error on the packed path still names a key (per-leaf fallback).
  TensorDict c = consolidate(TensorDict({{"i", at::ones({4}, at::kComplexFloat)}, {"j", at::ones({4}, at::kComplexFloat)}}, {4}));
  CHECK_THROWS_WITH(c.lt(c), Catch::Contains("'i'"));
}

TEST_CASE("leaves cut from a packed result are ordinary tensors over its storage", "[unit][packed]") {
  TensorDict packed = consolidate(fixture_f());
  TensorDict out = packed * 2;
  const at::Tensor leaf = out.get("l1");
  CHECK(leaf.sizes() == packed.get("l1").sizes());
  CHECK(leaf.is_contiguous());
  // Writes through one leaf stay in it; autograd works on a leaf afterwards.
  leaf.fill_(7);
  CHECK(at::equal(out.get("l2"), packed.get("l2") * 2));
  at::Tensor w = out.get("l2").clone().requires_grad_();
  (w * out.get("l2")).sum().backward();
  CHECK(at::equal(w.grad(), out.get("l2")));
  // Under inference mode the results are inference tensors, as per leaf.
  const TensorDict expected = packed.exp();
  {
    c10::InferenceMode guard;
    TensorDict inf = packed.exp();
    CHECK(inf.get("l1").is_inference());
    CHECK(same(inf, expected));
  }
}

TEST_CASE("clone and to(dtype) of a consolidated tensordict keep its batch-dim names", "[unit][packed]") {
  TensorDict named = fixture_f();
  named.set_names({"env"});
  TensorDict packed = consolidate(named);
  REQUIRE(one_storage(packed));
  CHECK(packed.clone().names() == named.names());
  CHECK(one_storage(packed.clone()));
  CHECK(packed.to(at::kDouble).names() == named.names());
  CHECK(packed.to(at::kDouble).get("l1").scalar_type() == at::kDouble);
}

TEST_CASE("zero_ and fill_ of a consolidated tensordict write its storage once", "[unit][packed]") {
  TensorDict packed = consolidate(fixture_f());
  const at::Tensor storage = consolidated_storage(packed);
  packed.fill_(2.5);
  for (const NestedKey& k : packed.keys(true, true)) CHECK(at::equal(packed.get(k), at::full_like(packed.get(k), 2.5)));
  packed.zero_();
  CHECK_FALSE(packed.any());
  CHECK(consolidated_storage(packed).data_ptr() == storage.data_ptr());
  CHECK(is_consolidated(packed));
}

TEST_CASE("a CPU result above 32 MiB is made per leaf, in-place ops stay one kernel", "[unit][packed]") {
  // One result larger than glibc reuses from its heap would be mapped and faulted in anew on
  // every call (ops/packed.cpp): such ops run per leaf, with the same values. The threshold is
  // on the result: bools or a narrower dtype of the same storage stay on the packed path.
  TensorDict plain({}, {16});
  for (int i = 0; i < 3; ++i) plain.set("l" + std::to_string(i), at::randn({16, 1 << 18}));  // 3 x 16 MiB
  TensorDict packed = consolidate(plain);
  REQUIRE(one_storage(packed));
  const TensorDict exp = packed.exp();
  CHECK_FALSE(one_storage(exp));
  CHECK(same(exp, plain.exp()));
  CHECK_FALSE(one_storage(packed * 2));
  CHECK_FALSE(one_storage(packed + packed));
  CHECK_FALSE(one_storage(packed.clone()));
  CHECK(same(packed.clone(), plain));
  CHECK_FALSE(one_storage(packed.to(at::kDouble)));
  CHECK(one_storage(packed.to(at::kHalf)));  // 24 MiB
  CHECK(one_storage(packed.gt(0)));          // 12 MiB of bools
  CHECK(one_storage(packed.gt(consolidate(plain * 0.5))));
  CHECK(same(packed.gt(0).to(at::kFloat), plain.gt(0).to(at::kFloat)));
  const at::Tensor storage = consolidated_storage(packed);
  packed.mul_(2);
  CHECK(consolidated_storage(packed).data_ptr() == storage.data_ptr());
  CHECK(same(packed, plain * 2));
  // Below the threshold the result is packed: 2 x 16 MiB.
  CHECK(one_storage(consolidate(plain.exclude({"l2"})).exp()));
}
