#pragma once
// A blocking connection to a Redis-protocol server, on hiredis. Commands go in pipelines: one
// write of every command, then one read of every reply, so an operation costs one round trip
// whatever the number of leaves. Failures are StorageErrors naming the server, the command and
// its key; a connection that failed is dropped and the next call connects again, so a later
// operation works once the server is back. Nothing is retried: a pipeline that failed half way
// may have been applied in part, and only the caller knows whether repeating it is safe.

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

 private:
  std::vector<redisReply*> replies_;
};

class RedisClient {
 public:
  /// Connects (StorageError naming the server when it cannot).
  explicit RedisClient(StoreOptions options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  /// Sends `commands` in one round trip and returns their replies. Error replies are returned
  /// (check() turns one into an exception); I/O errors and timeouts throw StorageError.
  /// `{"EVAL", script, ...}` goes as EVALSHA once the server has the script.
  Replies pipeline(const std::vector<Command>& commands);
  /// One command; an error reply throws StorageError.
  Replies run(const Command& command);
  /// StorageError "<server>: <COMMAND> <key>: <message>" when `reply` is an error.
  void check(ReplyRef reply, const Command& command) const;

  const StoreOptions& options() const { return options_; }

 private:
  void connect();
  [[noreturn]] void fail(const Command& command, const std::string& why);

  StoreOptions options_;
  redisContext* context_ = nullptr;
  /// The SHA1 the server gave each script text it has loaded on this connection.
  std::unordered_map<std::string, std::string> script_shas_;
};

/// "GETRANGE tensordict:{id}:d:obs": how a message names a command (its name and key only;
/// arguments can be megabytes of data).
std::string describe(const Command& command);

}  // namespace redis
}  // namespace tensordict
