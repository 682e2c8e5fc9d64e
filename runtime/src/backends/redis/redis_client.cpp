#include "backends/redis/redis_client.h"

#include <algorithm>
#include <thread>
#include <unordered_set>

#include <hiredis/hiredis.h>

#include <tensordict/errors.h>

namespace tensordict {

std::string StoreOptions::endpoint() const {
  if (!cluster_nodes.empty()) {
    std::string out = "cluster ";
    for (size_t i = 0; i < cluster_nodes.size(); ++i) out += (i ? "," : "") + cluster_nodes[i];
    return out;
  }
  return unix_socket.empty() ? host + ":" + std::to_string(port) : "unix:" + unix_socket;
}

namespace redis {

/// Commands a node runs or redirects together: one command, or a MULTI ... EXEC block.
struct RedisClient::Unit {
  size_t begin;
  size_t end;
  int slot;
  bool block;
};

/// The units of one round going to one node.
struct RedisClient::Batch {
  NodeAddress node;
  bool asking;
  std::vector<size_t> units;
  std::vector<const Command*> commands;  // the caller's, ASKING and WAIT: never copied
  /// Whether the batch ends with WAIT (it writes, and StoreOptions::replicas_to_ack is set).
  bool wait = false;
  Connection* connection = nullptr;
};

namespace {

using Clock = std::chrono::steady_clock;

std::vector<size_t> all_units(size_t n) {
  std::vector<size_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

}  // namespace

bool read_only(const Command& command) {
  static const std::unordered_set<std::string> reads = {
      "GET",    "GETRANGE", "MGET",  "STRLEN",  "EXISTS", "TYPE",     "HGET",   "HGETALL", "HMGET", "HLEN",
      "SMEMBERS", "SCARD",  "SISMEMBER", "ZRANGE", "ZSCORE", "ZCARD", "WATCH",  "UNWATCH", "MULTI", "EXEC",
      "DISCARD", "PING",    "CLUSTER", "INFO",   "SCRIPT", "ASKING", "PTTL",  "TTL",     "DBSIZE", "SCAN"};
  if (command.empty()) return true;
  const std::string& name = command[0];
  if (name == "EVAL" && command.size() > 1 && command[1].rfind(kReadOnlyScript, 0) == 0) return true;
  return reads.count(name) > 0;
}

RedisClient::RedisClient(StoreOptions options)
    : options_(std::move(options)),
      wait_command_{"WAIT", std::to_string(options_.replicas_to_ack), std::to_string(options_.replica_ack_timeout.count())} {
  if (!is_cluster()) {
    NodeAddress node;
    node.host = options_.host;
    node.port = options_.port;
    node.unix_socket = options_.unix_socket;
    connection(node).connect();
    return;
  }
  TD_CHECK(options_.db == 0, ValueError, options_.endpoint(), ": a Redis Cluster has database 0 only (StoreOptions::db is ",
           options_.db, ")");
  for (const std::string& text : options_.cluster_nodes)
    seeds_.push_back(parse_node_address(text, "StoreOptions::cluster_nodes"));
  refresh_slot_map();
}

RedisClient::~RedisClient() = default;

Connection& RedisClient::connection(const NodeAddress& node) {
  for (const auto& c : connections_)
    if (c->node() == node) return *c;
  connections_.push_back(std::make_unique<Connection>(options_, node));
  return *connections_.back();
}

void RedisClient::refresh_slot_map() {
  std::vector<NodeAddress> candidates = slots_.masters();
  for (const NodeAddress& seed : seeds_)
    if (std::find(candidates.begin(), candidates.end(), seed) == candidates.end()) candidates.push_back(seed);
  std::string why;
  for (const NodeAddress& node : candidates) {
    try {
      Connection& c = connection(node);
      const Replies replies = c.pipeline({{"CLUSTER", "SLOTS"}});
      SlotMap map = SlotMap::parse(replies[0], node);
      if (map.empty()) {
        why += "; " + node.endpoint() + ": no slot is assigned";
        continue;
      }
      slots_ = std::move(map);
      slots_stale_ = false;
      return;
    } catch (const StorageError& e) {
      why += std::string("; ") + e.what();
    }
  }
  TD_THROW(StorageError, options_.endpoint(), ": no cluster node gave the slot map", why);
}

NodeAddress RedisClient::route(int slot) {
  if (!is_cluster()) return connections_.front()->node();
  if (slot < 0) {
    if (watching_) return *watching_;
    if (last_ != nullptr) return last_->node();
  }
  if (slots_stale_ || slots_.empty()) refresh_slot_map();
  const NodeAddress* master = slot < 0 ? nullptr : slots_.master(slot);
  if (master != nullptr) return *master;
  if (slot < 0) return slots_.masters().front();
  TD_THROW(StorageError, options_.endpoint(), ": no node serves slot ", slot);
}

std::vector<NodeAddress> RedisClient::masters() {
  if (!is_cluster()) return {connections_.front()->node()};
  refresh_slot_map();
  return slots_.masters();
}

NodeAddress RedisClient::node_of_slot(int slot) { return route(slot); }

Replies RedisClient::pipeline(const std::vector<Command>& commands) {
  if (!is_cluster()) {  // one server: nothing to route, the commands go as they are
    Connection& server = *connections_.front();
    const bool wait = options_.replicas_to_ack > 0 &&
                      !std::all_of(commands.begin(), commands.end(), [](const Command& c) { return read_only(c); });
    std::vector<const Command*> refs;
    for (const Command& command : commands) refs.push_back(&command);
    if (wait) refs.push_back(&wait_command_);
    // A server loading its dataset (just restarted with AOF or RDB) refuses every command with
    // LOADING: nothing ran, so the pipeline goes again after a pause, within command_timeout.
    const Clock::time_point deadline = Clock::now() + options_.command_timeout;
    std::chrono::milliseconds pause_for{2};
    for (;;) {
      server.send(refs);
      Replies replies = server.receive();
      const bool loading = replies.size() > 0 && replies[0].is_error() && replies[0].str().rfind("LOADING", 0) == 0;
      if (!loading || Clock::now() >= deadline) {
        if (wait) {
          check_acks(replies[replies.size() - 1], server.node());
          replies.pop_back();
        }
        return replies;
      }
      std::this_thread::sleep_for(pause_for);
      pause_for = std::min(pause_for * 2, std::chrono::milliseconds(100));
    }
  }
  asks_.clear();
  std::vector<Unit> units;
  for (size_t i = 0; i < commands.size();) {
    Unit unit{i, i + 1, command_slot(commands[i]), !commands[i].empty() && commands[i][0] == "MULTI"};
    if (unit.block) {
      while (unit.end < commands.size() && commands[unit.end - 1][0] != "EXEC" && commands[unit.end - 1][0] != "DISCARD")
        ++unit.end;
      for (size_t j = unit.begin; j < unit.end && unit.slot < 0; ++j) unit.slot = command_slot(commands[j]);
    }
    units.push_back(unit);
    i = unit.end;
  }
  Replies out;
  for (size_t i = 0; i < commands.size(); ++i) out.push_back(nullptr);
  std::vector<size_t> pending = all_units(units.size());
  const Clock::time_point deadline = Clock::now() + options_.command_timeout;
  std::chrono::milliseconds pause_for{2};
  while (true) {
    bool pause = false;
    pending = send_round(commands, units, pending, out, pause);
    if (pending.empty()) return out;
    if (Clock::now() >= deadline) {
      TD_THROW(StorageError, options_.endpoint(), ": ", describe(commands[units[pending.front()].begin]),
               ": the cluster did not serve slot ", units[pending.front()].slot, " within the command timeout (",
               options_.command_timeout.count(), " ms)", last_failure_.empty() ? "" : ": ", last_failure_);
    }
    if (pause) {
      std::this_thread::sleep_for(pause_for);
      pause_for = std::min(pause_for * 2, std::chrono::milliseconds(100));
    }
  }
}

std::vector<size_t> RedisClient::send_round(const std::vector<Command>& commands, const std::vector<Unit>& units,
                                            const std::vector<size_t>& pending, Replies& out, bool& pause) {
  std::vector<size_t> again;
  std::vector<Batch> batches;
  for (size_t u : pending) {
    std::optional<NodeAddress> target;
    bool asking = false;
    if (auto ask = asks_.find(u); ask != asks_.end()) {
      target = ask->second;
      asking = true;
      asks_.erase(ask);
    } else {
      try {
        target = route(units[u].slot);
      } catch (const StorageError& e) {
        if (!is_cluster()) throw;
        last_failure_ = e.what();
        slots_stale_ = true;
        pause = true;
        again.push_back(u);
        continue;
      }
    }
    auto batch = std::find_if(batches.begin(), batches.end(),
                              [&](const Batch& b) { return b.node == *target && b.asking == asking; });
    if (batch == batches.end()) batch = batches.insert(batches.end(), Batch{*target, asking, {}, {}});
    batch->units.push_back(u);
    // After ASKING a node runs the next command for a slot it is importing; inside MULTI the
    // permission lasts until EXEC.
    static const Command kAsking{"ASKING"};
    if (asking) batch->commands.push_back(&kAsking);
    for (size_t i = units[u].begin; i < units[u].end; ++i) batch->commands.push_back(&commands[i]);
  }
  const auto drop_all = [&] {
    for (Batch& b : batches)
      if (b.connection != nullptr) b.connection->disconnect();
    slots_stale_ = true;
    watching_.reset();
  };
  for (Batch& batch : batches) {
    const bool has_block = std::any_of(batch.units.begin(), batch.units.end(), [&](size_t u) { return units[u].block; });
    if (has_block && watching_ && *watching_ != batch.node) {
      const Unit& unit = units[*std::find_if(batch.units.begin(), batch.units.end(), [&](size_t u) { return units[u].block; })];
      size_t keyed = unit.begin;  // the block's first command with a key names it
      while (keyed + 1 < unit.end && command_slot(commands[keyed]) < 0) ++keyed;
      const std::string watched = watching_->endpoint();
      drop_all();
      TD_THROW(StorageError, options_.endpoint(), ": ", describe(commands[keyed]), ": slot ", unit.slot, " moved from ",
               watched, " to ", batch.node.endpoint(),
               " between a WATCH and its transaction; nothing of the transaction was applied");
    }
    batch.wait = options_.replicas_to_ack > 0 &&
                 !std::all_of(batch.commands.begin(), batch.commands.end(), [](const Command* c) { return read_only(*c); });
    if (batch.wait) batch.commands.push_back(&wait_command_);
    Connection& c = connection(batch.node);
    try {
      c.connect();
    } catch (const StorageError& e) {
      // Nothing was sent: the node is down or gone; the map is read again and the units retried.
      if (!is_cluster()) throw;
      last_failure_ = e.what();
      slots_stale_ = true;
      pause = true;
      again.insert(again.end(), batch.units.begin(), batch.units.end());
      continue;
    }
    try {
      c.send(batch.commands);
    } catch (const StorageError&) {
      drop_all();
      throw;
    }
    batch.connection = &c;
  }
  // Every reply read before any is acted on: a failure then leaves no reply unread.
  std::vector<Replies> received(batches.size());
  for (size_t b = 0; b < batches.size(); ++b) {
    if (batches[b].connection == nullptr) continue;
    try {
      received[b] = batches[b].connection->receive();
    } catch (const StorageError&) {
      drop_all();
      throw;
    }
    last_ = batches[b].connection;
    batches[b].connection = nullptr;
  }
  for (size_t b = 0; b < batches.size(); ++b) {
    Batch& batch = batches[b];
    Replies& got = received[b];
    if (got.size() == 0) continue;
    if (batch.wait) check_acks(got[got.size() - 1], batch.node);
    size_t k = 0;
    for (size_t u : batch.units) {
      if (batch.asking) ++k;  // ASKING's OK
      const Unit& unit = units[u];
      std::optional<Redirect> redirect;
      for (size_t j = 0; is_cluster() && j < unit.end - unit.begin && !redirect; ++j) {
        redirect = parse_redirect(got[k + j], batch.node);
        if (redirect) last_failure_ = batch.node.endpoint() + ": " + describe(commands[unit.begin + j]) + ": " + std::string(got[k + j].str());
      }
      if (redirect) {
        if (redirect->kind == Redirect::Moved) slots_.set_master(redirect->slot, redirect->node);
        if (redirect->kind == Redirect::Ask) asks_[u] = redirect->node;
        if (redirect->kind == Redirect::Wait) {
          slots_stale_ = true;
          pause = true;
        }
        again.push_back(u);
      } else {
        for (size_t j = unit.begin; j < unit.end; ++j) {
          const std::string& name = commands[j][0];
          if (name == "WATCH") watching_ = batch.node;
          if (name == "EXEC" || name == "UNWATCH" || name == "DISCARD") watching_.reset();
          out.replace(j, got.release(k + (j - unit.begin)));
        }
      }
      k += unit.end - unit.begin;
    }
  }
  std::sort(again.begin(), again.end());
  return again;
}

void RedisClient::check_acks(ReplyRef acked, const NodeAddress& node) const {
  if (!acked.is_error() && acked.integer() >= options_.replicas_to_ack) return;
  TD_THROW(StorageError, node.endpoint(), ": WAIT ", options_.replicas_to_ack, ": ",
           acked.is_error() ? std::string(acked.str()) : std::to_string(acked.integer()) + " replicas",
           " acknowledged the write within ", options_.replica_ack_timeout.count(),
           " ms (StoreOptions::replicas_to_ack); it is on the master, and lost if the master fails before its "
           "replicas have it");
}

Replies RedisClient::run(const Command& command) {
  Replies replies = pipeline({command});
  check(replies[0], command);
  return replies;
}

void RedisClient::check(ReplyRef reply, const Command& command) const {
  if (!reply.is_error()) return;
  const std::string_view text = reply.str();
  const bool cluster_reply = !is_cluster() && (text.rfind("MOVED ", 0) == 0 || text.rfind("CLUSTERDOWN", 0) == 0);
  TD_THROW(StorageError, options_.endpoint(), ": ", describe(command), ": ", std::string(text),
           cluster_reply ? " (the server is a Redis Cluster node: list its nodes in StoreOptions::cluster_nodes)" : "");
}

}  // namespace redis
}  // namespace tensordict
