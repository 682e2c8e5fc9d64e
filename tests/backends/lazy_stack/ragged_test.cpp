// Ragged lazy stacks a new user could not break (issue 30, items 1-3, 5 and 6): episodes of
// different lengths holding per-row strings print, read, index and take writes per member.

#include "support/catch_torch.h"

#include <sstream>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/tensordict.h>

using namespace tensordict;
using at::indexing::Slice;
using Sizes = std::vector<int64_t>;

namespace {

Sizes ragged_sizes(c10::IntArrayRef s) { return {s.begin(), s.end()}; }

// An episode of `n` steps: a reward per step and a per-row string "<prefix><i>".
TensorDict episode(int64_t n, const std::string& prefix) {
  std::vector<TensorDict> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(TensorDict({{"r", at::zeros({})}, {"s", prefix + std::to_string(i)}}));
  return stack(rows, 0);
}

std::string printed(const TensorDict& td) {
  std::ostringstream os;
  os << td;
  return os.str();
}

}  // namespace

TEST_CASE("a ragged lazy stack with per-row strings prints (item 1)", "[lazy][ragged]") {
  LazyStackedTensorDict ls = lazy_stack({episode(5, "a"), episode(8, "b")});
  REQUIRE(ragged_sizes(ls.batch_size()) == Sizes{2, -1});
  std::string text;
  REQUIRE_NOTHROW(text = printed(ls));
  CHECK_THAT(text, Catch::Contains("r: Tensor(shape=torch.Size([2, -1])"));
  CHECK_THAT(text, Catch::Contains("s: NonTensorStack(\n"));
  CHECK_THAT(text, Catch::Contains("[['a0', 'a1', 'a2', 'a3', 'a4'], ['b0', 'b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7']]"));
  CHECK_THAT(text, Catch::Contains("batch_size=torch.Size([2, -1])"));
}

TEST_CASE("a ragged lazy stack's strings read per member (item 2)", "[lazy][ragged]") {
  LazyStackedTensorDict ls = lazy_stack({episode(5, "a"), episode(8, "b")});
  NonTensorData s = ls.get_non_tensor("s");
  CHECK(s.is_ragged());
  CHECK(ragged_sizes(s.shape()) == Sizes{2, -1});
  REQUIRE(s.members().size() == 2);
  CHECK(ragged_sizes(s.members()[1].shape()) == Sizes{8});
  CHECK(s.members()[1].tolist().as_array()[7].as_string() == "b7");
  CHECK(s.tolist().as_array()[0].as_array().size() == 5);
  CHECK(!s.is_uniform());
  // What needs the dense ids says why it cannot have them.
  REQUIRE_THROWS_AS(s.ids(), ShapeError);
  REQUIRE_THROWS_WITH(s.ids(), Catch::Contains("ragged lazy stack") && Catch::Contains("torch.Size([5]), torch.Size([8])"));
  REQUIRE_THROWS_AS(s.value(), ValueError);
  // A ragged value copies into a stack of the same members' shapes, member by member.
  ls.set("s2", EntryInit(s));
  CHECK(ls.member(1).get_non_tensor("s2").tolist().as_array()[3].as_string() == "b3");
  std::ostringstream os;
  os << s;
  CHECK_THAT(os.str(), Catch::StartsWith("NonTensorStack([['a0'"));
}

TEST_CASE("one string per member of different lengths keeps each member's length (item 3)", "[lazy][ragged]") {
  TensorDict a({{"r", at::zeros({5})}, {"s", "x"}}, {5});
  TensorDict b({{"r", at::zeros({8})}, {"s", "y"}}, {8});
  LazyStackedTensorDict ls = lazy_stack({a, b});
  NonTensorData s = ls.get_non_tensor("s");
  CHECK(ragged_sizes(s.shape()) == Sizes{2, -1});
  json::Value lists = s.tolist();
  CHECK(lists.as_array()[0].as_array().size() == 5);
  CHECK(lists.as_array()[1].as_array().size() == 8);
  CHECK(lists.as_array()[1].as_array()[7].as_string() == "y");
  const std::string text = printed(ls);
  CHECK_THAT(text, Catch::Contains("batch_size=torch.Size([2, -1])"));
  CHECK_THAT(text, !Catch::Contains("torch.Size([2, 5])"));
  // The same value everywhere stays one value.
  TensorDict c({{"r", at::zeros({8})}, {"s", "x"}}, {8});
  NonTensorData same = lazy_stack({a, c}).get_non_tensor("s");
  CHECK(!same.is_stack());
  CHECK(same.value().as_string() == "x");
}

TEST_CASE("a ragged stack along dim 1 joins its members' strings at that depth", "[lazy][ragged]") {
  TensorDict a({{"s", NonTensorData::from_list(json::parse(R"([["a","b"],["c","d"]])"), {2, 2})}}, {2, 2});
  TensorDict b({{"s", NonTensorData::from_list(json::parse(R"([["e"],["f"]])"), {2, 1})}}, {2, 1});
  LazyStackedTensorDict ls = lazy_stack({a, b}, 1);
  CHECK(ragged_sizes(ls.batch_size()) == Sizes{2, 2, -1});
  CHECK(ls.get_non_tensor("s").tolist().python_str() == "[[['a', 'b'], ['e']], [['c', 'd'], ['f']]]");
  CHECK_NOTHROW(printed(ls));
}

TEST_CASE("writing a whole member through a ragged stack (item 5)", "[lazy][ragged]") {
  LazyStackedTensorDict ls = lazy_stack({episode(5, "a"), episode(8, "b")});
  TensorDict fresh = episode(8, "c");
  fresh.set("r", at::arange(8, at::kFloat));
  ls.index_put_({1}, fresh);
  CHECK(at::equal(ls.member(1).get("r"), at::arange(8, at::kFloat)));
  CHECK(ls.member(1).get_non_tensor("s").tolist().as_array()[2].as_string() == "c2");
  CHECK(at::equal(ls.member(0).get("r"), at::zeros({5})));  // member 0 untouched
  // Rows of one member, and the same row of every member.
  ls.index_put_({0, Slice(1, 3)}, TensorDict({{"r", at::full({2}, 7.0)}}, {2}));
  CHECK(ls.member(0).get("r")[2].item<float>() == 7.0f);
  ls.index_put_({Slice(), 4}, TensorDict({{"r", at::tensor({10.0f, 20.0f})}}, {2}));
  CHECK(ls.member(0).get("r")[4].item<float>() == 10.0f);
  CHECK(ls.member(1).get("r")[4].item<float>() == 20.0f);
  // A member of another length is refused by that member, naming the shapes.
  REQUIRE_THROWS_AS(ls.index_put_({0}, episode(8, "d")), ShapeError);
  // A value with one entry per member: its own members go to ours.
  ls.index_put_({Slice()}, lazy_stack({episode(5, "e"), episode(8, "f")}));
  CHECK(ls.member(1).get_non_tensor("s").tolist().as_array()[7].as_string() == "f7");
}

TEST_CASE("a ragged dim is indexed per member (item 6)", "[lazy][ragged]") {
  LazyStackedTensorDict ls = lazy_stack({episode(5, "a"), episode(8, "b")});
  TensorDict row = ls.index({1, 2});
  CHECK(row.batch_dims() == 0);
  CHECK(row.get_non_tensor("s").value().as_string() == "b2");
  CHECK(ls.index({1, -1}).get_non_tensor("s").value().as_string() == "b7");
  // Member 0 has 5 rows: its own range error, naming its size.
  REQUIRE_THROWS_AS(ls.index({0, 6}), IndexError);
  REQUIRE_THROWS_AS(ls.index({2}), IndexError);
  // Every member's first three rows: no longer ragged.
  TensorDict head = ls.index({Slice(), Slice(0, 3)});
  CHECK(ragged_sizes(head.batch_size()) == Sizes{2, 3});
  CHECK(head.get_non_tensor("s").tolist().python_str() == "[['a0', 'a1', 'a2'], ['b0', 'b1', 'b2']]");
  // Row 4 of each member, an Ellipsis and a None.
  CHECK(ls.index({at::indexing::Ellipsis, 4}).get_non_tensor("s").tolist().python_str() == "['a4', 'b4']");
  CHECK(ragged_sizes(ls.index({at::indexing::None, 1}).batch_size()) == Sizes{1, 8});
  // Members picked by an index tensor stay ragged.
  TensorDict picked = ls.index({at::tensor({1, 0, 1})});
  CHECK(ragged_sizes(picked.batch_size()) == Sizes{3, -1});
  CHECK(picked.index({0}).is_same(ls.member(1)));
  // A mask over the stack dim and the ragged dim cannot be split: the message says what to do.
  REQUIRE_THROWS_WITH(ls.index({at::ones({2, 5}, at::kBool)}), Catch::Contains("index the stack dim on its own first"));
}

TEST_CASE("unbind and stack of ragged stacks", "[lazy][ragged]") {
  LazyStackedTensorDict ls = lazy_stack({episode(5, "a"), episode(8, "b")});
  std::vector<TensorDict> members = ls.unbind(0);
  REQUIRE(members.size() == 2);
  CHECK(members[1].is_same(ls.member(1)));
  REQUIRE_THROWS_AS(ls.unbind(1), ShapeError);
  TensorDict both = stack({ls, lazy_stack({episode(5, "c"), episode(8, "d")})}, 0);
  CHECK(LazyStackedTensorDict::is_lazy_stack(both));
  CHECK(ragged_sizes(both.batch_size()) == Sizes{2, 2, -1});
  CHECK(both.index({1, 1, 7}).get_non_tensor("s").value().as_string() == "d7");
}

TEST_CASE("what cannot index a ragged batch says so and what to write instead", "[lazy][ragged][errors]") {
  LazyStackedTensorDict ls = lazy_stack({episode(5, "a"), episode(8, "b")});
  REQUIRE_THROWS_AS(ls.set_at_("r", at::ones({}), {1, 2}), IndexError);
  REQUIRE_THROWS_WITH(ls.set_at_("r", at::ones({}), {1, 2}), Catch::Contains("has ragged dims") &&
                                                                 Catch::Contains("index it first"));
  // What the message suggests works.
  ls.index({1}).set_at_("r", at::ones({}), {2});
  CHECK(ls.member(1).get("r")[2].item<float>() == 1.0f);
}

TEST_CASE("to_padded_tensor pads a ragged stack into dense leaves, with a mask, as Python", "[lazy_stack][ragged][padded]") {
  TensorDict a({{"obs", at::ones({2, 3})}, {"id", at::zeros({2}, at::kLong)}}, {2});
  TensorDict b({{"obs", at::full({4, 3}, 2.f)}, {"id", at::ones({4}, at::kLong)}}, {4});
  LazyStackedTensorDict ls = lazy_stack({a, b});
  REQUIRE(ragged_sizes(ls.batch_size()) == Sizes{2, -1});
  TensorDict padded = ls.to_padded_tensor(-1.0, NestedKey("mask"));
  CHECK(ragged_sizes(padded.batch_size()) == Sizes{2, 4});
  CHECK(at::equal(padded.get("obs")[0].slice(0, 0, 2), at::ones({2, 3})));
  CHECK(at::equal(padded.get("obs")[0].slice(0, 2, 4), at::full({2, 3}, -1.f)));
  CHECK(at::equal(padded.get("id")[0], at::tensor({0, 0, -1, -1}, at::kLong)));
  CHECK(at::equal(padded.get("mask"), at::tensor({1, 1, 0, 0, 1, 1, 1, 1}).to(at::kBool).view({2, 4})));
  // A stack that is not ragged: no mask allowed, leaves stacked, batch kept.
  LazyStackedTensorDict even = lazy_stack({a, a.clone()});
  CHECK_THROWS_WITH(even.to_padded_tensor(0.0, NestedKey("mask")),
                    Catch::Contains("mask_key should only be provided if the heterogenous dimension is part of the batch-size."));
  CHECK(ragged_sizes(even.to_padded_tensor().batch_size()) == Sizes{2, 2});
  // Nested-tensor leaves (densify's ragged layout) become padded tensors.
  TensorDict nested = ls.densify(DensifyLayout::Nested);
  REQUIRE(nested.get("obs").is_nested());
  TensorDict dense = nested.to_padded_tensor(5.0);
  CHECK(ragged_sizes(dense.get("obs").sizes()) == Sizes{2, 4, 3});
  CHECK(dense.get("obs")[0][3][0].item<float>() == 5.f);
}
