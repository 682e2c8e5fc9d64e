// The snippet of docs/backends.md#hdf5-files (built when libhdf5 is found).
#include <cstdio>
#include <iostream>

#include <ATen/ATen.h>
#include <tensordict/backends/persistent.h>
#include <tensordict/tensordict.h>

namespace td = tensordict;

// docs/backends.md#hdf5-files
void hdf5_files() {
  td::TensorDict steps({{"obs", at::zeros({1000, 8})}, {"reward", at::zeros({1000})}}, {1000});
  td::PersistentTensorDict file = td::PersistentTensorDict::to_h5(steps, "/tmp/steps.h5");
  at::Tensor batch = file.index({at::tensor({7, 3, 7}, at::kLong)}).get("obs");  // 3 rows read
  file.index_put_({0}, td::TensorDict({{"reward", at::ones({})}}, {}));     // one element written
  std::cout << batch.sizes() << " " << file.get("reward").sum().item<float>() << "\n";  // [3, 8] 1
  file.close();
  std::remove("/tmp/steps.h5");
}

int main() {
  std::remove("/tmp/steps.h5");  // left by a run killed before its cleanup: to_h5 would refuse it
  hdf5_files();
  return 0;
}
