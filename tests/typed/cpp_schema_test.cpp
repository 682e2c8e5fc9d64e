// Classes generated through tensordict_generate(HEADERS ...) from C++ schemas: the twins of the
// YAML schemas (rl_transition.h) and a schema whose fields follow the target's definitions.
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include "flagged.td.h"
#include "rl_transition.td.h"

using namespace tensordict;

TEST_CASE("classes generated from C++ schemas work like the YAML ones", "[typed][cpp_schema]") {
  const int64_t n = 3;
  rl::Observation obs({{"pixels", at::zeros({n, 84, 84, 3}, at::kByte)}, {"state", at::ones({n, 7})}}, {n});
  rl::Transition t;
  t.set_batch_size({n});
  t.set_done(at::zeros({n}, at::kBool)).set_step_count(at::arange(n)).set_obs(obs).set_action(at::randn({n, 4}))
      .set_reward(at::ones({n}));
  CHECK(t.step_count().equal(at::arange(n)));
  CHECK(rl::Transition::Traits::fields_number == 6);
  // The shape check comes from Tensor<float, 4>.
  CHECK_THROWS_AS(t.set_action(at::randn({n, 5})), ShapeError);
}

TEST_CASE("a C++ schema is parsed with the target's definitions and constexpr sizes", "[typed][cpp_schema]") {
  // TDGEN_TEST_FLAG=1 is a compile definition of this test target: the #if branch is in.
  STATIC_REQUIRE(flagged::Probe::Traits::fields_number == 2);
  flagged::Probe p;
  p.set_batch_size({2});
  p.set_base(at::ones({2, 3})).set_flagged(at::ones({2, 6}));
  CHECK(p.flagged().size(1) == 6);
  CHECK_THROWS_AS(p.set_flagged(at::ones({2, 3})), ShapeError);
}
