// The Redis variant of docs/replay-buffer.md (docs/replay-buffer.md#the-same-buffer-on-a-redis-store),
// run in order by main() against a real redis-server it starts (tests/support/redis_server.h)
// on a unix socket: a typed buffer preallocated on the server, filled, sampled by another handle.
#include <iostream>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <tensordict/backends/store.h>
#include <tensordict/tensordict.h>

#include "replay.td.h"
#include "replay_steps.h"
#include "support/redis_server.h"

namespace td = tensordict;
using replay::Transition;
using replay_snippets::env_step;

int main() {
  testing_support::RedisServer server;  // a user's server is already running
  // docs/replay-buffer.md#the-same-buffer-on-a-redis-store
  td::StoreOptions options;
  options.unix_socket = server.socket();  // or options.host and options.port
  options.td_id = "replay";               // what other processes open it by
  Transition buffer = Transition::store_like(/*batch_size=*/{64}, options);
  // The server zero-filled every tensor field: no tensor bytes left this process.
  for (int64_t t = 0; t < 64; ++t) {
    buffer.index_put_({t}, env_step(t));  // one round trip per row, checked against the schema
  }

  // Another process (an actor, a learner) opens the same store, checked from its metadata.
  Transition shared = Transition::from_tensordict(td::TensorDictStore::from_store("replay", options));
  Transition batch = shared.index({at::randint(0, 64, {16}, at::kLong)});  // 16 rows read
  std::cout << batch.reward().sizes() << " " << shared.obs().info_list()[3].value_or("-") << "\n";  // [16] walk
  try {
    Transition::store_like({64}, options);  // would zero-fill the buffer: refused
  } catch (const td::StorageError& e) {
    std::cout << "refused: " << e.what() << "\n";
  }

  if (shared.obs().info_list()[3] != std::optional<std::string>("walk")) return 1;
  if (shared.reward()[63].item<float>() != 63.f) return 1;
  return 0;
}
