#pragma once
// What a Redis Cluster client must know beyond the key's slot (cluster_slot.h): which master
// serves each slot (CLUSTER SLOTS), which slot a command's key is in, and the redirections a
// node answers with while slots move or fail over.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/redis/redis_connection.h"

namespace tensordict {
namespace redis {

/// The masters serving each slot, as CLUSTER SLOTS gave them.
class SlotMap {
 public:
  /// Parses a CLUSTER SLOTS reply from `asked` (whose host stands in for a node announced
  /// without one). StorageError naming `asked` when the reply is not a slot map.
  static SlotMap parse(ReplyRef reply, const NodeAddress& asked);

  bool empty() const { return ranges_.empty(); }
  /// The master of `slot`; nullptr when no node serves it.
  const NodeAddress* master(int slot) const;
  /// Records a MOVED answer: `slot` is `node`'s now.
  void set_master(int slot, NodeAddress node);
  /// Every master, once each, in slot order of their first range.
  std::vector<NodeAddress> masters() const;

 private:
  struct Range {
    int first;
    int last;
    NodeAddress master;
  };
  std::vector<Range> ranges_;  // sorted by first slot, not overlapping
};

/// How a node answered a command it would not run.
struct Redirect {
  enum Kind {
    Moved,  // MOVED <slot> <host:port>: the slot is served there now
    Ask,    // ASK <slot> <host:port>: the key is being migrated there; one ASKING retry
    Wait,   // TRYAGAIN, CLUSTERDOWN, LOADING, a script's "non local key": retry after a pause
  };
  Kind kind;
  int slot = -1;
  NodeAddress node;
};

/// The redirection `reply` is, or nullopt for a reply that is not one (results, other errors).
/// `from` is the node that answered (an address without a host means its host).
std::optional<Redirect> parse_redirect(ReplyRef reply, const NodeAddress& from);

/// The slot of `command`'s first key, or -1 for a command that names none (MULTI, EXEC,
/// UNWATCH, WAIT, ASKING, SCRIPT, CLUSTER, PING, ...). EVAL/EVALSHA: its first declared key.
int command_slot(const Command& command);

}  // namespace redis
}  // namespace tensordict
