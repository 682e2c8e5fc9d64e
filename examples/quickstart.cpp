// Quickstart: build a nested tensordict, index it, stack it and reshape it.
#include <iostream>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>
#include <tensordict/tensordict.h>

using at::indexing::Slice;
namespace td = tensordict;

int main() {
  at::manual_seed(0);
  td::TensorDict data(
      {
          {"obs", at::randn({4, 3})},
          {"reward", at::zeros({4})},
          {"agent", {{"pos", at::rand({4, 2})}, {"alive", at::ones({4}, at::kBool)}}},
          {"env_name", "CartPole"},  // non-tensor data, shared by every batch element
      },
      /*batch_size=*/{4});
  std::cout << "A nested tensordict:\n" << data << "\n\n";

  // Index the batch like a tensor: every leaf follows.
  td::TensorDict row = data.index({1});
  std::cout << "data.index({1}).batch_size() = " << row.batch_size()
            << ", agent.pos = " << row.get({"agent", "pos"}) << "\n";
  td::TensorDict even = data.index({Slice(0, at::indexing::None, 2)});
  std::cout << "data.index({Slice(0, None, 2)}).batch_size() = " << even.batch_size() << "\n\n";

  // Stack two tensordicts along a new batch dim, then reshape the batch.
  td::TensorDict stacked = td::stack({data, data.clone()}, 0);
  std::cout << "stack of two: batch_size " << stacked.batch_size() << ", obs "
            << stacked.get("obs").sizes() << "\n";
  td::TensorDict flat = stacked.reshape({-1});
  std::cout << "reshape(-1): batch_size " << flat.batch_size() << ", agent.pos "
            << flat.get({"agent", "pos"}).sizes() << ", env_name "
            << flat.get_non_tensor("env_name").value().python_str() << "\n";
  return 0;
}
