// README.md#tensordict-cpp: its snippet, compiled and run by the tests.
#include <iostream>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>
#include <tensordict/tensordict.h>
using at::indexing::Slice;
namespace td = tensordict;

int main() {
  td::TensorDict data({{"obs", at::randn({4, 3})},
                       {"agent", {{"pos", at::rand({4, 2})}}},   // nested tensordict
                       {"env_name", "CartPole"}},                // non-tensor data
                      /*batch_size=*/{4});
  td::TensorDict row = data.index({1});                 // batch [], leaves are views
  td::TensorDict even = data.index({Slice(0, at::indexing::None, 2)});  // batch [2]
  td::TensorDict both = td::stack({data, data.clone()}, 0);             // batch [2, 4]
  both.reshape({-1}).get({"agent", "pos"});             // a [8, 2] tensor
  data.set({"agent", "vel"}, at::zeros({4, 2}));        // checked against batch [4]
  std::cout << data << "\n";                            // Python tensordict's repr layout
}
