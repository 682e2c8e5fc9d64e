// Contract: batch indexing and index_put_ (semantics.md 1.8, cases 1.19.13-17).
#include "support/catch_torch.h"

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using at::indexing::Ellipsis;
using at::indexing::None;
using at::indexing::Slice;
using contract::ContractBackends;
using contract::shares_storage;
using contract::Sizes;
using contract::sizes_of;

namespace {
// bs [4, 5]: a [4, 5, 3] holding 0..59, nested n with an extra batch dim, non-tensor s.
TensorDict indexing_grid() {
  at::Tensor a = at::arange(60, at::kFloat).view({4, 5, 3});
  TensorDict inner({{"x", at::arange(40).view({4, 5, 2})}}, {4, 5, 2});
  return TensorDict({{"a", a}, {"n", inner}, {"s", "hello"}}, {4, 5});
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("indexing with integers, slices, None, Ellipsis (case 13)", "[contract][indexing]",
                        ContractBackends) {
  TensorDict td = TestType::make(indexing_grid());
  at::Tensor a = td.get("a");

  TensorDict r = td.index({2, 2});
  CHECK(r.batch_size().empty());
  CHECK((at::equal(r.get("a"), a.index({2, 2}))));
  CHECK(sizes_of(r.get_tensordict("n").batch_size()) == Sizes{2});  // extra dim kept
  CHECK((at::equal(r.get({"n", "x"}), td.get({"n", "x"}).index({2, 2}))));

  r = td.index({None, Slice(None, 2)});
  CHECK((sizes_of(r.batch_size()) == Sizes{1, 2, 5}));
  CHECK((sizes_of(r.get("a").sizes()) == Sizes{1, 2, 5, 3}));
  CHECK((sizes_of(r.get_tensordict("n").batch_size()) == Sizes{1, 2, 5, 2}));

  r = td.index({Ellipsis, 0});
  CHECK(sizes_of(r.batch_size()) == Sizes{4});
  CHECK((at::equal(r.get("a"), a.index({Slice(), 0}))));  // event dims never indexed
  CHECK((sizes_of(r.get({"n", "x"}).sizes()) == Sizes{4, 2}));

  r = td.index({-1});
  CHECK(at::equal(r.get("a"), a[3]));
  r = td.index({Slice(1, None, 2), Slice(None, None, 3)});
  CHECK((sizes_of(r.batch_size()) == Sizes{2, 2}));
  CHECK((at::equal(r.get("a"), a.index({Slice(1, None, 2), Slice(None, None, 3)}))));
  r = td.index({Slice(-3, -1)});
  CHECK((sizes_of(r.batch_size()) == Sizes{2, 5}));
  CHECK(at::equal(r.get("a"), a.slice(0, 1, 3)));
  r = td.index({Slice(10, 20)});
  CHECK((sizes_of(r.batch_size()) == Sizes{0, 5}));
  r = td.index({Ellipsis, None});
  CHECK((sizes_of(r.batch_size()) == Sizes{4, 5, 1}));
  CHECK((sizes_of(r.get("a").sizes()) == Sizes{4, 5, 1, 3}));
  r = td.index({true});
  CHECK((sizes_of(r.batch_size()) == Sizes{1, 4, 5}));
  r = td.index({false});
  CHECK((sizes_of(r.batch_size()) == Sizes{0, 4, 5}));
  CHECK(r.get("a").numel() == 0);
}

TEMPLATE_LIST_TEST_CASE("identity indices return the tensordict itself (case 13)", "[contract][indexing]",
                        ContractBackends) {
  TensorDict td = TestType::make(indexing_grid());
  CHECK(td.index({Slice()}).is_same(td));
  CHECK((td.index({Slice(), Slice()}).is_same(td)));
  CHECK(td.index({Ellipsis}).is_same(td));
  CHECK(td.index(c10::ArrayRef<at::indexing::TensorIndex>{}).is_same(td));
  CHECK_FALSE((td.index({Slice(0, 3)}).is_same(td)));
}

TEMPLATE_LIST_TEST_CASE("indexing with masks and long tensors, several dims (case 13)", "[contract][indexing]",
                        ContractBackends) {
  TensorDict td = TestType::make(indexing_grid());
  at::Tensor a = td.get("a");

  at::Tensor idx = at::tensor({0, 2}, at::kLong);
  TensorDict r = td.index({idx});
  CHECK((sizes_of(r.batch_size()) == Sizes{2, 5}));
  CHECK(at::equal(r.get("a"), a.index({idx})));
  CHECK((sizes_of(r.get_tensordict("n").batch_size()) == Sizes{2, 5, 2}));

  at::Tensor mask = contract::mask({1, 0, 1, 0});
  r = td.index({mask});
  CHECK((sizes_of(r.batch_size()) == Sizes{2, 5}));
  CHECK(at::equal(r.get("a"), a.index({mask})));

  r = td.index({Slice(), at::tensor({0, 1}, at::kLong)});
  CHECK((sizes_of(r.batch_size()) == Sizes{4, 2}));
  CHECK((at::equal(r.get("a"), a.index({Slice(), at::tensor({0, 1}, at::kLong)}))));

  // Both dims at once: advanced indices broadcast together.
  at::Tensor rows = at::tensor({0, 3, 1}, at::kLong), cols = at::tensor({4, 0, 2}, at::kLong);
  r = td.index({rows, cols});
  CHECK(sizes_of(r.batch_size()) == Sizes{3});
  CHECK((at::equal(r.get("a"), a.index({rows, cols}))));
  CHECK((sizes_of(r.get({"n", "x"}).sizes()) == Sizes{3, 2}));

  // A mask over both batch dims.
  at::Tensor mask2 = a.select(2, 0).remainder(2) == 0;
  r = td.index({mask2});
  CHECK(sizes_of(r.batch_size()) == Sizes{mask2.sum().item<int64_t>()});
  CHECK(at::equal(r.get("a"), a.index({mask2})));

  // Integer then tensor; a 2-d index tensor.
  at::Tensor square = at::tensor({0, 1, 2, 3}, at::kLong).view({2, 2});
  r = td.index({1, square});
  CHECK((sizes_of(r.batch_size()) == Sizes{2, 2}));
  CHECK(at::equal(r.get("a"), a.index({1, square})));
}

TEMPLATE_LIST_TEST_CASE("indexing errors: too many indices, bad masks, out of range, two ellipses",
                        "[contract][indexing][errors]", ContractBackends) {
  TensorDict td = TestType::make(indexing_grid());
  REQUIRE_THROWS_AS(td.index({0, 0, 0}), IndexError);
  REQUIRE_THROWS_WITH(td.index({0, 0, 0}),
                      Catch::Contains("too many indices") && Catch::Contains("3 batch dims indexed but only 2 exist"));
  REQUIRE_THROWS_AS(td.index({Ellipsis, 0, 0, 0}), IndexError);
  REQUIRE_THROWS_AS(td.index({at::ones({4, 5, 3}, at::kBool)}), IndexError);
  REQUIRE_THROWS_AS(td.index({at::ones({3}, at::kBool)}), IndexError);
  REQUIRE_THROWS_WITH(td.index({at::ones({3}, at::kBool)}),
                      Catch::Contains("boolean mask of shape [3] does not match the batch dims [4]"));
  REQUIRE_THROWS_AS(td.index({Slice(), at::ones({4}, at::kBool)}), IndexError);
  REQUIRE_THROWS_AS(td.index({4}), IndexError);
  REQUIRE_THROWS_WITH(td.index({0, -6}), Catch::Contains("index -6 is out of range for batch dim 1 of size 5"));
  REQUIRE_THROWS_AS(td.index({Ellipsis, 0, Ellipsis}), RuntimeError);
  REQUIRE_THROWS_WITH(td.index({Ellipsis, Ellipsis}), Catch::Contains("An index can only have one ellipsis at most."));
  REQUIRE_THROWS_AS(td.index({at::tensor({0.5f})}), IndexError);
  REQUIRE_THROWS_AS(td.index({at::tensor({7}, at::kLong)}), IndexError);
}

TEMPLATE_LIST_TEST_CASE("indexing a tensordict without batch dims (case 14)", "[contract][indexing][errors]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({})}}));
  REQUIRE_THROWS_AS(td.index({0}), RuntimeError);
  REQUIRE_THROWS_WITH(td.index({0}),
                      Catch::Contains("indexing a tensordict with td.batch_dims==0 is not permitted. Got index 0."));
  REQUIRE_THROWS_AS(td.index({Slice()}), RuntimeError);
  // None adds a batch dim even here.
  TensorDict r = td.index({None});
  CHECK(sizes_of(r.batch_size()) == Sizes{1});
  CHECK(sizes_of(r.get("a").sizes()) == Sizes{1});
}

TEMPLATE_LIST_TEST_CASE("basic indices give views, advanced ones give copies (case 15)", "[contract][indexing]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({3, 4})}, {"n", {{"x", at::zeros({3, 4})}}}}, {3, 4}));
  TensorDict row = td.index({0});
  // Views of the storage where leaves alias it; a backend whose reads are copies gives copies.
  CHECK(shares_storage(row.get("a"), td.get("a")) == TestType::kLeavesAliasStorage);
  // A lazy stack's row is its member, which holds the data; a file's row is a view of it.
  const bool row_writes_through = TestType::kLeavesAliasStorage || TestType::kLazyStack || TestType::kViewsWriteThrough;
  row.set_("a", at::ones({4}));
  CHECK(at::equal(td.get("a")[0], at::ones({4})) == row_writes_through);
  row.set_({"n", "x"}, at::ones({4}));
  CHECK((at::equal(td.get({"n", "x"})[0], at::ones({4}))) == row_writes_through);

  // Advanced indices copy, except on a lazy stack, where they pick members (no copy), and on a
  // file, whose views select elements of any index.
  const bool picks_write_through = TestType::kLazyStack || TestType::kViewsWriteThrough;
  TensorDict picked = td.index({at::tensor({1}, at::kLong)});
  picked.set_("a", at::ones({1, 4}));
  CHECK(at::equal(td.get("a")[1], at::ones({4})) == picks_write_through);

  TensorDict masked = td.index({contract::mask({0, 0, 1})});
  masked.set_("a", at::ones({1, 4}));
  CHECK(at::equal(td.get("a")[2], at::ones({4})) == picks_write_through);

  if (TestType::kViewsWriteThrough) {
    // set of an existing key on a view writes its elements (a view cannot replace a dataset).
    TensorDict row2 = td.index({2});
    row2.set("a", at::full({4}, 9.0));
    CHECK(at::equal(td.get("a")[2], at::full({4}, 9.0)));
    REQUIRE_THROWS_AS(row2.set("new", at::zeros({4})), NotImplementedError);
    return;
  }
  if (!TestType::kMutableKeys || TestType::kLazyStack) return;
  // Replacing an entry of the result does not write through.
  TensorDict row2 = td.index({2});
  row2.set("a", at::full({4}, 9.0));
  CHECK(at::equal(td.get("a")[2], at::zeros({4})));
}

TEMPLATE_LIST_TEST_CASE("index_put_ of a tensordict writes every key (case 16-17)", "[contract][indexing]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({4, 3})}, {"n", {{"x", at::zeros({4, 3, 2})}}}}, {4, 3}));
  td.index_put_({0}, TensorDict({{"a", at::ones({3})}, {"n", {{"x", at::ones({3, 2})}}}}, {3}));
  CHECK(at::equal(td.get("a")[0], at::ones({3})));
  CHECK((at::equal(td.get({"n", "x"})[0], at::ones({3, 2}))));
  CHECK(at::equal(td.get("a")[1], at::zeros({3})));

  // A source batch that is a suffix of the indexed batch broadcasts: td[:1] = td[0].
  td.index_put_({Slice(None, 2)}, td.index({0}));
  CHECK(at::equal(td.get("a")[1], at::ones({3})));

  // Mask and long index destinations.
  td.index_put_({contract::mask({0, 0, 1, 1})}, TensorDict({{"a", at::full({2, 3}, 2.0)}}, {2, 3}));
  CHECK(at::equal(td.get("a")[3], at::full({3}, 2.0)));
  td.index_put_({Slice(), at::tensor({2}, at::kLong)}, TensorDict({{"a", at::full({4, 1}, 3.0)}}, {4, 1}));
  CHECK(at::equal(td.get("a").select(1, 2), at::full({4}, 3.0)));
  CHECK(td.get("a")[0][0].item<float>() == 1.0f);

  REQUIRE_THROWS_AS(td.index_put_({Slice(0, 2)}, TensorDict({{"a", at::zeros({3, 3})}}, {3, 3})), ShapeError);
  REQUIRE_THROWS_WITH(td.index_put_({Slice(0, 2)}, TensorDict({{"a", at::zeros({3, 3})}}, {3, 3})),
                      Catch::Contains("indexed destination TensorDict batch size is torch.Size([2, 3])") &&
                          Catch::Contains("batch_size = torch.Size([4, 3])") &&
                          Catch::Contains("differs from the source batch size torch.Size([3, 3])"));
  REQUIRE_THROWS_AS(td.index_put_({0}, TensorDict({{"a", at::zeros({3, 5})}}, {3})), ShapeError);
  REQUIRE_THROWS_WITH(td.index_put_({0}, TensorDict({{"a", at::zeros({3, 5})}}, {3})),
                      Catch::Contains("cannot write a value of shape torch.Size([3, 5]) into 'a'"));
  REQUIRE_THROWS_AS(td.index_put_({0}, TensorDict({{"n", at::zeros({3})}}, {3})), TypeError);
  REQUIRE_THROWS_AS(td.index_put_({0, 0, 0}, TensorDict()), IndexError);
  // No row selected: a value that `leaf[index] = value` refuses is still refused.
  REQUIRE_THROWS_AS(td.index_put_({Slice(0, 0)}, TensorDict({{"a", at::zeros({0, 3, 5})}}, {0, 3})), ShapeError);
}

TEMPLATE_LIST_TEST_CASE("index_put_ of a tensor or a scalar writes every leaf", "[contract][indexing]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({4, 3})}, {"n", {{"x", at::zeros({4, 3})}}}}, {4, 3}));
  td.index_put_({1}, 7.0);
  CHECK(at::equal(td.get("a")[1], at::full({3}, 7.0)));
  CHECK((at::equal(td.get({"n", "x"})[1], at::full({3}, 7.0))));
  td.index_put_({Slice(), 0}, at::tensor({1.0f, 2.0f, 3.0f, 4.0f}));
  CHECK((at::equal(td.get("a").select(1, 0), at::tensor({1.0f, 2.0f, 3.0f, 4.0f}))));
  td.index_put_({contract::mask({1, 0, 0, 1})}, 0.5);
  CHECK((at::equal(td.get({"n", "x"})[3], at::full({3}, 0.5))));
  td.index_put_({at::tensor({2}, at::kLong)}, at::full({1, 3}, 4.0));
  CHECK(at::equal(td.get("a")[2], at::full({3}, 4.0)));
  REQUIRE_THROWS_AS(td.index_put_({1}, at::zeros({5})), ShapeError);
  REQUIRE_THROWS_WITH(td.index_put_({1}, at::zeros({5})), Catch::Contains("cannot write into 'a'"));
  REQUIRE_THROWS_AS(td.index_put_({0, 0, 0}, 1.0), IndexError);
  REQUIRE_THROWS_AS(td.index_put_({Slice(0, 0)}, at::zeros({5})), ShapeError);  // no row selected
  REQUIRE_THROWS_AS(td.index_put_({contract::mask({0, 0, 0, 0})}, at::zeros({5})), ShapeError);
}

TEMPLATE_LIST_TEST_CASE("index_put_ pre-allocates absent keys as zeros (case 16)", "[contract][indexing]",
                        ContractBackends) {
  if (!TestType::kMutableKeys) return;
  TensorDict buf = TestType::make(TensorDict({}, {5, 3}));
  buf.index_put_({0}, TensorDict({{"x", at::ones({3, 1})}, {"n", {{"y", at::ones({3, 2}, at::kLong)}}}}, {3}));
  REQUIRE(buf.contains("x"));
  CHECK((sizes_of(buf.get("x").sizes()) == Sizes{5, 3, 1}));
  CHECK((at::equal(buf.get("x")[0], at::ones({3, 1}))));
  CHECK((at::equal(buf.get("x").slice(0, 1), at::zeros({4, 3, 1}))));
  CHECK((sizes_of(buf.get({"n", "y"}).sizes()) == Sizes{5, 3, 2}));
  CHECK((buf.get({"n", "y"}).scalar_type() == at::kLong));
  CHECK((sizes_of(buf.get_tensordict("n").batch_size()) == Sizes{5, 3}));
  CHECK((buf.get({"n", "y"}).sum().item<int64_t>() == 6));
}
