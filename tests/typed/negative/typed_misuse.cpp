// Negative compile tests (tests/CMakeLists.txt): every TDGEN_NEGATIVE_* case must fail to
// compile with the error named there. The cases target defines them all (and
// TDGEN_NEGATIVE_CASES) and is compiled once, each case in its own block so that each reports
// its own error; without any, this file compiles (the control).
#include "rl_transition.td.h"

#ifdef TDGEN_NEGATIVE_CASES
#include <tensordict/nn/typed_module.h>
using ObservationToStep = tensordict::nn::TypedModule<rl::Observation, rl::Step>;
#endif

int main() {
  rl::Transition t;
#ifdef TDGEN_NEGATIVE_UNKNOWN_FIELD
  (void)t.rewrad();  // misspelled field
#endif
#ifdef TDGEN_NEGATIVE_UNKNOWN_SETTER
  t.set_rewrad(at::Tensor());  // misspelled setter
#endif
#ifdef TDGEN_NEGATIVE_BASE_AS_DERIVED
  {
    rl::Step step;
    rl::Transition transition = step;  // a Step is not a Transition
    (void)transition;
  }
#endif
#ifdef TDGEN_NEGATIVE_WRONG_NESTED_CLASS
  t.set_obs(rl::Step());  // obs holds an Observation
#endif
#ifdef TDGEN_NEGATIVE_TYPED_MODULE_UNKNOWN_FIELD
  {
    // A typed module reads its keys through the input class: a misspelled field does not compile.
    ObservationToStep m([](const rl::Observation& obs) { return rl::Step({{"done", obs.pixles()}}); });
  }
#endif
#ifdef TDGEN_NEGATIVE_TYPED_MODULE_WRONG_OUTPUT
  {
    ObservationToStep m([](const rl::Observation& obs) { return obs; });  // an Observation is not a Step
  }
#endif
#ifdef TDGEN_NEGATIVE_TYPED_MODULE_NOT_GENERATED
  {
    tensordict::nn::TypedModule<at::Tensor, rl::Step> m([](const at::Tensor&) { return rl::Step(); });
  }
#endif
#ifndef TDGEN_NEGATIVE_CASES
  (void)t.has_reward();
  rl::Step& step = t;  // a Transition is a Step
  (void)step;
#endif
  return 0;
}
