// docs/getting-started.md#a-first-schema (this file is the snippet, verbatim, after this line)
#include <iostream>

#include <ATen/ATen.h>

#include "game.td.h"  // generated from schemas/game.yaml by tensordict_generate()

int main() {
  game::Transition batch({{"done", at::zeros({8}, at::kBool)},
                          {"state", at::randn({8, 5})},
                          {"action", at::zeros({8}, at::kLong)},
                          {"reward", at::ones({8})}},
                         /*batch_size=*/{8});
  at::Tensor reward = batch.reward();  // a member read: no string lookup
  batch.set_value(reward * 0.5);       // checked: batch dims, float32, event shape []
  game::Transition first4 = batch.index({at::indexing::Slice(0, 4)});  // still a Transition
  std::cout << first4.value().sizes() << "\n";  // [4]
}
