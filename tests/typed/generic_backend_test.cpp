// Typed classes over a backend other than the in-memory TensorDictImpl: the accessors fall
// back to the generic TensorDictBase::get on every read (no cached position), and writes go to
// the backend. The backend here forwards to TensorDictImpl and counts reads.
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include <filesystem>

#include <tensordict/memmap.h>
#include <tensordict/tensor_dict_impl.h>

#include "rl_transition.td.h"
#include "survival.td.h"

// Last: glog (through c10/util/Logging.h) defines its own CHECK macro, which must not replace
// Catch's.

using namespace tensordict;

namespace {

class CountingBackend : public TensorDictImpl {
 public:
  using TensorDictImpl::TensorDictImpl;
  const char* type_name() const override { return "CountingTensorDict"; }
  Entry get(std::string_view key) const override {
    ++reads;
    return TensorDictImpl::get(key);
  }
  mutable int reads = 0;
};

}  // namespace

TEST_CASE("typed accessors read other backends through the generic get", "[typed][backend]") {
  auto backend = c10::make_intrusive<CountingBackend>(c10::IntArrayRef{5}, std::nullopt);
  TensorDict td(backend);
  td.set("eta", at::randn({5, 3})).set("X", at::randn({5, 4})).set("beta", at::randn({5, 1}));
  auto s = survival::PredictorState::from_tensordict(td);
  const int before = backend->reads;
  CHECK((s.eta().sizes() == c10::IntArrayRef{5, 3}));
  CHECK((s.eta().sizes() == c10::IntArrayRef{5, 3}));
  CHECK(backend->reads == before + 2);  // one generic read per access: nothing cached

  // Writes go to the backend; reads see values replaced behind the accessor's back.
  s.set_eta(at::ones({5, 3}));
  CHECK(at::equal(td.get("eta"), at::ones({5, 3})));
  td.set("eta", at::zeros({5, 3}));
  CHECK(at::equal(s.eta(), at::zeros({5, 3})));
  CHECK(std::string(s.type_name()) == "CountingTensorDict");
}

TEST_CASE("optional fields and errors behave the same on other backends", "[typed][backend]") {
  auto backend = c10::make_intrusive<CountingBackend>(c10::IntArrayRef{2}, std::nullopt);
  TensorDict td(backend);
  auto t = rl::Transition::from_tensordict(td, /*check=*/false);
  REQUIRE_THROWS_WITH(t.mask(), Catch::Contains("'Transition' has field 'mask' declared but not set"));
  CHECK_FALSE(t.has_mask());
  t.set_mask(at::ones({2, 3}, at::kBool));
  CHECK(t.has_mask());
  CHECK((t.mask().sizes() == c10::IntArrayRef{2, 3}));
  REQUIRE_THROWS_AS(t.set_reward(at::ones({2}, at::kDouble)), TypeError);
  REQUIRE_THROWS_AS(rl::Transition::from_tensordict(td), TypeError);  // required fields missing
}

TEST_CASE("a TensorClass over another backend", "[typed][backend]") {
  auto backend = c10::make_intrusive<CountingBackend>(c10::IntArrayRef{2}, std::nullopt);
  TensorDict td(backend);
  td.set("pixels", at::zeros({2, 84, 84, 3}, at::kByte)).set("state", at::zeros({2, 5}));
  auto obs = rl::Observation::from_tensordict(td);
  obs.set_label("left");
  CHECK(obs.label() == "left");
  CHECK(td.get_non_tensor("label").value().as_string() == "left");
  rl::Observation row = obs.index({1});
  CHECK((row.state().sizes() == c10::IntArrayRef{5}));
  CHECK(row.label() == "left");
}

TEST_CASE("typed classes wrap a memory-mapped tensordict live and write to its files",
          "[typed][backend][memmap]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("td_typed_memmap_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  TensorDict src({{"eta", at::randn({5, 3})}, {"X", at::randn({5, 4})}, {"beta", at::zeros({5, 1})}},
                 {5});
  memmap(src, dir.string());
  TensorDict mm = load_memmap(dir.string());
  auto s = survival::PredictorState::from_tensordict(mm);
  CHECK(s.is_memmap());
  CHECK(at::equal(s.eta(), src.get("eta")));
  // Locked like any memmapped tensordict: in-place writes go to the files.
  s.beta().fill_(7);
  CHECK(at::equal(load_memmap(dir.string()).get("beta"), at::full({5, 1}, 7.0)));
  REQUIRE_THROWS_AS(s.set_beta(at::ones({5, 1})), LockedError);
  // Indexing keeps the typed class over the mapped leaves.
  auto row = s.index({0});
  CHECK((row.eta().sizes() == c10::IntArrayRef{3}));
  std::filesystem::remove_all(dir);
}
