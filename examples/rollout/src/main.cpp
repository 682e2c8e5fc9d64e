// The rollout example: a torch::nn policy acts in a toy environment, its experience fills a
// typed rollout buffer (generated from schemas/rollout.yaml), the buffer is stored as a
// memory-mapped directory (the layout Python tensordict reads), reloaded, and the policy takes
// one optimisation step on the reloaded data.
//
//   rollout [DIR]     DIR: where to store the buffer (default: <tmp>/rollout.memmap)
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <tensordict/backends/memmap.h>
#include <tensordict/tensordict.h>

#include "env.h"
#include "policy.h"
#include "rollout.td.h"
#include "summary.h"

namespace fs = std::filesystem;
namespace td = tensordict;

namespace {

constexpr int64_t kSteps = 64;
constexpr int64_t kEnvs = 8;
constexpr int64_t kEpisodeLength = 32;
constexpr double kDiscount = 0.95;

// Discounted return of each record, restarting after an episode ends; [steps, envs].
at::Tensor discounted_returns(const at::Tensor& reward, const at::Tensor& done, double discount) {
  at::Tensor returns = at::zeros_like(reward);
  at::Tensor running = at::zeros({reward.size(1)});
  for (int64_t t = reward.size(0) - 1; t >= 0; --t) {
    running = reward[t] + discount * running * done[t].logical_not().to(at::kFloat);
    returns[t].copy_(running);
  }
  return returns;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path dir = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path() / "rollout.memmap";
  at::manual_seed(0);
  rollout::ReachEnv env(kEnvs, kEpisodeLength);
  rollout::Agent agent(rollout::ReachEnv::kObsSize, rollout::ReachEnv::kNumActions, /*learning_rate=*/1e-2);
  std::cout << "policy: torch::nn MLP " << rollout::ReachEnv::kObsSize << " -> 32 -> "
            << rollout::ReachEnv::kNumActions << " (" << agent.num_parameters() << " parameters)\n";

  // 1. Preallocate the typed buffer, then fill it step by step through the typed accessors.
  rollout::Rollout buffer({{"obs", at::zeros({kSteps, kEnvs, rollout::ReachEnv::kObsSize})},
                           {"action", at::zeros({kSteps, kEnvs}, at::kLong)},
                           {"log_prob", at::zeros({kSteps, kEnvs})},
                           {"reward", at::zeros({kSteps, kEnvs})},
                           {"done", at::zeros({kSteps, kEnvs}, at::kBool)}},
                          /*batch_size=*/{kSteps, kEnvs});
  at::Tensor obs = env.reset();
  for (int64_t t = 0; t < kSteps; ++t) {
    at::Tensor log_prob;
    at::Tensor action = agent.act(obs, log_prob);
    at::Tensor done;
    at::Tensor reward = env.step(action, done);
    buffer.obs().select(0, t).copy_(obs);
    buffer.action().select(0, t).copy_(action);
    buffer.log_prob().select(0, t).copy_(log_prob);
    buffer.reward().select(0, t).copy_(reward);
    buffer.done().select(0, t).copy_(done);
    obs = env.observation();
  }
  std::cout << "collected " << kSteps << " steps x " << kEnvs << " envs into rollout::Rollout:\n";
  rollout::print_summary(buffer, std::cout);

  // 2. Store it as a memory-mapped directory (Python tensordict's layout) and reload it.
  fs::remove_all(dir);
  td::memmap(buffer, dir.string());
  std::cout << "stored as a memmap directory " << dir.string() << ":\n";
  std::vector<std::string> files;
  for (const auto& file : fs::recursive_directory_iterator(dir)) {
    if (file.is_regular_file()) {
      files.push_back(fs::relative(file.path(), dir).string() + " (" + std::to_string(file.file_size()) + " bytes)");
    }
  }
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) std::cout << "  " << file << "\n";
  rollout::Rollout replay = rollout::Rollout::from_tensordict(td::load_memmap(dir.string()));
  std::cout << "reloaded: memmapped " << std::boolalpha << replay.is_memmap() << ", same data "
            << (at::equal(replay.obs(), buffer.obs()) && at::equal(replay.reward(), buffer.reward()) &&
                at::equal(replay.action(), buffer.action()) && at::equal(replay.done(), buffer.done()))
            << "\n";

  // 3. One REINFORCE step on the reloaded records, flattened over (steps, envs).
  at::Tensor returns = discounted_returns(replay.reward(), replay.done(), kDiscount);
  rollout::Rollout records = replay.flatten(0, 1);
  double loss = agent.train_step(records.obs(), records.action(), returns.flatten(0, 1));
  std::cout << "trained one step on " << records.batch_size() << " records: loss " << loss << "\n";
  return 0;
}
