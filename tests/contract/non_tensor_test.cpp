// Contract: non-tensor leaves (Python NonTensorData / NonTensorStack) through indexing,
// stacking, shape ops, cloning and writes (semantics.md 1.15, item 7 of issue 2).
#include "support/catch_torch.h"

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using at::indexing::Slice;
using contract::ContractBackends;
using contract::Sizes;
using contract::sizes_of;

namespace {
std::string text(const TensorDict& td, KeyRef key) { return td.get_non_tensor(key).value().as_string(); }
std::string list(const TensorDict& td, KeyRef key) { return td.get_non_tensor(key).tolist().python_str(); }
}  // namespace

TEMPLATE_LIST_TEST_CASE("a string value survives indexing, shape ops and cloning", "[contract][non_tensor]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({4, 2})}, {"s", "hello"}, {"n", {{"t", "inner"}}}}, {4}));
  CHECK(text(td, "s") == "hello");
  CHECK_FALSE(td.get_non_tensor("s").is_stack());
  CHECK(text(td.index({1}), "s") == "hello");
  CHECK((text(td.index({Slice(0, 2)}), {"n", "t"}) == "inner"));
  CHECK((text(td.index({contract::mask({1, 0, 1, 1})}), "s") == "hello"));
  CHECK((text(td.index({at::tensor({3, 0}, at::kLong)}), "s") == "hello"));
  CHECK(text(td.unsqueeze(0), "s") == "hello");
  CHECK((text(td.expand({3, 4}), {"n", "t"}) == "inner"));
  CHECK(text(td.clone(), "s") == "hello");
  CHECK(text(td.to(at::kDouble), "s") == "hello");
  CHECK(text(td.split(3)[1], "s") == "hello");
  CHECK((text(td.unbind(0)[2], {"n", "t"}) == "inner"));
  CHECK(td.get_non_tensor("s").tolist().python_str() == "hello");
}

TEMPLATE_LIST_TEST_CASE("stacking equal values stays uniform, different values become a stack",
                        "[contract][non_tensor]", ContractBackends) {
  TensorDict x0 = TestType::make(TensorDict({{"a", at::zeros({})}, {"s", "x"}}));
  TensorDict x1 = TestType::make(TensorDict({{"a", at::ones({})}, {"s", "x"}}));
  TensorDict y = TestType::make(TensorDict({{"a", at::ones({})}, {"s", "y"}}));

  TensorDict same = stack({x0, x1});
  CHECK_FALSE(same.get_non_tensor("s").is_stack());
  CHECK(text(same, "s") == "x");

  TensorDict diff = stack({x0, y, x1});
  NonTensorData s = diff.get_non_tensor("s");
  REQUIRE(s.is_stack());
  CHECK_FALSE(s.is_uniform());
  CHECK(sizes_of(s.ids().sizes()) == Sizes{3});
  CHECK(s.tolist().python_str() == "['x', 'y', 'x']");
  REQUIRE_THROWS_AS(s.value(), ValueError);
  REQUIRE_THROWS_WITH(s.value(), Catch::Contains("different values") && Catch::Contains("tolist()"));

  // The stack follows indexing, cloning and further stacking.
  CHECK(text(diff.index({1}), "s") == "y");
  CHECK((list(diff.index({Slice(1, 3)}), "s") == "['y', 'x']"));
  CHECK((list(diff.index({at::tensor({2, 1}, at::kLong)}), "s") == "['x', 'y']"));
  CHECK(list(diff.clone(), "s") == "['x', 'y', 'x']");
  CHECK(text(diff.unbind(0)[1], "s") == "y");
  CHECK((list(stack({diff, diff}, 1), "s") == "[['x', 'x'], ['y', 'y'], ['x', 'x']]"));
  CHECK((list(cat({diff, same}), "s") == "['x', 'y', 'x', 'x', 'x']"));
  CHECK((text(cat({same, same}), "s") == "x"));
  // A stack whose elements are all equal reads back as the shared value.
  CHECK((diff.index({at::tensor({0, 2}, at::kLong)}).get_non_tensor("s").value().as_string() == "x"));
}

TEMPLATE_LIST_TEST_CASE("index_put_ of a different non-tensor value turns it into a stack",
                        "[contract][non_tensor]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({3})}, {"s", "x"}}, {3}));
  td.index_put_({1}, TensorDict({{"s", "y"}}));
  CHECK(list(td, "s") == "['x', 'y', 'x']");
  td.index_put_({Slice(0, 3, 2)}, TensorDict({{"s", "x"}}, {2}));
  CHECK(list(td, "s") == "['x', 'y', 'x']");
  td.index_put_({Slice()}, TensorDict({{"s", "z"}}, {3}));
  CHECK(td.get_non_tensor("s").is_uniform());
  CHECK(td.get_non_tensor("s").value().as_string() == "z");
}

TEMPLATE_LIST_TEST_CASE("indexed writes of per-element strings are stored, survive a reload, or raise",
                        "[contract][non_tensor][reload]", ContractBackends) {
  // The replay-buffer pattern: a uniform string field, then rows written one at a time and in
  // batches, nested too. Nothing may live only in memory.
  TensorDict td = TestType::make(
      TensorDict({{"a", at::zeros({4})}, {"info", "none"}, {"obs", {{"tag", "t"}, {"x", at::zeros({4, 2})}}}}, {4}));
  td.index_put_({1}, TensorDict({{"info", "one"}, {"obs", {{"tag", "t1"}}}}));
  td.index_put_({at::tensor({3, 0}, at::kLong)}, TensorDict({{"info", NonTensorData::from_list(
                                                                        json::parse(R"(["three", "zero"])"), {2})}},
                                                            {2}));
  const std::string expected = "['zero', 'one', 'none', 'three']";
  CHECK(list(td, "info") == expected);
  CHECK((list(td, {"obs", "tag"}) == "['t', 't1', 't', 't']"));
  if (TestType::kNonTensorStacks) {
    TensorDict back = TestType::reload(td);
    CHECK(list(back, "info") == expected);
    CHECK((list(back, {"obs", "tag"}) == "['t', 't1', 't', 't']"));
    CHECK(text(back.index({1}), "info") == "one");
  } else {
    // The format has no per-element strings: saving says so instead of writing the old value.
    REQUIRE_THROWS_AS(TestType::reload(td), NotImplementedError);
  }
  // A uniform value replaced by another uniform value is stored too.
  td.index_put_({Slice()}, TensorDict({{"info", "all"}, {"obs", {{"tag", "t"}}}}, {4}));
  TensorDict back = TestType::reload(td);
  CHECK(back.get_non_tensor("info").is_uniform());
  CHECK(text(back, "info") == "all");
}

TEMPLATE_LIST_TEST_CASE("index_put_ of keys the destination lacks fills the other rows with zeros or null",
                        "[contract][non_tensor][reload]", ContractBackends) {
  // Python v0.14: `td[idx] = other` preallocates the keys td lacks over its whole batch
  // (tensors zeros, non-tensors None), then writes the rows; strings as tensors.
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({4})}}, {4}));
  if (!TestType::kMutableKeys) {
    // Locked: a missing key is refused alike for tensors and strings, nothing written.
    REQUIRE_THROWS_AS(td.index_put_({1}, TensorDict({{"r", at::scalar_tensor(2.f)}})), LockedError);
    REQUIRE_THROWS_AS(td.index_put_({1}, TensorDict({{"s", "walk"}})), LockedError);
    REQUIRE_THROWS_AS(td.index_put_({Slice(0, 2)}, TensorDict({{"s", NonTensorData::from_list(
                                                                           json::parse(R"(["a", "b"])"), {2})}},
                                                                {2})),
                      LockedError);
    CHECK_FALSE(td.contains("r"));
    CHECK_FALSE(td.contains("s"));
    return;
  }
  // One row: the value there only, not in every row.
  td.index_put_({1}, TensorDict({{"r", at::scalar_tensor(2.f)}, {"s", "walk"}, {"n", {{"t", "deep"}}}}));
  CHECK(at::equal(td.get("r"), at::tensor({0.f, 2.f, 0.f, 0.f})));
  CHECK(list(td, "s") == "[None, 'walk', None, None]");
  CHECK((list(td, {"n", "t"}) == "[None, 'deep', None, None]"));
  // A slice and an index tensor of per-row strings: a writer's first batched write.
  td.index_put_({Slice(2, 4)}, TensorDict({{"u", NonTensorData::from_list(json::parse(R"(["c", "d"])"), {2})},
                                           {"v", at::ones({2, 3})}},
                                          {2}));
  CHECK(list(td, "u") == "[None, None, 'c', 'd']");
  CHECK(at::equal(td.get("v").sum(1), at::tensor({0.f, 0.f, 3.f, 3.f})));
  td.index_put_({at::tensor({3, 0}, at::kLong)},
                TensorDict({{"w", NonTensorData::from_list(json::parse(R"(["three", "zero"])"), {2})}}, {2}));
  CHECK(list(td, "w") == "['zero', None, None, 'three']");
  // Every row written: one value, as any whole write.
  td.index_put_({Slice()}, TensorDict({{"x", "all"}}, {4}));
  CHECK(td.get_non_tensor("x").is_uniform());
  TensorDict back = TestType::reload(td);
  CHECK(at::equal(back.get("r"), at::tensor({0.f, 2.f, 0.f, 0.f})));
  CHECK(list(back, "s") == "[None, 'walk', None, None]");
  CHECK((list(back, {"n", "t"}) == "[None, 'deep', None, None]"));
  CHECK(list(back, "u") == "[None, None, 'c', 'd']");
  CHECK(list(back, "w") == "['zero', None, None, 'three']");
  CHECK(text(back, "x") == "all");
}

TEMPLATE_LIST_TEST_CASE("set_non_tensor_ replaces a stored value in place, also when locked",
                        "[contract][non_tensor][reload]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({2})}, {"n", {{"s", "old"}}}}, {2}));
  td.lock_();
  td.set_non_tensor_({"n", "s"}, NonTensorData("new"));
  CHECK((text(td, {"n", "s"}) == "new"));
  CHECK((text(TestType::reload(td), {"n", "s"}) == "new"));
  REQUIRE_THROWS_AS(td.set_non_tensor_({"n", "zz"}, NonTensorData("x")), KeyError);
  REQUIRE_THROWS_AS(td.set_non_tensor_("a", NonTensorData("x")), TypeError);
  REQUIRE_THROWS_WITH(td.set_non_tensor_("a", NonTensorData("x")),
                      Catch::Contains("set_non_tensor_ at 'a' which holds"));
  // A per-element value must have the level's batch shape.
  REQUIRE_THROWS_AS(td.set_non_tensor_({"n", "s"}, NonTensorData::from_list(json::parse(R"(["x", "y", "z"])"), {3})),
                    ShapeError);
  CHECK((text(td, {"n", "s"}) == "new"));
}

TEMPLATE_LIST_TEST_CASE("row-by-row non-tensor writes keep the value pool bounded", "[contract][non_tensor]",
                        ContractBackends) {
  const int64_t n = 64;
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({n})}, {"s", "-"}}, {n}));
  for (int round = 0; round < 3; ++round) {
    for (int64_t i = 0; i < n; ++i) td.index_put_({i}, TensorDict({{"s", std::to_string(round * 1000 + i)}}));
  }
  NonTensorData s = td.get_non_tensor("s");
  CHECK(s.pool().size() <= static_cast<size_t>(2 * n + 16));
  CHECK(text(td.index({5}), "s") == "2005");
  CHECK(text(td.index({n - 1}), "s") == std::to_string(2000 + n - 1));
}

TEST_CASE("non-tensor stacks from lists: shape validation and JSON values", "[non_tensor]") {
  json::Value rows(json::Array{json::Array{1, 2}, json::Array{3, json::Value()}});
  NonTensorData data = NonTensorData::from_list(rows, {2, 2});
  CHECK(data.tolist() == rows);
  CHECK(data.tolist().python_str() == "[[1, 2], [3, None]]");
  REQUIRE_THROWS_AS(NonTensorData::from_list(rows, {3}), ValueError);
  REQUIRE_THROWS_WITH(NonTensorData::from_list(rows, {2, 3}), Catch::Contains("does not match the batch size"));

  TensorDict td({}, {2, 2});
  td.set("v", data);
  CHECK((td.index({1, 1}).get_non_tensor("v").value().is_null()));
  CHECK((td.index({0, 1}).get_non_tensor("v").value().as_int() == 2));
  REQUIRE_THROWS_AS(TensorDict({}, {2}).set("v", data), ShapeError);
  REQUIRE_THROWS_WITH(TensorDict({}, {2}).set("v", data),
                      Catch::Contains("non-tensor stack of shape torch.Size([2, 2])") && Catch::Contains("'v'"));
  REQUIRE_THROWS_AS(td.set_batch_size({4}), ShapeError);
  REQUIRE_THROWS_AS(NonTensorData::from_ids({json::Value("a")}, at::zeros({2}, at::kInt)), TypeError);

  // Values compare element-wise, whatever the storage.
  CHECK((NonTensorData("a") == NonTensorData::from_list(json::Value(json::Array{"a", "a"}), {2})));
  CHECK((NonTensorData("a") != NonTensorData::from_list(json::Value(json::Array{"a", "b"}), {2})));
}

TEMPLATE_LIST_TEST_CASE("update_ writes non-tensor values too, or refuses before any write (issue 30 item 7)",
                        "[contract][non_tensor][reload]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({2})}, {"s", "old"}, {"n", {{"t", "x"}}}}, {2}));
  td.update_(TensorDict({{"a", at::ones({2})}, {"s", "new"}, {"n", {{"t", "y"}}}}, {2}));
  CHECK(text(td, "s") == "new");
  CHECK((text(td, {"n", "t"}) == "y"));
  CHECK(at::equal(td.get("a"), at::ones({2})));
  CHECK(text(TestType::reload(td), "s") == "new");
  // A key the destination lacks, or holds as a tensor: refused, and nothing is written.
  REQUIRE_THROWS_AS(td.update_(TensorDict({{"a", at::full({2}, 5.0)}, {"zz", "x"}}, {2})), KeyError);
  REQUIRE_THROWS_AS(td.update_(TensorDict({{"s", at::zeros({2})}}, {2})), TypeError);
  REQUIRE_THROWS_AS(td.update_(TensorDict({{"a", "x"}}, {2})), TypeError);
  CHECK(at::equal(td.get("a"), at::ones({2})));
  CHECK(text(td, "s") == "new");
}
