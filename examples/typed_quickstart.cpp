// Typed classes generated from schemas/rl_transition.yaml (docs/typed-api.md mirrors this).
#include <iostream>

#include <ATen/ATen.h>

#include "rl_transition.td.h"

int main() {
  rl::Transition t({{"done", at::zeros({8}, at::kBool)},
                    {"step_count", at::arange(8)},
                    {"obs", rl::Observation({{"pixels", at::zeros({8, 84, 84, 3}, at::kByte)},
                                             {"state", at::zeros({8, 5})}}, {8}).tensordict()},
                    {"action", at::randn({8, 4})},
                    {"reward", at::zeros({8})}},
                   /*batch_size=*/{8});
  t.set_reward(t.reward() + 1);            // checked: batch dims, dtype float32, event shape []
  rl::Transition first = t.index({0});     // operations keep the class
  const rl::Step& step = t;                // Transition extends Step
  tensordict::TensorDict& td = t;          // and is a TensorDict (typed_tensordict)

  try {
    t.set_action(at::zeros({8, 5}));       // event shape [4] expected
  } catch (const tensordict::ShapeError& e) {
    std::cout << "refused: " << e.what() << "\n";
  }
  std::cout << "first reward " << first.reward().item<float>() << ", steps " << step.step_count().size(0)
            << ", keys " << td.num_keys() << "\n";
  return 0;
}
