#pragma once
// One blocking connection to one Redis-protocol server, on hiredis. Commands go in pipelines: one
// write of every command, then one read of every reply, so an operation costs one round trip
// whatever the number of leaves. Failures are StorageErrors naming the server, the command and
// its key; a connection that failed is dropped and the next call connects again. Nothing is
// retried here: a pipeline that failed half way may have been applied in part. RedisClient
// (redis_client.h) routes over one server or a cluster of them.

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <tensordict/backends/store_options.h>

struct redisContext;
struct redisReply;

namespace tensordict {
namespace redis {

/// One command and its arguments, binary-safe: {"SETRANGE", key, offset, bytes}.
using Command = std::vector<std::string>;

/// A server reply (owned by the Replies it came in).
class ReplyRef {
 public:
  explicit ReplyRef(const redisReply* reply) : reply_(reply) {}
  bool is_nil() const;
  bool is_error() const;
  bool is_array() const;
  /// The bytes of a string, status or error reply.
  std::string_view str() const;
  long long integer() const;
  size_t size() const;
  ReplyRef operator[](size_t i) const;

 private:
  const redisReply* reply_;
};

/// The replies of one pipeline, in command order.
class Replies {
 public:
  Replies() = default;
  Replies(Replies&&) noexcept = default;
  Replies& operator=(Replies&&) noexcept = default;
  ~Replies();
  size_t size() const { return replies_.size(); }
  ReplyRef operator[](size_t i) const { return ReplyRef(replies_[i]); }
  void push_back(redisReply* reply) { replies_.push_back(reply); }
  /// Moves reply `i` out (the caller frees it or pushes it into other Replies).
  redisReply* release(size_t i);
  /// Frees the last reply and drops it.
  void pop_back();
  /// Replaces reply `i` with `reply`, freeing the old one.
  void replace(size_t i, redisReply* reply);

 private:
  std::vector<redisReply*> replies_;
};

/// Where one server listens: host:port, or a unix socket when `unix_socket` is set.
struct NodeAddress {
  std::string host;
  int port = 0;
  std::string unix_socket;

  /// "host:port" or "unix:<path>".
  std::string endpoint() const;
  bool operator==(const NodeAddress& other) const {
    return host == other.host && port == other.port && unix_socket == other.unix_socket;
  }
  bool operator!=(const NodeAddress& other) const { return !(*this == other); }
};

/// "host:port" (IPv6 "[::1]:port") as a NodeAddress; ValueError naming `what` otherwise.
NodeAddress parse_node_address(std::string_view text, std::string_view what);

class Connection {
 public:
  /// Does not connect yet: connect() or the first pipeline does. `options` gives the timeouts,
  /// credentials and database.
  Connection(const StoreOptions& options, NodeAddress node);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Connects when not connected (StorageError naming the server when it cannot: nothing of
  /// any command was sent then).
  void connect();
  bool connected() const { return context_ != nullptr; }
  /// Drops the connection (the server's per-connection state, WATCHes included, goes with it).
  void disconnect();

  /// Sends `commands` in one round trip and returns their replies. Error replies are returned;
  /// I/O errors and timeouts throw StorageError. `{"EVAL", script, ...}` goes as EVALSHA once
  /// the server has the script.
  Replies pipeline(const std::vector<Command>& commands);
  /// pipeline() in two halves, so that several servers work at once: send() writes every
  /// command out, receive() reads their replies. The commands must live until receive();
  /// they are taken by address, so a payload is never copied on its way out.
  void send(const std::vector<const Command*>& commands);
  Replies receive();

  const NodeAddress& node() const { return node_; }

 private:
  [[noreturn]] void fail(const Command& command, const std::string& why);

  const StoreOptions& options_;
  NodeAddress node_;
  redisContext* context_ = nullptr;
  /// The SHA1 the server gave each script text it has loaded on this connection.
  std::unordered_map<std::string, std::string> script_shas_;
  /// What send() left for receive(): the commands, and the script texts loaded ahead of them.
  std::vector<const Command*> sent_;
  bool has_sent_ = false;
  std::vector<std::string> loads_;
};

/// "GETRANGE tensordict:{id}:d:obs": how a message names a command (its name and key only;
/// arguments can be megabytes of data).
std::string describe(const Command& command);

}  // namespace redis
}  // namespace tensordict
