#include "backends/redis/redis_client.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <pthread.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include <tensordict/errors.h>

namespace tensordict {

std::string StoreOptions::endpoint() const {
  return unix_socket.empty() ? host + ":" + std::to_string(port) : "unix:" + unix_socket;
}

namespace redis {

namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Writing to a server that went away raises SIGPIPE, whose default action kills the process. A
// library must not change the process's signal handling, so the writes run with SIGPIPE
// blocked in this thread, and a SIGPIPE they raised is consumed before it is unblocked.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        sigset_t only;
        sigemptyset(&only);
        sigaddset(&only, SIGPIPE);
        const timespec none{0, 0};
        while (sigtimedwait(&only, nullptr, &none) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t old_;
  bool was_pending_ = false;
};

}  // namespace

bool ReplyRef::is_nil() const { return reply_->type == REDIS_REPLY_NIL; }
bool ReplyRef::is_error() const { return reply_->type == REDIS_REPLY_ERROR; }
bool ReplyRef::is_array() const { return reply_->type == REDIS_REPLY_ARRAY; }
std::string_view ReplyRef::str() const {
  return reply_->str == nullptr ? std::string_view() : std::string_view(reply_->str, reply_->len);
}
long long ReplyRef::integer() const { return reply_->integer; }
size_t ReplyRef::size() const { return reply_->type == REDIS_REPLY_ARRAY ? reply_->elements : 0; }
ReplyRef ReplyRef::operator[](size_t i) const { return ReplyRef(reply_->element[i]); }

Replies::~Replies() {
  for (redisReply* r : replies_) freeReplyObject(r);
}

std::string describe(const Command& command) {
  if (command.empty()) return "(no command)";
  std::string out = command[0];
  if (command.size() > 1 && command[1].size() < 256) out += " " + command[1];
  return out;
}

RedisClient::RedisClient(StoreOptions options) : options_(std::move(options)) { connect(); }

RedisClient::~RedisClient() {
  if (context_ != nullptr) redisFree(context_);
}

void RedisClient::connect() {
  if (context_ != nullptr) {
    redisFree(context_);
    context_ = nullptr;
  }
  const timeval connect_tv = to_timeval(options_.connect_timeout);
  redisContext* c = options_.unix_socket.empty()
                        ? redisConnectWithTimeout(options_.host.c_str(), options_.port, connect_tv)
                        : redisConnectUnixWithTimeout(options_.unix_socket.c_str(), connect_tv);
  if (c == nullptr) TD_THROW(StorageError, options_.endpoint(), ": cannot connect (out of memory)");
  if (c->err != 0) {
    const std::string why = c->errstr;
    redisFree(c);
    TD_THROW(StorageError, options_.endpoint(), ": cannot connect to the server: ", why);
  }
  if (redisSetTimeout(c, to_timeval(options_.command_timeout)) != REDIS_OK) {
    redisFree(c);
    TD_THROW(StorageError, options_.endpoint(), ": cannot set the command timeout");
  }
  context_ = c;
  std::vector<Command> setup;
  if (!options_.password.empty()) {
    setup.push_back(options_.username.empty() ? Command{"AUTH", options_.password}
                                              : Command{"AUTH", options_.username, options_.password});
  }
  if (options_.db != 0) setup.push_back({"SELECT", std::to_string(options_.db)});
  if (setup.empty()) return;
  Replies replies = pipeline(setup);
  for (size_t i = 0; i < setup.size(); ++i) {
    if (!replies[i].is_error()) continue;
    const std::string why(replies[i].str());
    redisFree(context_);
    context_ = nullptr;
    // Never echo the password.
    TD_THROW(StorageError, options_.endpoint(), ": ", setup[i][0] == "AUTH" ? "authentication" : "SELECT",
             " failed: ", why);
  }
}

void RedisClient::fail(const Command& command, const std::string& why) {
  // The connection's state is unknown (replies may be pending): drop it, the next call
  // connects again.
  redisFree(context_);
  context_ = nullptr;
  TD_THROW(StorageError, options_.endpoint(), ": ", describe(command), ": ", why);
}

Replies RedisClient::pipeline(const std::vector<Command>& commands) {
  if (context_ == nullptr) connect();
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const Command& command : commands) {
    argv.clear();
    lengths.clear();
    for (const std::string& arg : command) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()) != REDIS_OK)
      fail(command, std::string("cannot queue the command: ") + context_->errstr);
  }
  Replies replies;
  const SigpipeGuard no_sigpipe;
  for (const Command& command : commands) {
    void* reply = nullptr;
    if (redisGetReply(context_, &reply) != REDIS_OK || reply == nullptr) {
      const bool timed_out = context_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
      fail(command, timed_out ? "no reply within the command timeout (" +
                                    std::to_string(options_.command_timeout.count()) + " ms)"
                              : std::string("connection lost: ") + context_->errstr);
    }
    replies.push_back(static_cast<redisReply*>(reply));
  }
  return replies;
}

Replies RedisClient::run(const Command& command) {
  Replies replies = pipeline({command});
  check(replies[0], command);
  return replies;
}

void RedisClient::check(ReplyRef reply, const Command& command) const {
  if (reply.is_error())
    TD_THROW(StorageError, options_.endpoint(), ": ", describe(command), ": ", std::string(reply.str()));
}

}  // namespace redis
}  // namespace tensordict
