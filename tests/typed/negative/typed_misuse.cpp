// Negative compile tests (tests/CMakeLists.txt): each TDGEN_NEGATIVE_* case must fail to
// compile with the error named there; without any, this file compiles (the control).
#include "rl_transition.td.h"

int main() {
  rl::Transition t;
#if defined(TDGEN_NEGATIVE_UNKNOWN_FIELD)
  (void)t.rewrad();  // misspelled field
#elif defined(TDGEN_NEGATIVE_UNKNOWN_SETTER)
  t.set_rewrad(at::Tensor());  // misspelled setter
#elif defined(TDGEN_NEGATIVE_BASE_AS_DERIVED)
  rl::Step step;
  rl::Transition transition = step;  // a Step is not a Transition
  (void)transition;
#elif defined(TDGEN_NEGATIVE_WRONG_NESTED_CLASS)
  t.set_obs(rl::Step());  // obs holds an Observation
#else
  (void)t.has_reward();
  rl::Step& step = t;  // a Transition is a Step
  (void)step;
#endif
  return 0;
}
