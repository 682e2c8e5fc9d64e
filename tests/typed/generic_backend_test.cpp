// Typed classes over backends other than the in-memory one: the proving backend (every read a
// fresh copy, support/copy_on_read_backend.h), where accessors read through TensorDictBase::get
// and writes reach the backend only through its interface, and a memory-mapped directory.
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include <tensordict/backends/memmap.h>

#include "rl_transition.td.h"
#include "support/copy_on_read_backend.h"
#include "support/temp_dir.h"
#include "survival.td.h"

using namespace tensordict;
using testing_backends::CopyOnRead;

TEST_CASE("typed accessors read a copy-on-read backend through get, every time", "[typed][backend]") {
  TensorDict td = CopyOnRead::from(
      TensorDict({{"eta", at::randn({5, 3})}, {"X", at::randn({5, 4})}, {"beta", at::randn({5, 1})}}, {5}));
  auto s = survival::PredictorState::from_tensordict(td);
  const int before = CopyOnRead::counts(td).gets;
  CHECK((s.eta().sizes() == c10::IntArrayRef{5, 3}));
  CHECK((s.eta().sizes() == c10::IntArrayRef{5, 3}));
  CHECK(CopyOnRead::counts(td).gets == before + 2);  // one read per access: nothing cached

  // Setters store in the backend; reads see values replaced behind the accessor's back.
  s.set_eta(at::ones({5, 3}));
  CHECK(at::equal(td.get("eta"), at::ones({5, 3})));
  td.set("eta", at::zeros({5, 3}));
  CHECK(at::equal(s.eta(), at::zeros({5, 3})));
  CHECK(std::string(s.type_name()) == "CopyOnReadTensorDict");
}

TEST_CASE("typed in-place writes reach a copy-on-read backend", "[typed][backend]") {
  TensorDict td = CopyOnRead::from(
      TensorDict({{"eta", at::zeros({5, 3})}, {"X", at::zeros({5, 4})}, {"beta", at::ones({5, 1})}}, {5}));
  auto s = survival::PredictorState::from_tensordict(td);
  s.lock_();
  // The generated in-place setter writes through the backend's write_, also when locked.
  s.set_beta_(at::full({5, 1}, 4.0));
  CHECK(at::equal(td.get("beta"), at::full({5, 1}, 4.0)));
  REQUIRE_THROWS_AS(s.set_beta_(at::ones({5, 2})), ShapeError);
  REQUIRE_THROWS_AS(s.set_beta_(at::ones({5, 1}, at::kDouble)), TypeError);
  // Whole-object in-place operations (a TypedTensorDict is a TensorDict) write back too.
  s.mul_(2).index_put_({0}, 9.0);
  CHECK(at::equal(td.get("beta")[0], at::full({1}, 9.0)));
  CHECK(at::equal(td.get("beta")[1], at::full({1}, 8.0)));
  s.apply_([](const at::Tensor& x) { return x + 1; });
  CHECK(at::equal(td.get("eta")[1], at::ones({3})));
  CHECK(at::equal(td.get("eta")[0], at::full({3}, 10.0)));
  const auto& counts = CopyOnRead::counts(td);
  CHECK(counts.writes + counts.indexed_writes + counts.batched_writes > 0);
}

TEST_CASE("optional fields and errors behave the same on other backends", "[typed][backend]") {
  TensorDict td = CopyOnRead::from(TensorDict({}, {2}));
  auto t = rl::Transition::from_tensordict(td, /*check=*/false);
  REQUIRE_THROWS_WITH(t.mask(), Catch::Contains("'Transition' has field 'mask' declared but not set"));
  CHECK_FALSE(t.has_mask());
  t.set_mask(at::ones({2, 3}, at::kBool));
  CHECK(t.has_mask());
  CHECK((t.mask().sizes() == c10::IntArrayRef{2, 3}));
  REQUIRE_THROWS_AS(t.set_reward(at::ones({2}, at::kDouble)), TypeError);
  REQUIRE_THROWS_AS(rl::Transition::from_tensordict(td), TypeError);  // required fields missing
}

TEST_CASE("a TensorClass over a copy-on-read backend", "[typed][backend]") {
  TensorDict td = CopyOnRead::from(
      TensorDict({{"pixels", at::zeros({2, 84, 84, 3}, at::kByte)}, {"state", at::zeros({2, 5})}}, {2}));
  auto obs = rl::Observation::from_tensordict(td);
  obs.set_label("left");
  CHECK(obs.label() == "left");
  CHECK(td.get_non_tensor("label").value().as_string() == "left");
  rl::Observation row = obs.index({1});
  CHECK((row.state().sizes() == c10::IntArrayRef{5}));
  CHECK(row.label() == "left");
  obs.set_state_(at::ones({2, 5}));
  CHECK(at::equal(td.get("state"), at::ones({2, 5})));
}

TEST_CASE("typed classes wrap a memory-mapped tensordict live and write to its files", "[typed][backend][memmap]") {
  testing_support::TempDir dir("td_typed_memmap");
  TensorDict src({{"eta", at::randn({5, 3})}, {"X", at::randn({5, 4})}, {"beta", at::zeros({5, 1})}}, {5});
  memmap(src, dir.path());
  TensorDict mm = load_memmap(dir.path());
  auto s = survival::PredictorState::from_tensordict(mm);
  CHECK(s.is_memmap());
  CHECK(at::equal(s.eta(), src.get("eta")));
  // Locked like any memmapped tensordict: in-place writes go to the files.
  s.beta().fill_(7);
  CHECK(at::equal(load_memmap(dir.path()).get("beta"), at::full({5, 1}, 7.0)));
  s.set_beta_(at::full({5, 1}, 3.0));
  CHECK(at::equal(load_memmap(dir.path()).get("beta"), at::full({5, 1}, 3.0)));
  REQUIRE_THROWS_AS(s.set_beta(at::ones({5, 1})), LockedError);
  // Indexing keeps the typed class over the mapped leaves.
  auto row = s.index({0});
  CHECK((row.eta().sizes() == c10::IntArrayRef{3}));
}
