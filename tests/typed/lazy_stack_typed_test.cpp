// Typed classes over lazy stacks (issue 13, item 6): from_tensordict wraps a LazyStackedTensorDict
// live, element i is the class over member i itself, field reads stack, writes reach the
// members, and typed objects stack lazily into their own class.
#include "support/catch_torch.h"

#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/backends/lazy_stack.h>

#include "rl_transition.td.h"

using namespace tensordict;
using rl::Observation;
using rl::Step;
using rl::Transition;

namespace {

Observation lazy_observation(int64_t n, int64_t state_size, const char* label) {
  return Observation({{"pixels", at::full({n, 84, 84, 3}, state_size, at::kByte)},
                      {"state", at::randn({n, state_size})},
                      {"label", label}},
                     {n});
}

Transition lazy_transition(int64_t n, float reward) {
  Transition t;
  t.set_batch_size({n});
  t.set_done(at::zeros({n}, at::kBool))
      .set_step_count(at::arange(n))
      .set_obs(lazy_observation(n, 5, "cam"))
      .set_action(at::randn({n, 4}))
      .set_reward(at::full({n}, reward));
  return t;
}

}  // namespace

TEST_CASE("a TypedTensorDict wraps a lazy stack: element i is the member, fields stack", "[typed][lazy]") {
  Transition a = lazy_transition(3, 1.0F);
  Transition b = lazy_transition(3, 2.0F);
  LazyStackedTensorDict ls = lazy_stack({a, b});
  Transition t = Transition::from_tensordict(ls);
  CHECK((t.batch_size() == c10::IntArrayRef{2, 3}));
  CHECK(LazyStackedTensorDict::is_lazy_stack(t));

  // Element i is a Transition over the member itself: same storage, live both ways.
  Transition first = t.index({1});
  CHECK(first.is_same(b));
  first.set_reward(at::full({3}, 7.0F));
  CHECK(at::equal(b.reward(), at::full({3}, 7.0F)));

  // Field reads stack the members' leaves, nested classes come back as lazy stacks.
  CHECK(at::equal(t.action(), at::stack({a.action(), b.action()})));
  Observation obs = t.obs();
  CHECK(LazyStackedTensorDict::is_lazy_stack(obs.tensordict()));
  CHECK(at::equal(obs.pixels(), at::stack({a.obs().pixels(), b.obs().pixels()})));
  CHECK(obs.index({0}).tensordict().is_same(a.obs().tensordict()));

  // A whole-field write is checked against the lazy batch and unbound into the members.
  t.set_reward(at::stack({at::full({3}, 3.0F), at::full({3}, 4.0F)}));
  CHECK(at::equal(a.reward(), at::full({3}, 3.0F)));
  CHECK(at::equal(b.reward(), at::full({3}, 4.0F)));
  REQUIRE_THROWS_AS(t.set_reward(at::ones({3})), ShapeError);
  REQUIRE_THROWS_AS(t.set_action(at::ones({2, 3, 5})), ShapeError);

  // A typed row write goes to the member it selects, and only to it.
  Transition row = lazy_transition(3, 9.0F);
  t.index_put_({0}, row);
  CHECK(at::equal(a.reward(), at::full({3}, 9.0F)));
  CHECK(at::equal(b.reward(), at::full({3}, 4.0F)));
  CHECK(at::equal(a.obs().state(), row.obs().state()));
  // In-place math through the typed handle reaches every member.
  t.apply_([](const at::Tensor& x) { return x.is_floating_point() ? x * 2 : x; });
  CHECK(at::equal(b.reward(), at::full({3}, 8.0F)));
  CHECK(at::equal(a.reward(), at::full({3}, 18.0F)));
}

TEST_CASE("from_tensordict over a lazy stack checks the common keys only", "[typed][lazy][errors]") {
  Transition a = lazy_transition(2, 1.0F);
  Transition b = lazy_transition(2, 1.0F);
  TensorDict partial = b.clone();
  partial.erase("reward");
  // 'reward' is exclusive to member 0, so the stack does not hold it: a required field missing.
  LazyStackedTensorDict ls = lazy_stack({TensorDict(a), partial});
  REQUIRE_THROWS_WITH(Transition::from_tensordict(ls), Catch::Contains("reward"));
  // Unchecked wrapping still works; reading the exclusive field names the members holding it.
  Transition t = Transition::from_tensordict(ls, /*check=*/false);
  REQUIRE_THROWS_WITH(t.reward(), Catch::Contains("'Transition' has field 'reward' declared but not set") &&
                                      Catch::Contains("held by member(s) 0 of 2"));
  CHECK(at::equal(t.done(), at::zeros({2, 2}, at::kBool)));
}

TEST_CASE("lazy_stack of typed objects is a typed lazy view whose element i is the original", "[typed][lazy]") {
  // Ragged: the 'state' event dim differs between the observations ([-1] in the schema).
  Observation a = lazy_observation(2, 3, "left");
  Observation b = lazy_observation(2, 5, "right");
  Observation both = lazy_stack(std::vector<Observation>{a, b});
  static_assert(std::is_same<decltype(lazy_stack(std::vector<Observation>{a, b})), Observation>::value,
                "lazy_stack of a typed class returns that class");
  CHECK((both.batch_size() == c10::IntArrayRef{2, 2}));
  CHECK(both.index({0}).tensordict().is_same(a.tensordict()));
  CHECK(both.index({-1}).tensordict().is_same(b.tensordict()));
  CHECK(at::equal(both.index({1}).state(), b.state()));

  // The ragged field cannot be one dense tensor: the stacking error, and the typed
  // alternatives of the lazy stack itself.
  REQUIRE_THROWS_WITH(both.state(), Catch::Contains("Failed to stack tensors"));
  auto states = LazyStackedTensorDict::from(both.tensordict()).get_as_list("state");
  REQUIRE(states.size() == 2);
  CHECK(at::equal(states[1], b.state()));
  CHECK(at::equal(both.pixels().select(0, 1), b.pixels()));

  // Non-tensor fields: one value per batch element through the _list accessor.
  auto labels = both.label_list();
  REQUIRE(labels.size() == 4);
  CHECK(labels[0] == std::optional<std::string>("left"));
  CHECK(labels[3] == std::optional<std::string>("right"));

  // Typed writes on the view go to the originals.
  both.index({1}).set_label("renamed");
  CHECK(b.label() == "renamed");
  // The stack dim may be any batch dim; element (., i) then indexes every member.
  Observation inner = Observation::lazy_stack({a, b}, /*dim=*/1);
  CHECK((inner.batch_size() == c10::IntArrayRef{2, 2}));
  CHECK(inner.index({at::indexing::Slice(), 0}).tensordict().is_same(a.tensordict()));
}

TEST_CASE("typed lazy stacks of a TypedTensorDict convert to the base class", "[typed][lazy]") {
  Transition a = lazy_transition(2, 1.0F);
  Transition b = lazy_transition(2, 2.0F);
  Transition both = Transition::lazy_stack({a, b});
  // A Transition over a lazy stack is still usable where a Step is expected.
  const Step& step = both;
  CHECK((step.step_count().sizes() == c10::IntArrayRef{2, 2}));
  // Densifying gives an in-memory Transition with the same values.
  Transition dense = both.contiguous();
  CHECK_FALSE(LazyStackedTensorDict::is_lazy_stack(dense));
  CHECK(at::equal(dense.reward(), at::stack({a.reward(), b.reward()})));
}

TEST_CASE("a string field of a ragged typed lazy stack reads through <field>_list() (issue 30 item 4)",
          "[typed][lazy][ragged]") {
  Observation per_row = lazy_observation(5, 3, "cam");
  per_row.typed_storage().set_non_tensor_(
      "label", NonTensorData::from_list(json::parse(R"(["a0", "a1", "a2", "a3", "a4"])"), {5}));
  Observation uniform = lazy_observation(8, 3, "y");
  Observation stack = Observation::lazy_stack({per_row, uniform});
  REQUIRE(stack.typed_storage().batch_size().vec() == std::vector<int64_t>{2, -1});
  // Member after member, each member's rows in order.
  std::vector<std::optional<std::string>> labels = stack.label_list();
  REQUIRE(labels.size() == 13);
  CHECK(labels[0] == "a0");
  CHECK(labels[4] == "a4");
  CHECK(labels[5] == "y");
  CHECK(labels[12] == "y");
  // label() names the per-row accessor, with no standard-library message.
  REQUIRE_THROWS_AS(stack.label(), ValueError);
  REQUIRE_THROWS_WITH(stack.label(), Catch::Contains("label_list()"));
  // Uniform strings of members of different lengths: one per row of each member.
  Observation two = Observation::lazy_stack({lazy_observation(5, 3, "x"), lazy_observation(8, 3, "y")});
  std::vector<std::optional<std::string>> both = two.label_list();
  REQUIRE(both.size() == 13);
  CHECK(both[4] == "x");
  CHECK(both[5] == "y");
  Observation same = Observation::lazy_stack({lazy_observation(5, 3, "cam"), lazy_observation(8, 3, "cam")});
  CHECK(same.label() == "cam");
  CHECK(same.label_list().size() == 13);
}

TEST_CASE("a typed ragged lazy stack takes a whole member through index_put_ (issue 30 item 5)",
          "[typed][lazy][ragged]") {
  Observation stack = Observation::lazy_stack({lazy_observation(5, 3, "a"), lazy_observation(8, 3, "b")});
  Observation fresh = lazy_observation(8, 3, "fresh");
  stack.index_put_({1}, fresh);
  CHECK(stack.index({1}).label() == "fresh");
  CHECK(at::equal(stack.index({1}).state(), fresh.state()));
  CHECK(stack.index({0}).label() == "a");
  CHECK(stack.index({1, 7}).label() == "fresh");
}

TEST_CASE("a typed class prints its nested fields with their classes (issue 30 item 8)", "[typed][repr]") {
  Transition t = lazy_transition(2, 1.0F);
  std::ostringstream os;
  os << t;
  const std::string text = os.str();
  CHECK_THAT(text, Catch::StartsWith("Transition(\n"));
  CHECK_THAT(text, Catch::Contains("obs: Observation(\n"));
  CHECK_THAT(text, !Catch::Contains("TensorDict("));
  std::ostringstream non_tensor;
  non_tensor << NonTensorData("cam");
  CHECK(non_tensor.str() == "NonTensorData(data=cam)");
}

TEST_CASE("clone, stack, iteration and update of a typed class over a lazy stack", "[typed][lazy][ops]") {
  Transition a = lazy_transition(3, 1.0F);
  Transition b = lazy_transition(3, 2.0F);
  Transition both = Transition::lazy_stack({a, b});

  // clone: the class over a lazy stack of copies (member by member), independent of a and b.
  Transition copy = both.clone();
  static_assert(std::is_same<decltype(both.clone()), Transition>::value, "clone keeps the class");
  CHECK(LazyStackedTensorDict::is_lazy_stack(copy));
  CHECK(at::equal(copy.reward(), both.reward()));
  CHECK_FALSE(copy.index({0}).is_same(a));
  copy.index({0}).set_reward_(at::zeros({3}));
  CHECK(at::equal(a.reward(), at::full({3}, 1.0F)));

  // Iteration over the stack dim: each row is a Transition over the member itself.
  int64_t i = 0;
  for (auto member : both) {
    static_assert(std::is_same<decltype(member), Transition>::value, "rows are the class");
    CHECK(member.is_same(i == 0 ? a : b));
    CHECK(member.reward()[0].item<float>() == (i == 0 ? 1.0F : 2.0F));
    ++i;
  }
  CHECK(i == 2);
  // A ragged stack iterates its members too, each with its own event shape.
  Observation left = lazy_observation(2, 3, "left");
  Observation right = lazy_observation(2, 5, "right");
  std::vector<int64_t> widths;
  std::vector<std::string> labels;
  for (auto obs : Observation::lazy_stack({left, right})) {
    widths.push_back(obs.state().size(1));
    labels.push_back(obs.label());
  }
  CHECK(widths == std::vector<int64_t>{3, 5});
  CHECK(labels == std::vector<std::string>{"left", "right"});

  // stack of typed lazy stacks: a dense Transition with their values; lazy_stack nests them.
  Transition grid = Transition::stack({both, copy});
  CHECK((grid.batch_size() == c10::IntArrayRef{2, 2, 3}));
  CHECK(at::equal(grid.reward()[0], both.reward()));
  CHECK(at::equal(grid.reward()[1][0], at::zeros({3})));
  Transition nested = Transition::lazy_stack({both, copy});
  CHECK((nested.batch_size() == c10::IntArrayRef{2, 2, 3}));
  nested.index({0, 1}).set_reward_(at::full({3}, 4.0F));
  CHECK(at::equal(b.reward(), at::full({3}, 4.0F)));

  // update / update_: checked first, then written into the members.
  REQUIRE_THROWS_AS(both.update(TensorDict({{"reward", at::zeros({2, 3}, at::kDouble)}}, {2, 3})), TypeError);
  REQUIRE_THROWS_AS(both.update_(TensorDict({{"action", at::zeros({2, 3, 5})}}, {2, 3})), ShapeError);
  CHECK(at::equal(a.reward(), at::full({3}, 1.0F)));
  both.update(TensorDict({{"reward", at::stack({at::full({3}, 5.0F), at::full({3}, 6.0F)})}}, {2, 3}));
  CHECK(at::equal(a.reward(), at::full({3}, 5.0F)));
  CHECK(at::equal(b.reward(), at::full({3}, 6.0F)));
  both.update_(TensorDict({{"action", at::zeros({2, 3, 4})}}, {2, 3}));
  CHECK(at::equal(a.action(), at::zeros({3, 4})));
  CHECK(at::equal(b.action(), at::zeros({3, 4})));
  // A typed source: its nested fields reach the members' nested objects.
  Transition source = Transition::stack({lazy_transition(3, 8.0F), lazy_transition(3, 9.0F)});
  both.update(source);
  CHECK(at::equal(b.reward(), at::full({3}, 9.0F)));
  CHECK(at::equal(a.obs().state(), source.obs().state()[0]));
}
