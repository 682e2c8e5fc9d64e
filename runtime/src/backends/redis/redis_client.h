#pragma once
// The client under every TensorDictStore: one server, or a Redis Cluster (StoreOptions::
// cluster_nodes). A pipeline costs one round trip per server it involves. On a cluster each
// command goes to the master of its key's slot, from a slot map read with CLUSTER SLOTS, and the
// client follows what nodes answer while slots move: MOVED (the map is updated and the command
// sent there), ASK (sent once there after ASKING), TRYAGAIN/CLUSTERDOWN (sent again after a
// pause), a node that refuses connections (the map is read again); all within command_timeout.
//
// Only what a node did not run is sent again: a command it redirected, or a MULTI/EXEC block one
// of whose commands it redirected (EXEC then discards the whole block). A connection lost with
// replies outstanding is a StorageError and nothing is repeated, since part of the pipeline may
// have been applied; the next call reads the slot map again. WATCH state lives on a connection:
// a transaction that would have to run on another node than the one holding its WATCHes is a
// StorageError (nothing applied) instead of a transaction without its check.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tensordict/backends/store_options.h>

#include "backends/redis/cluster_map.h"
#include "backends/redis/redis_connection.h"

namespace tensordict {
namespace redis {

/// A script whose text starts with this line writes nothing: a pipeline of reads and such
/// scripts is not followed by WAIT (StoreOptions::replicas_to_ack), so reads work while
/// replicas are away.
inline constexpr std::string_view kReadOnlyScript = "-- read-only\n";

/// True when `command` writes nothing (a read, WATCH, MULTI/EXEC, a read-only script).
bool read_only(const Command& command);

class RedisClient {
 public:
  /// Connects to the server, or reads the slot map from the first reachable cluster node
  /// (StorageError naming them when none answers).
  explicit RedisClient(StoreOptions options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  /// Sends `commands` and returns their replies, in order. Error replies are returned (check()
  /// turns one into an exception); I/O errors, timeouts and too few replica acknowledgements
  /// (StoreOptions::replicas_to_ack) throw StorageError. On a cluster, commands may name keys
  /// of any slots (one MULTI/EXEC block: one slot); each server gets its share in one round trip,
  /// all servers at once. Commands without keys go where the last pipeline went.
  Replies pipeline(const std::vector<Command>& commands);
  /// One command; an error reply throws StorageError.
  Replies run(const Command& command);
  /// StorageError "<server>: <COMMAND> <key>: <message>" when `reply` is an error.
  void check(ReplyRef reply, const Command& command) const;

  const StoreOptions& options() const { return options_; }
  bool is_cluster() const { return !options_.cluster_nodes.empty(); }
  /// The masters serving the cluster's slots now (the slot map read again), or the server.
  std::vector<NodeAddress> masters();
  /// The node that serves `slot` by the current map (the server when not a cluster).
  NodeAddress node_of_slot(int slot);

 private:
  struct Unit;
  struct Batch;
  Connection& connection(const NodeAddress& node);
  /// StorageError unless `acked` (WAIT's reply from `node`) counts replicas_to_ack replicas.
  void check_acks(ReplyRef acked, const NodeAddress& node) const;
  /// Reads CLUSTER SLOTS from the first node that answers: known masters, then the seeds.
  void refresh_slot_map();
  /// Where a unit of `slot` goes when not redirected.
  NodeAddress route(int slot);
  /// One round: every pending unit sent to its node (one pipeline per node, all at once);
  /// the units a node did not run are returned.
  std::vector<size_t> send_round(const std::vector<Command>& commands, const std::vector<Unit>& units,
                                 const std::vector<size_t>& pending, Replies& out, bool& pause);

  StoreOptions options_;
  /// WAIT replicas_to_ack replica_ack_timeout, ending every round trip that writes when set.
  const Command wait_command_;
  std::vector<NodeAddress> seeds_;
  std::vector<std::unique_ptr<Connection>> connections_;
  SlotMap slots_;
  bool slots_stale_ = true;
  /// Where the last pipeline went: commands without keys go there (UNWATCH after WATCH).
  Connection* last_ = nullptr;
  /// The node whose connection holds this client's WATCHes, if any.
  std::optional<NodeAddress> watching_;
  /// Units of the pipeline in progress that a node answered ASK for, and where to ask.
  std::map<size_t, NodeAddress> asks_;
  /// Why the last try failed, for the timeout's message.
  std::string last_failure_;
};

}  // namespace redis
}  // namespace tensordict
