// TypedTensorDict generated from schemas, over the in-memory backend: construction checks,
// typed accessors, optional fields, inheritance, live wrapping and typed results of operations.
// Cases follow semantics.md section 4 (PredictorState / ObservedState / SurvivalState).
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include "rl_transition.td.h"
#include "survival.td.h"

// Last: glog (through c10/util/Logging.h) defines its own CHECK macro, which must not replace
// Catch's.

using namespace tensordict;
using survival::ObservedState;
using survival::PredictorState;
using survival::SurvivalState;

namespace {

PredictorState make_predictor(int64_t n = 5) {
  return PredictorState({{"eta", at::randn({n, 3})}, {"X", at::randn({n, 4})}, {"beta", at::randn({n, 1})}}, {n});
}

rl::Observation make_observation(int64_t n) {
  return rl::Observation({{"pixels", at::zeros({n, 84, 84, 3}, at::kByte)}, {"state", at::ones({n, 7})}}, {n});
}

rl::Transition make_transition(int64_t n) {
  rl::Transition t;
  t.set_batch_size({n});
  // Inherited setters return the extending class, so the chain continues.
  t.set_done(at::zeros({n}, at::kBool))
      .set_step_count(at::arange(n))
      .set_obs(make_observation(n))
      .set_action(at::randn({n, 4}))
      .set_reward(at::ones({n}));
  return t;
}

// A function taking the base class: Transition must be usable here.
int64_t count_done(const rl::Step& step) { return step.done().sum().item<int64_t>(); }
// A function taking a plain TensorDict: every typed_tensordict is one.
size_t count_keys(const TensorDict& td) { return td.num_keys(); }

}  // namespace

TEST_CASE("a TypedTensorDict is a TensorDict with typed accessors", "[typed][ttd]") {
  PredictorState s = make_predictor();
  CHECK((s.batch_size() == c10::IntArrayRef{5}));
  CHECK((s.eta().sizes() == c10::IntArrayRef{5, 3}));
  CHECK(at::equal(s.eta(), s.get("eta")));
  CHECK(count_keys(s) == 3);
  CHECK((std::is_base_of<TensorDict, PredictorState>::value));
  CHECK(std::string(PredictorState::Traits::name) == "PredictorState");
  CHECK(PredictorState::Traits::fields_number == 3);
  CHECK(SurvivalState::Traits::fields_number == 9);
  CHECK(std::string(SurvivalState::Traits::field_names[0]) == "eta");
}

TEST_CASE("constructing without a required field names the missing fields sorted", "[typed][ttd][errors]") {
  REQUIRE_THROWS_AS(PredictorState({{"eta", at::randn({5, 3})}}, {5}), TypeError);
  // Byte-wise order: 'X' < 'beta'.
  REQUIRE_THROWS_WITH(PredictorState({{"eta", at::randn({5, 3})}}, {5}),
                      Catch::Contains("PredictorState() missing required field(s): X, beta"));
}

TEST_CASE("constructing with an undeclared field is refused", "[typed][ttd][errors]") {
  REQUIRE_THROWS_WITH(PredictorState({{"eta", at::randn({5, 3})},
                                      {"X", at::randn({5, 4})},
                                      {"beta", at::randn({5, 1})},
                                      {"z", at::randn({5})}},
                                     {5}),
                      Catch::Contains("PredictorState() got unexpected field(s): z"));
}

TEST_CASE("setting a field checks batch dims, event shape and dtype, naming class and field", "[typed][ttd][errors]") {
  PredictorState s = make_predictor();
  SECTION("batch dims") {
    REQUIRE_THROWS_AS(s.set_eta(at::randn({4, 3})), ShapeError);
    REQUIRE_THROWS_WITH(s.set_eta(at::randn({4, 3})),
                        Catch::Contains("PredictorState.eta") && Catch::Contains("expected shape [5, 3]") &&
                            Catch::Contains("got [4, 3]"));
  }
  SECTION("event shape") {
    REQUIRE_THROWS_AS(s.set_eta(at::randn({5, 2})), ShapeError);
    REQUIRE_THROWS_WITH(s.set_eta(at::randn({5, 3, 1})),
                        Catch::Contains("event shape [3]") && Catch::Contains("got [5, 3, 1]"));
  }
  SECTION("dtype") {
    REQUIRE_THROWS_AS(s.set_eta(at::zeros({5, 3}, at::kLong)), TypeError);
    REQUIRE_THROWS_WITH(s.set_eta(at::zeros({5, 3}, at::kLong)),
                        Catch::Contains("PredictorState.eta: expected dtype float32, got int64"));
  }
  SECTION("a failed set leaves the old value") {
    at::Tensor before = s.eta();
    CHECK_THROWS(s.set_eta(at::randn({5, 2})));
    CHECK(s.eta().is_same(before));
  }
  SECTION("constructor values are checked too") {
    REQUIRE_THROWS_AS(PredictorState({{"eta", at::zeros({5, 3}, at::kDouble)}, {"X", at::randn({5, 4})},
                                      {"beta", at::randn({5, 1})}},
                                     {5}),
                      TypeError);
  }
}

TEST_CASE("a declared size of -1 matches any size, and no shape matches any shape", "[typed][ttd]") {
  SurvivalState s;
  s.set_batch_size({2});
  s.set_observed_time(at::zeros({2, 7, 2}));
  s.set_observed_time(at::zeros({2, 1, 2}));
  CHECK_THROWS_AS(s.set_observed_time(at::zeros({2, 7, 3})), ShapeError);
  s.set_event_time(at::zeros({2, 5, 6}, at::kInt));
  s.set_event_time(at::zeros({2}, at::kDouble));
  CHECK((s.event_time().sizes() == c10::IntArrayRef{2}));
  CHECK_THROWS_AS(s.set_event_time(at::zeros({3})), ShapeError);
}

TEST_CASE("a setter stores the tensor without copying and writes go to the backend", "[typed][ttd]") {
  PredictorState s = make_predictor();
  at::Tensor ones = at::ones({5, 3});
  s.set_eta(ones);
  CHECK(s.eta().is_same(ones));
  CHECK(s.get("eta").is_same(ones));
}

TEST_CASE("optional fields are absent until set and reading one says declared but not set", "[typed][ttd]") {
  ObservedState o({{"eta", at::randn({5, 3})}, {"X", at::randn({5, 4})}, {"beta", at::randn({5, 1})},
                   {"y", at::randn({5})}, {"mu", at::randn({5})}},
                  {5});
  CHECK_FALSE(o.has_noise());
  CHECK_FALSE(o.contains("noise"));
  CHECK(o.num_keys() == 5);
  REQUIRE_THROWS_AS(o.noise(), AttributeError);
  REQUIRE_THROWS_WITH(o.noise(), Catch::Contains("'ObservedState' has field 'noise' declared but not set"));
  o.set_noise(at::zeros({5}));
  CHECK(o.has_noise());
  CHECK(at::equal(o.noise(), at::zeros({5})));
}

TEST_CASE("accessors see entries added, removed or replaced through the TensorDict API", "[typed][ttd][cache]") {
  ObservedState o({{"eta", at::randn({5, 3})}, {"X", at::randn({5, 4})}, {"beta", at::randn({5, 1})},
                   {"y", at::randn({5})}, {"mu", at::randn({5})}},
                  {5});
  REQUIRE_THROWS_AS(o.noise(), AttributeError);  // caches the absence
  o.set("noise", at::full({5}, 2.0));            // generic API adds the key
  CHECK(o.noise().eq(2.0).all().item<bool>());
  const at::Tensor& y = o.y();
  CHECK(y.defined());
  o.set("y", at::full({5}, 3.0));  // replaced in place: same slot
  CHECK(o.y().eq(3.0).all().item<bool>());
  o.erase("noise");  // removed: the cached position is invalid now
  CHECK_THROWS_AS(o.noise(), AttributeError);
  o.erase("eta");
  o.set("eta", at::full({5, 3}, 4.0));  // re-added at another position
  CHECK(o.eta().eq(4.0).all().item<bool>());
  CHECK(o.y().eq(3.0).all().item<bool>());
  o.rename_key_("mu", "mu2");
  CHECK_THROWS_AS(o.mu(), AttributeError);
  // Many keys: the backend switches to its hash index, positions move.
  for (int i = 0; i < 20; ++i) o.set("extra" + std::to_string(i), at::zeros({5}));
  CHECK(o.y().eq(3.0).all().item<bool>());
  // A non-tensor where a tensor is declared.
  o.set("y", EntryInit(std::string("text")));
  REQUIRE_THROWS_AS(o.y(), TypeError);
}

TEST_CASE("from_tensordict wraps live and checks required fields", "[typed][ttd]") {
  TensorDict td({{"eta", at::randn({5, 3})}, {"X", at::randn({5, 4})}, {"beta", at::randn({5, 1})}}, {5});
  PredictorState s = PredictorState::from_tensordict(td);
  CHECK(s.is_same(td));
  s.set_eta(at::ones({5, 3}));
  CHECK(at::equal(td.get("eta"), at::ones({5, 3})));
  td.set("X", at::zeros({5, 4}));
  CHECK(at::equal(s.X(), at::zeros({5, 4})));

  TensorDict partial({{"eta", at::randn({5, 3})}, {"extra", at::zeros({5})}}, {5});
  REQUIRE_THROWS_AS(PredictorState::from_tensordict(partial), TypeError);
  REQUIRE_THROWS_WITH(PredictorState::from_tensordict(partial),
                      Catch::Contains("PredictorState.from_tensordict() missing required field(s): X, beta"));
  PredictorState unchecked = PredictorState::from_tensordict(partial, /*check=*/false);
  REQUIRE_THROWS_WITH(unchecked.X(), Catch::Contains("declared but not set"));
  unchecked.set_X(at::zeros({5, 4}));
  CHECK(partial.contains("X"));
  CHECK(unchecked.contains("extra"));

  TensorDict bad({{"eta", at::randn({5, 2})}, {"X", at::randn({5, 4})}, {"beta", at::randn({5, 1})}}, {5});
  REQUIRE_THROWS_AS(PredictorState::from_tensordict(bad), ShapeError);
}

TEST_CASE("indexing, shape ops, to, clone, split and unbind return the typed class", "[typed][ttd][ops]") {
  PredictorState s = make_predictor();
  PredictorState first = s.index({0});
  CHECK(first.batch_size().empty());
  CHECK((first.eta().sizes() == c10::IntArrayRef{3}));
  PredictorState head = s.index({at::indexing::Slice(0, 3)});
  CHECK((head.X().sizes() == c10::IntArrayRef{3, 4}));
  PredictorState expanded = s.expand({2, 5});
  CHECK((expanded.eta().sizes() == c10::IntArrayRef{2, 5, 3}));
  CHECK((s.unsqueeze(0).batch_size() == c10::IntArrayRef{1, 5}));
  CHECK((s.reshape({5, 1}).beta().sizes() == c10::IntArrayRef{5, 1, 1}));
  PredictorState copy = s.clone();
  CHECK_FALSE(copy.eta().is_same(s.eta()));
  CHECK(at::equal(copy.eta(), s.eta()));
  CHECK(s.to(at::kCPU).eta().device().is_cpu());
  std::vector<PredictorState> rows = s.unbind(0);
  REQUIRE(rows.size() == 5);
  CHECK(at::equal(rows[2].eta(), s.eta()[2]));
  std::vector<PredictorState> parts = s.split(2);
  REQUIRE(parts.size() == 3);
  CHECK((parts[2].batch_size() == c10::IntArrayRef{1}));
  TensorDict plain = s.to_tensordict();
  CHECK_FALSE(plain.get("eta").is_same(s.eta()));
}

TEST_CASE("stack and cat of typed objects return the typed class", "[typed][ttd][ops]") {
  PredictorState a = make_predictor(3), b = make_predictor(3);
  PredictorState stacked = stack(std::vector<PredictorState>{a, b});
  CHECK((stacked.batch_size() == c10::IntArrayRef{2, 3}));
  CHECK(at::equal(stacked.eta()[1], b.eta()));
  PredictorState cat4 = PredictorState::cat({a, b, a, b});
  CHECK((cat4.batch_size() == c10::IntArrayRef{12}));
  CHECK((cat(std::vector<PredictorState>{a, b}, 0).X().sizes() == c10::IntArrayRef{6, 4}));
}

TEST_CASE("an extending class is usable where its base is expected", "[typed][ttd][inheritance]") {
  rl::Transition t = make_transition(4);
  t.set_done(at::tensor({1, 0, 1, 0}).to(at::kBool));
  CHECK(count_done(t) == 2);
  const rl::Step& step = t;
  CHECK((step.step_count().sizes() == c10::IntArrayRef{4}));
  CHECK(rl::Transition::Traits::fields_number == 6);
  // Operations on the extending class return it, not the base.
  rl::Transition row = t.index({1});
  CHECK((row.action().sizes() == c10::IntArrayRef{4}));
  static_assert(std::is_same<decltype(t.clone()), rl::Transition>::value, "clone keeps the class");
  // Inherited accessors name the class they are called through.
  rl::Transition empty;
  REQUIRE_THROWS_WITH(empty.done(), Catch::Contains("'Transition' has field 'done' declared but not set"));
  REQUIRE_THROWS_WITH(static_cast<const rl::Step&>(empty).done(), Catch::Contains("'Step' has field 'done'"));
  REQUIRE_THROWS_WITH(empty.set_done(at::zeros({1})), Catch::Contains("Transition.done: expected shape []"));
  static_assert(std::is_same<decltype(t.index({0})), rl::Transition>::value, "index keeps the class");
}

TEST_CASE("nested typed fields are typed objects sharing the data", "[typed][ttd][nested]") {
  rl::Transition t = make_transition(3);
  rl::Observation obs = t.obs();
  CHECK((obs.pixels().sizes() == c10::IntArrayRef{3, 84, 84, 3}));
  obs.set_state(at::full({3, 2}, 5.0));
  CHECK(t.get({"obs", "state"}).eq(5.0).all().item<bool>());
  CHECK(t.index({0}).obs().pixels().dim() == 3);
  rl::Observation wrong = make_observation(2);
  REQUIRE_THROWS_AS(t.set_obs(wrong), ShapeError);
  REQUIRE_THROWS_WITH(t.set_obs(wrong), Catch::Contains("Transition.obs") && Catch::Contains("Observation"));
  t.set("obs", at::zeros({3}));
  REQUIRE_THROWS_AS(t.obs(), TypeError);
}

TEST_CASE("repr names the typed class", "[typed][ttd]") {
  CHECK(make_predictor().repr().rfind("PredictorState(", 0) == 0);
}
