// docs/getting-started.md#a-first-program (this file is the snippet, verbatim, after this line)
#include <iostream>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>

namespace td = tensordict;

int main() {
  td::TensorDict data({{"obs", at::randn({4, 3})},
                       {"agent", {{"pos", at::zeros({4, 2})}}},  // a nested tensordict
                       {"env", "CartPole"}},                     // non-tensor data
                      /*batch_size=*/{4});
  td::TensorDict second = data.index({1});               // batch [], every leaf follows
  td::TensorDict pair = td::stack({data, data.clone()});  // batch [2, 4]
  std::cout << pair.reshape({-1}).get({"agent", "pos"}).sizes() << "\n";  // [8, 2]
  std::cout << second << "\n";
}
