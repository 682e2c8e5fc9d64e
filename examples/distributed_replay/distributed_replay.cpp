// A replay buffer shared through a Redis store, filled by actor processes and sampled by a
// learner that sends its updated policy back to the actors over c10d.
//
//   distributed_replay --rank R --world W --master HOST:PORT --redis HOST:PORT [--rounds N]
//                      [--rows-per-round M] [--address ADDR]
//
// Rank 0 is the learner: it preallocates the buffer on the server (TensorDictStore::from_schema,
// wrapped as the typed Transition), then every round waits for the actors, samples a minibatch
// from the store, takes a gradient step and broadcasts the policy's parameters (from_module) to
// the actors, which load them with to_module. Ranks 1..W-1 are actors: each round they write
// their rows into their own slice of the buffer, acting with their copy of the policy. The
// c10d group rendezvous at --master (rank 0 serves it); every rank reaches the store at --redis
// and is reached by the others at --address (default: 127.0.0.1 when the master is on this
// machine's loopback, else the address this machine's hostname resolves to).
// scripts/demo.sh runs it on one machine; docs/distributed.md says how to run it on several.
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <tensordict/backends/store.h>
#include <tensordict/distributed.h>
#include <tensordict/module.h>
#include <tensordict/tensordict.h>

#include "transition.td.h"

namespace td = tensordict;
namespace dist = tensordict::distributed;
using replay_demo::Transition;

namespace {

struct Args {
  int rank = -1, world = 0, rounds = 20, rows_per_round = 64;
  std::string master, redis, address;
};

std::pair<std::string, uint16_t> host_port(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("expected HOST:PORT, got '" + text + "'");
  return {text.substr(0, colon), static_cast<uint16_t>(std::stoi(text.substr(colon + 1)))};
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rank") a.rank = std::stoi(value);
    else if (flag == "--world") a.world = std::stoi(value);
    else if (flag == "--master") a.master = value;
    else if (flag == "--redis") a.redis = value;
    else if (flag == "--rounds") a.rounds = std::stoi(value);
    else if (flag == "--rows-per-round") a.rows_per_round = std::stoi(value);
    else if (flag == "--address") a.address = value;
    else throw std::invalid_argument("unknown flag " + flag);
  }
  if (a.rank < 0 || a.world < 2 || a.master.empty() || a.redis.empty())
    throw std::invalid_argument("usage: distributed_replay --rank R --world W --master HOST:PORT --redis HOST:PORT "
                                "[--rounds N] [--rows-per-round M] [--address ADDR]");
  return a;
}

c10::intrusive_ptr<c10d::ProcessGroupGloo> join_group(const Args& a) {
  const auto [host, port] = host_port(a.master);
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = a.rank == 0;
  options.numWorkers = static_cast<size_t>(a.world);
  options.timeout = std::chrono::seconds(60);
  auto store = c10::make_intrusive<c10d::TCPStore>(host, options);
  auto gloo = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(60));
  // Where the other ranks reach this one.
  const std::string address = !a.address.empty() ? a.address : host.rfind("127.", 0) == 0 || host == "localhost" ? "127.0.0.1" : "";
  gloo->devices.push_back(address.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                          : c10d::ProcessGroupGloo::createDeviceForHostname(address));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, a.rank, a.world, gloo);
}

td::StoreOptions store_options(const Args& a) {
  const auto [host, port] = host_port(a.redis);
  td::StoreOptions options;
  options.host = host;
  options.port = port;
  options.td_id = "distributed_replay";
  return options;
}

// What the policy should learn: the action that earns the most reward for an observation.
at::Tensor target_action(const at::Tensor& obs) { return at::stack({obs.sum(-1), obs.select(-1, 0) - obs.select(-1, 1)}, -1); }

// Waits for every rank: the round's rows are all written when it returns.
void barrier(c10d::ProcessGroup& pg) {
  td::TensorDict token({{"round", at::zeros({1})}}, {});
  dist::all_reduce_(token, pg);
}

void run_actor(const Args& a, c10d::ProcessGroup& pg, torch::nn::Linear& policy, td::TensorDict& params) {
  const int actors = a.world - 1;
  const int64_t capacity = static_cast<int64_t>(a.rows_per_round) * actors;
  Transition buffer = Transition::from_tensordict(td::TensorDictStore::from_store("distributed_replay", store_options(a)));
  for (int round = 0; round < a.rounds; ++round) {
    const at::Tensor obs = at::randn({a.rows_per_round, 4});
    const at::Tensor action = [&] {
      torch::NoGradGuard no_grad;
      return policy->forward(obs);
    }();
    const at::Tensor reward = -(action - target_action(obs)).pow(2).sum(-1);
    const int64_t first = static_cast<int64_t>(a.rank - 1) * a.rows_per_round % capacity;
    Transition rows({{"obs", obs}, {"action", action}, {"reward", reward},
                     {"actor", at::full({a.rows_per_round}, a.rank, at::kLong)}},
                    {a.rows_per_round});
    buffer.index_put_({at::indexing::Slice(first, first + a.rows_per_round)}, rows);  // one round trip
    barrier(pg);
    dist::broadcast_(params, pg, 0);  // the learner's new policy, straight into this one's parameters
    if (round % 5 == 4 || round == a.rounds - 1)
      std::cout << "actor " << a.rank << " round " << round + 1 << ": mean reward " << reward.mean().item<float>() << std::endl;
  }
}

void run_learner(const Args& a, c10d::ProcessGroup& pg, torch::nn::Linear& policy, td::TensorDict& params) {
  const int64_t capacity = static_cast<int64_t>(a.rows_per_round) * (a.world - 1);
  // Preallocated on the server (no tensor bytes pass through here), checked as a Transition.
  // The learner owns the buffer: a run replaces the one an earlier run left on the server.
  td::StoreOptions options = store_options(a);
  options.overwrite = true;
  td::TensorDictStore store = td::TensorDictStore::from_schema(
      {{"obs", {{4}, at::kFloat}}, {"action", {{2}, at::kFloat}}, {"reward", {{}, at::kFloat}}, {"actor", {{}, at::kLong}}},
      {capacity}, options);
  Transition buffer = Transition::from_tensordict(store);
  barrier(pg);  // the buffer exists: actors may open it
  torch::optim::SGD optimizer(policy->parameters(), torch::optim::SGDOptions(0.1));
  for (int round = 0; round < a.rounds; ++round) {
    barrier(pg);
    const Transition batch = buffer.index({at::randint(capacity, {64}, at::kLong)});  // reads 64 rows
    optimizer.zero_grad();
    const at::Tensor loss = (policy->forward(batch.obs()) - target_action(batch.obs())).pow(2).mean();
    loss.backward();
    optimizer.step();
    dist::broadcast_(params, pg, 0);
    if (round % 5 == 4 || round == a.rounds - 1)
      std::cout << "learner round " << round + 1 << ": loss " << loss.item<float>() << ", mean stored reward "
                << buffer.reward().mean().item<float>() << std::endl;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    auto pg = join_group(args);
    torch::manual_seed(args.rank);
    torch::nn::Linear policy(4, 2);
    td::TensorDict params = td::from_module(*policy);  // the parameters themselves, not copies
    dist::broadcast_(params, *pg, 0);                  // every actor starts from the learner's policy
    if (args.rank == 0) {
      run_learner(args, *pg, policy, params);
    } else {
      barrier(*pg);  // wait for the buffer
      run_actor(args, *pg, policy, params);
    }
  } catch (const std::exception& e) {
    std::cerr << "distributed_replay: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
