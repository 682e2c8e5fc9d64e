#pragma once
// Where a TensorDictStore lives and how to reach it: a Redis-protocol server (Redis, Valkey,
// KeyDB, Dragonfly) over TCP or a unix socket. The key layout is Python tensordict v0.14's:
// every key is `{prefix}:{<td_id>}:<suffix>`, the braces a cluster hash tag.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tensordict {

/// How a new store keeps its tensor bytes (docs/backends.md, "Row records").
enum class StoreLayout {
  /// Python tensordict v0.14's: one value per leaf (`d:<path>`). Either side reads the other's.
  per_leaf,
  /// This port's: one value per row of dim 0 (`r:<row>`), holding that row of every tensor leaf
  /// whose dim 0 is the batch's. A random row of every leaf is one key, so a sample is one MGET
  /// and a full row write one MSET. The tensor leaves are fixed at creation (the handle is
  /// locked; adding, removing, renaming or re-shaping one is a StorageError), a whole-leaf read
  /// costs a range per row, and Python v0.14 cannot read the tensor leaves.
  per_row,
};

struct StoreOptions {
  std::string host = "localhost";
  int port = 6379;
  /// When set, connect through this unix socket instead of host:port.
  std::string unix_socket;
  /// SELECT'ed after connecting.
  int db = 0;
  /// AUTH'ed after connecting when set (with `username` when that is set too: Redis 6 ACLs).
  std::string username;
  std::string password;
  /// The first part of every key (Python's `prefix`).
  std::string prefix = "tensordict";
  /// The store's id; empty: a new random (uuid4) id when a store is created.
  std::string td_id;
  /// from_tensordict and from_schema refuse a `td_id` the server already holds a store under
  /// (StorageError: creating it again would replace its data) unless this is set.
  bool overwrite = false;
  /// How from_tensordict and from_schema lay the store out; from_store reads it from the server.
  StoreLayout layout = StoreLayout::per_leaf;
  /// Connecting gives up after this long (StorageError naming the server).
  std::chrono::milliseconds connect_timeout{2000};
  /// A command's reply must arrive within this long (StorageError naming the command and key).
  std::chrono::milliseconds command_timeout{10000};
  /// The largest value one leaf may take: the server's `proto-max-bulk-len` (512 MiB unless the
  /// server is configured otherwise). Larger leaves are refused before anything is sent.
  int64_t max_value_bytes = int64_t{512} << 20;

  /// Redis Cluster: when set, `host`, `port` and `unix_socket` are not used; these nodes
  /// ("host:port", any of the cluster's) give the slot map, and each command goes to the
  /// master of its key's slot, following MOVED and ASK (docs/backends.md, "Redis Cluster").
  /// A store's keys share one slot (its {td_id} hash tag), so a store lives on one master.
  std::vector<std::string> cluster_nodes;
  /// When above 0, every round trip ends with `WAIT replicas_to_ack`: a write returns only once
  /// that many replicas have it, so a failover that promotes one of them keeps it. Fewer
  /// within `replica_ack_timeout` is a StorageError (the write is on the master, and may be
  /// lost if the master fails before its replicas catch up). 0: Redis's asynchronous replication.
  int replicas_to_ack = 0;
  std::chrono::milliseconds replica_ack_timeout{1000};

  /// "host:port", "unix:<path>" or "cluster <node>,...": how errors name the server.
  std::string endpoint() const;
};

}  // namespace tensordict
