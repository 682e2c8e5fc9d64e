// The snippets of docs/replay-buffer.md (docs/replay-buffer.md#preallocate), run in order by
// main(): a typed replay buffer on disk, from schemas/replay.yaml.
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>

#include "replay.td.h"
#include "replay_steps.h"

namespace td = tensordict;
using replay::Transition;
using replay_snippets::env_step;
using replay_snippets::fresh_path;

int main() {
  const std::string dir = fresh_path("buffer");  // memmap_like refuses a buffer's directory
  // docs/replay-buffer.md#preallocate
  Transition buffer = Transition::memmap_like(/*batch_size=*/{64}, dir);
  // Zero-filled files in Python tensordict's layout, mapped: nothing full-size in memory.
  std::cout << buffer.action().sizes() << "\n";  // [64, 6]

  // docs/replay-buffer.md#fill
  for (int64_t t = 0; t < 64; ++t) {
    buffer.index_put_({t}, env_step(t));  // checked against the schema, written to the files
  }

  // docs/replay-buffer.md#sample
  at::Tensor idx = at::randint(0, 64, {16}, at::kLong);
  Transition batch = buffer.index({idx});          // batch [16], read from the files
  at::Tensor loss = (batch.reward() - batch.action().sum(-1)).pow(2).mean();
  std::vector<std::optional<std::string>> tasks = batch.obs().info_list();  // one per row
  std::cout << loss.item<float>() << " " << tasks.front().value_or("-") << "\n";

  // docs/replay-buffer.md#reload
  Transition again = Transition::load_memmap(dir);  // checked against the schema
  std::cout << again.obs().info_list()[3].value_or("-") << "\n";  // "walk"
  for (Transition step : again.index({at::indexing::Slice(0, 2)})) {
    std::cout << step << "\n";  // Transition(...)
  }

  // docs/replay-buffer.md#in-place
  buffer.set_reward_(at::zeros({64}));        // locked and mapped: in-place setters only
  buffer.obs().set_info_("relabelled");       // rewrites the NonTensorData directory
  try {
    Transition::memmap_like({64}, dir);       // would zero-fill the data: refused
  } catch (const td::StorageError& e) {
    std::cout << "refused: " << e.what() << "\n";
  }

  if (again.obs().info_list()[3] != std::optional<std::string>("walk")) return 1;
  if (Transition::load_memmap(dir).obs().info() != "relabelled") return 1;
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  return 0;
}
