// Contract: apply / apply_ / named_apply (semantics 1.11) and where, masked_fill,
// masked_select, gather (semantics 1.10) on every backend.

#include "support/catch_torch.h"

#include <set>

#include <ATen/ATen.h>

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;

namespace {
// A bool tensor from 0/1 values (LibTorch 1.13's at::tensor has no bool overload).
using contract::bools;
}  // namespace

namespace {
// Leaves and non-tensor data before the nested level: the order every backend lists (memmap
// loads leaves, then collections; consolidated keeps leaves, non-tensors, then nested levels).
TensorDict nested() {
  return TensorDict({{"a", at::ones({3, 4})}, {"s", "text"}, {"nested", {{"inner", at::full({3}, 2.0)}}}}, {3});
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("apply maps every leaf, nested ones included, and keeps non-tensor data", "[ops][apply]", ContractBackends) {
  TensorDict td = TestType::make(nested());
  TensorDict out = td.apply([](const at::Tensor& x) { return x * 2; });
  CHECK(at::equal(out.get("a"), at::full({3, 4}, 2.0)));
  CHECK(at::equal(out.get({"nested", "inner"}), at::full({3}, 4.0)));
  CHECK(out.get_non_tensor("s").value() == json::Value("text"));
  CHECK(at::equal(td.get("a"), at::ones({3, 4})));  // out of place
  CHECK_FALSE(out.is_same(td));
}

TEMPLATE_LIST_TEST_CASE("apply over several tensordicts, defaults for missing keys (case 25)", "[ops][apply][errors]", ContractBackends) {
  TensorDict a = TestType::make(nested());
  TensorDict b = nested().apply([](const at::Tensor& x) { return x + 1; });
  TensorDict sum = a.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, b);
  CHECK(at::equal(sum.get({"nested", "inner"}), at::full({3}, 5.0)));
  TensorDict three = a.apply([](c10::ArrayRef<at::Tensor> xs) { return xs[0] + xs[1] * xs[2]; }, {b, b});
  CHECK(at::equal(three.get("a"), at::full({3, 4}, 5.0)));

  TensorDict partial = b.exclude({{"nested", "inner"}});
  REQUIRE_THROWS_AS(a.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, partial), KeyError);
  REQUIRE_THROWS_WITH(a.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, partial),
                      Catch::Contains("('nested', 'inner')"));
  ApplyOptions with_default;
  with_default.default_value = at::Tensor();  // Python's default=None
  int undefined_seen = 0;
  TensorDict r = a.apply(
      [&](const at::Tensor& x, const at::Tensor& y) {
        if (!y.defined()) {
          ++undefined_seen;
          return x;
        }
        return x + y;
      },
      partial, with_default);
  CHECK(undefined_seen == 1);
  CHECK(at::equal(r.get({"nested", "inner"}), a.get({"nested", "inner"})));
}

TEMPLATE_LIST_TEST_CASE("apply drops undefined results and filters empty nested tensordicts (case 25)", "[ops][apply]", ContractBackends) {
  TensorDict td = TestType::make(nested());
  TensorDict none = td.apply([](const at::Tensor&) { return at::Tensor(); });
  CHECK(none.keys() == std::vector<NestedKey>{"s"});  // non-tensor data stays, nested level is filtered
  ApplyOptions keep;
  keep.filter_empty = false;
  TensorDict kept = td.apply([](const at::Tensor&) { return at::Tensor(); }, keep);
  CHECK(kept.contains("nested"));
  CHECK(kept.get_tensordict("nested").num_keys() == 0);
  TensorDict only_a = td.apply([](const at::Tensor& x) { return x.dim() == 2 ? x : at::Tensor(); });
  CHECK(only_a.keys() == (std::vector<NestedKey>{"a", "s"}));
}

TEMPLATE_LIST_TEST_CASE("apply with a new batch size - mismatching results are refused", "[ops][apply][errors]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::ones({3, 4})}, {"n", {{"b", at::ones({3, 4, 2})}}}}, {3}));
  ApplyOptions opts;
  opts.batch_size = std::vector<int64_t>{3, 4};
  TensorDict wide = td.apply([](const at::Tensor& x) { return x; }, opts);
  CHECK((wide.batch_size() == c10::IntArrayRef{3, 4}));
  CHECK((wide.get_tensordict("n").batch_size() == c10::IntArrayRef{3, 4}));
  REQUIRE_THROWS_AS(td.apply([](const at::Tensor& x) { return x.sum(); }), ShapeError);
  REQUIRE_THROWS_WITH(td.apply([](const at::Tensor& x) { return x.sum(); }),
                      Catch::Contains("'a'") && Catch::Contains("batch size"));
  REQUIRE_THROWS(td.apply([](const at::Tensor& x) { return x.view({7}); }));
}

TEMPLATE_LIST_TEST_CASE("apply propagates the lock only when asked", "[ops][apply][lock]", ContractBackends) {
  TensorDict td = TestType::make(nested());
  td.lock_();
  CHECK_FALSE(td.apply([](const at::Tensor& x) { return x; }).is_locked());
  ApplyOptions opts;
  opts.propagate_lock = true;
  CHECK(td.apply([](const at::Tensor& x) { return x; }, opts).is_locked());
}

TEMPLATE_LIST_TEST_CASE("apply_ writes into the leaves, also when locked", "[ops][apply][lock]", ContractBackends) {
  TensorDict td = TestType::make(nested());
  at::Tensor a = td.get("a");
  td.lock_();
  td.apply_([](const at::Tensor& x) { return x * 3; });
  CHECK(at::equal(td.get("a"), at::full({3, 4}, 3.0)));
  // Leaves that alias storage were changed where they are: a tensor read before sees it.
  if (TestType::kLeavesAliasStorage) CHECK(at::equal(a, at::full({3, 4}, 3.0)));
  CHECK(at::equal(td.get({"nested", "inner"}), at::full({3}, 6.0)));
  td.apply_([](const at::Tensor& x, const at::Tensor& y) { return x - y; }, td.clone());
  CHECK(at::equal(td.get("a"), at::zeros({3, 4})));
  REQUIRE_THROWS_AS(td.apply_([](const at::Tensor& x) { return x.sum(-1); }), RuntimeError);
}

TEMPLATE_LIST_TEST_CASE("apply with out sets the results into another tensordict and returns it", "[ops][apply][lock][errors]", ContractBackends) {
  TensorDict td = TestType::make(nested());
  TensorDict target({{"keep", at::zeros({3})}, {"nested", {{"other", at::zeros({3})}}}}, {3});
  TensorDict untouched_nested = target.get_tensordict("nested");
  ApplyOptions opts;
  opts.out = &target;
  TensorDict r = td.apply([](const at::Tensor& x) { return x * 2; }, opts);
  CHECK(r.is_same(target));
  CHECK(target.keys() == (std::vector<NestedKey>{"keep", "nested", "a", "s"}));
  CHECK(at::equal(target.get("a"), at::full({3, 4}, 2.0)));
  // The nested level is updated in place: the same tensordict, old entries kept, new ones added.
  CHECK(target.get_tensordict("nested").is_same(untouched_nested));
  CHECK(at::equal(untouched_nested.get("inner"), at::full({3}, 4.0)));
  CHECK(untouched_nested.contains("other"));
  // Several inputs and named_apply honour out too.
  TensorDict sums = TensorDict({}, {3});
  ApplyOptions into_sums;
  into_sums.out = &sums;
  td.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, td, into_sums);
  CHECK(at::equal(sums.get({"nested", "inner"}), at::full({3}, 4.0)));
  TensorDict named = TensorDict({}, {3});
  ApplyOptions into_named;
  into_named.out = &named;
  td.named_apply([](const NestedKey& k, const at::Tensor& x) { return k.back() == "a" ? x : at::Tensor(); }, false,
                 into_named);
  CHECK(named.keys() == (std::vector<NestedKey>{"a", "s"}));  // the emptied nested level is filtered

  TensorDict locked = TensorDict({}, {3});
  locked.lock_();
  ApplyOptions into_locked;
  into_locked.out = &locked;
  REQUIRE_THROWS_AS(td.apply([](const at::Tensor& x) { return x; }, into_locked), LockedError);
  ApplyOptions clash;
  clash.out = &target;
  clash.batch_size = std::vector<int64_t>{};
  REQUIRE_THROWS_AS(td.apply([](const at::Tensor& x) { return x; }, clash), RuntimeError);
  REQUIRE_THROWS_WITH(td.apply([](const at::Tensor& x) { return x; }, clash),
                      Catch::Contains("batch_size and out.batch_size must be equal"));
  TensorDict narrow = TensorDict({}, {2});
  ApplyOptions into_narrow;
  into_narrow.out = &narrow;
  REQUIRE_THROWS_AS(td.apply([](const at::Tensor& x) { return x; }, into_narrow), ShapeError);
  CHECK(narrow.num_keys() == 0u);
}

TEMPLATE_LIST_TEST_CASE("apply with call_on_nested hands over first-level entries whole", "[ops][apply][errors]", ContractBackends) {
  TensorDict td = TestType::make(nested());
  std::vector<std::string> seen;
  TensorDict r = td.apply(call_on_nested, [&](const Entry& e) -> Entry {
    seen.push_back(kind_name(e.kind()));
    if (e.is_tensordict()) return e.tensordict().select({"inner"}).apply([](const at::Tensor& x) { return -x; });
    if (e.is_tensor()) return e.tensor() + 1;
    return Entry();  // drops the non-tensor entry
  });
  CHECK(seen == (std::vector<std::string>{"a tensor", "non-tensor data", "a TensorDict"}));
  CHECK(r.keys() == (std::vector<NestedKey>{"a", "nested"}));
  CHECK(at::equal(r.get("a"), at::full({3, 4}, 2.0)));
  CHECK(at::equal(r.get({"nested", "inner"}), at::full({3}, -2.0)));

  // With others: the entry, then the others' entries at the same key.
  TensorDict other = nested().apply([](const at::Tensor& x) { return x * 10; });
  TensorDict paired = td.apply(
      call_on_nested,
      [](c10::ArrayRef<Entry> e) -> Entry {
        if (e[0].is_tensor()) return e[0].tensor() + e[1].tensor();
        return e[1];
      },
      {other});
  CHECK(at::equal(paired.get("a"), at::full({3, 4}, 11.0)));
  CHECK(at::equal(paired.get({"nested", "inner"}), other.get({"nested", "inner"})));
  // Returned whole, as it is, unless it has to move to the tensordict's device.
  if (!paired.device()) CHECK(paired.get_tensordict("nested").is_same(other.get_tensordict("nested")));
  REQUIRE_THROWS_AS(td.apply(call_on_nested, [](c10::ArrayRef<Entry> e) { return e[0]; }, {TensorDict({}, {3})}),
                    KeyError);
  ApplyOptions none_default;
  none_default.default_value = at::Tensor();
  TensorDict kept = td.apply(
      call_on_nested, [](c10::ArrayRef<Entry> e) { return e[1].defined() ? e[1] : e[0]; }, {TensorDict({}, {3})},
      none_default);
  CHECK(kept.keys() == td.keys());

  // Results are checked like a set: a wrong batch size names the key.
  REQUIRE_THROWS_AS(td.apply(call_on_nested, [](const Entry& e) -> Entry {
    return e.is_tensor() ? Entry(e.tensor().sum()) : e;
  }), ShapeError);
  REQUIRE_THROWS_WITH(td.apply(call_on_nested, [](const Entry& e) -> Entry {
    return e.is_tensor() ? Entry(e.tensor().sum()) : e;
  }), Catch::Contains("'a'"));
  ApplyOptions new_batch;
  new_batch.batch_size = std::vector<int64_t>{};
  TensorDict summed = td.apply(call_on_nested, [](const Entry& e) -> Entry {
    return e.is_tensor() ? Entry(e.tensor().sum()) : Entry();
  }, new_batch);
  CHECK(summed.batch_size().empty());
  CHECK(summed.get("a").item<double>() == 12.0);
}

TEMPLATE_LIST_TEST_CASE("named_apply passes the leaf name or its full key (case 25)", "[ops][apply]", ContractBackends) {
  TensorDict td = TestType::make(nested());
  std::set<std::string> names;
  td.named_apply([&](const NestedKey& key, const at::Tensor& x) {
    names.insert(key.repr());
    return x;
  });
  CHECK((names == std::set<std::string>{"'a'", "'inner'"}));
  names.clear();
  TensorDict out = td.named_apply(
      [&](const NestedKey& key, const at::Tensor& x) {
        names.insert(key.repr());
        return key.back() == "a" ? x + 1 : x;
      },
      /*nested_keys=*/true);
  CHECK((names == std::set<std::string>{"'a'", "('nested', 'inner')"}));
  CHECK(at::equal(out.get("a"), at::full({3, 4}, 2.0)));
}

TEMPLATE_LIST_TEST_CASE("where expands the condition to the right - pad for missing keys", "[ops][where][errors]", ContractBackends) {
  TensorDict a = TestType::make(TensorDict({{"x", at::ones({3, 2})}, {"y", at::ones({3})}}, {3}));
  TensorDict b({{"x", at::zeros({3, 2})}, {"y", at::zeros({3})}}, {3});
  at::Tensor cond = bools({1, 0, 1});
  TensorDict w = a.where(cond, b);
  CHECK(at::equal(w.get("x"), at::where(cond.unsqueeze(1), at::ones({3, 2}), at::zeros({3, 2}))));
  CHECK(at::equal(where(cond, a, b).get("y"), cond.to(at::kFloat)));
  CHECK(at::equal(a.where(cond, -1.0).get("y"), at::tensor({1.0f, -1.0f, 1.0f})));
  // A tensor `other` broadcasts against each leaf from the right, as torch.where (finding A2).
  TensorDict x_only = TestType::make(TensorDict({{"x", at::ones({3, 2})}}, {3}));
  CHECK(at::equal(x_only.where(cond, at::full({2}, 5.0)).get("x").select(0, 1), at::full({2}, 5.0)));
  TensorDict grid = TestType::make(TensorDict({{"a", at::arange(9).view({3, 3})}}, {3}));
  TensorDict picked = grid.where(cond, at::tensor({10, 20, 30}));
  CHECK(at::equal(picked.get("a").select(0, 1), at::tensor({10, 20, 30})));
  CHECK(at::equal(picked.get("a").select(0, 0), at::tensor({0, 1, 2})));
  TensorDict partial = b.exclude({"y"});
  REQUIRE_THROWS_AS(a.where(cond, partial), KeyError);
  REQUIRE_THROWS_WITH(a.where(cond, partial), Catch::Contains("'y'") && Catch::Contains("pad"));
  TensorDict padded = a.where(cond, partial, 7.0);
  CHECK(at::equal(padded.get("y"), at::tensor({1.0f, 7.0f, 1.0f})));
  REQUIRE_THROWS_AS(a.where(at::ones({4}, at::kBool), b), ShapeError);
}

TEMPLATE_LIST_TEST_CASE("masked_fill, masked_fill_ and masked_select", "[ops][mask][errors]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"x", at::ones({4, 2})}, {"n", {{"y", at::ones({4})}}}}, {4}));
  at::Tensor mask = bools({1, 0, 0, 1});
  TensorDict filled = td.masked_fill(mask, 0.0);
  CHECK(at::equal(filled.get("x").sum(1), at::tensor({0.0f, 2.0f, 2.0f, 0.0f})));
  CHECK(at::equal(td.get("x"), at::ones({4, 2})));
  td.lock_();
  td.masked_fill_(mask, 5.0);
  CHECK(at::equal(td.get({"n", "y"}), at::tensor({5.0f, 1.0f, 1.0f, 5.0f})));
  TensorDict sel = td.masked_select(mask);
  CHECK((sel.batch_size() == c10::IntArrayRef{2}));
  CHECK(at::equal(sel.get({"n", "y"}), at::full({2}, 5.0)));
  REQUIRE_THROWS_AS(td.masked_fill(at::ones({3}, at::kBool), 0.0), ShapeError);
  REQUIRE_THROWS_AS(td.masked_fill(at::ones({4}), 0.0), TypeError);
  REQUIRE_THROWS_AS(td.masked_select(at::ones({4}, at::kLong)), TypeError);
}

TEMPLATE_LIST_TEST_CASE("gather along a batch dim, index expanded to the right", "[ops][gather][errors]", ContractBackends) {
  at::Tensor x = at::arange(12, at::kFloat).reshape({3, 4});
  TensorDict td = TestType::make(TensorDict({{"x", x}, {"v", at::arange(36, at::kFloat).reshape({3, 4, 3})}}, {3, 4}));
  at::Tensor index = at::tensor({0, 3, 1, 2, 2, 0}, at::kLong).reshape({3, 2});
  TensorDict g = td.gather(1, index);
  CHECK((g.batch_size() == c10::IntArrayRef{3, 2}));
  CHECK(at::equal(g.get("x"), at::gather(x, 1, index)));
  CHECK((g.get("v").sizes() == c10::IntArrayRef{3, 2, 3}));
  CHECK(at::equal(g.get("v").select(2, 1), at::gather(td.get("v").select(2, 1), 1, index)));
  REQUIRE_THROWS_AS(td.gather(2, index), IndexError);
  REQUIRE_THROWS_AS(td.gather(1, at::zeros({3}, at::kLong)), ShapeError);
  REQUIRE_THROWS_AS(td.gather(1, index.to(at::kFloat)), TypeError);
}
