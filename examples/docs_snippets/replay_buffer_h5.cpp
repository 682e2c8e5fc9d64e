// The HDF5 variant of docs/replay-buffer.md (docs/replay-buffer.md#the-same-buffer-in-an-hdf5-file),
// run in order by main(): a typed buffer preallocated in a file, filled, reopened and sampled.
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <tensordict/backends/persistent.h>
#include <tensordict/tensordict.h>

#include "replay.td.h"
#include "replay_steps.h"

namespace td = tensordict;
using replay::Transition;
using replay_snippets::env_step;
using replay_snippets::fresh_path;

int main() {
  const std::string path = fresh_path("buffer.h5");
  // docs/replay-buffer.md#the-same-buffer-in-an-hdf5-file
  Transition buffer = Transition::h5_like(/*batch_size=*/{64}, path);
  // Datasets in h5py's layout, never written: they read as zeros and take no memory.
  for (int64_t t = 0; t < 64; ++t) {
    buffer.index_put_({t}, env_step(t));  // written to the file, checked against the schema
  }
  td::PersistentTensorDict::from(buffer).close();  // HDF5 lets one process write a file

  Transition again = Transition::from_tensordict(td::PersistentTensorDict::from_h5(path, "r"));
  Transition batch = again.index({at::randint(0, 64, {16}, at::kLong)});  // reads 16 rows
  std::cout << batch.action().sizes() << " " << again.obs().info_list()[3].value_or("-") << "\n";  // [16, 6] walk
  try {
    Transition::h5_like({64}, path);  // would replace the file: refused
  } catch (const td::StorageError& e) {
    std::cout << "refused: " << e.what() << "\n";
  }

  if (again.obs().info_list()[3] != std::optional<std::string>("walk")) return 1;
  if (again.reward()[63].item<float>() != 63.f) return 1;
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  return 0;
}
