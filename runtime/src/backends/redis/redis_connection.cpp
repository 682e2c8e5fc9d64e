#include "backends/redis/redis_connection.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <pthread.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include <tensordict/errors.h>

namespace tensordict {

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

void Replies::pop_back() {
  if (replies_.back() != nullptr) freeReplyObject(replies_.back());
  replies_.pop_back();
}

redisReply* Replies::release(size_t i) {
  redisReply* out = replies_[i];
  replies_[i] = nullptr;
  return out;
}

void Replies::replace(size_t i, redisReply* reply) {
  if (replies_[i] != nullptr) freeReplyObject(replies_[i]);
  replies_[i] = reply;
}

std::string NodeAddress::endpoint() const {
  if (!unix_socket.empty()) return "unix:" + unix_socket;
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

NodeAddress parse_node_address(std::string_view text, std::string_view what) {
  const size_t colon = text.rfind(':');
  NodeAddress out;
  bool ok = colon != std::string_view::npos && colon > 0 && colon + 1 < text.size();
  if (ok) {
    std::string_view host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    out.host = std::string(host);
    try {
      size_t used = 0;
      const std::string port(text.substr(colon + 1));
      out.port = std::stoi(port, &used);
      ok = used == port.size() && out.port > 0 && out.port < 65536;
    } catch (const std::exception&) {
      ok = false;
    }
  }
  TD_CHECK(ok, ValueError, what, ": '", std::string(text.substr(0, 128)), "' is not host:port");
  return out;
}

std::string describe(const Command& command) {
  if (command.empty()) return "(no command)";
  std::string out = command[0];
  // A script is named by its first key, not its text.
  const size_t key = (out == "EVAL" || out == "EVALSHA") ? 3 : 1;
  if (command.size() > key && command[key].size() < 256) out += " " + command[key];
  return out;
}

Connection::Connection(const StoreOptions& options, NodeAddress node) : options_(options), node_(std::move(node)) {}

Connection::~Connection() { disconnect(); }

void Connection::disconnect() {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
  sent_.clear();
  has_sent_ = false;
}

void Connection::connect() {
  if (context_ != nullptr) return;
  const timeval connect_tv = to_timeval(options_.connect_timeout);
  redisContext* c = node_.unix_socket.empty()
                        ? redisConnectWithTimeout(node_.host.c_str(), node_.port, connect_tv)
                        : redisConnectUnixWithTimeout(node_.unix_socket.c_str(), connect_tv);
  if (c == nullptr) TD_THROW(StorageError, node_.endpoint(), ": cannot connect (out of memory)");
  if (c->err != 0) {
    const std::string why = c->errstr;
    redisFree(c);
    TD_THROW(StorageError, node_.endpoint(), ": cannot connect to the server: ", why);
  }
  if (redisSetTimeout(c, to_timeval(options_.command_timeout)) != REDIS_OK) {
    redisFree(c);
    TD_THROW(StorageError, node_.endpoint(), ": cannot set the command timeout");
  }
  context_ = c;
  script_shas_.clear();  // a new connection may be to a server that restarted without them
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
    TD_THROW(StorageError, node_.endpoint(), ": ", setup[i][0] == "AUTH" ? "authentication" : "SELECT",
             " failed: ", why);
  }
}

void Connection::fail(const Command& command, const std::string& why) {
  // The connection's state is unknown (replies may be pending): drop it, the next call
  // connects again.
  disconnect();
  TD_THROW(StorageError, node_.endpoint(), ": ", describe(command), ": ", why);
}

Replies Connection::pipeline(const std::vector<Command>& commands) {
  std::vector<const Command*> refs;
  refs.reserve(commands.size());
  for (const Command& command : commands) refs.push_back(&command);
  send(refs);
  return receive();
}

void Connection::send(const std::vector<const Command*>& commands) {
  if (context_ == nullptr) connect();
  // Scripts go by their SHA1 once the server has them (EVALSHA): a script's text is sent once
  // per connection, in a SCRIPT LOAD ahead of its first use in the same round trip. Not between
  // MULTI and EXEC, where a script the server lost would fail after the other commands had run.
  std::vector<bool> by_sha(commands.size(), false);
  bool queued = false;
  for (size_t i = 0; i < commands.size(); ++i) {
    const std::string_view name = commands[i]->empty() ? std::string_view() : std::string_view((*commands[i])[0]);
    if (name == "MULTI") queued = true;
    if (name == "EXEC" || name == "DISCARD") queued = false;
    by_sha[i] = !queued && name == "EVAL" && commands[i]->size() >= 2;
  }
  loads_.clear();
  for (size_t i = 0; i < commands.size(); ++i) {
    if (!by_sha[i] || script_shas_.count((*commands[i])[1])) continue;
    const std::string& body = (*commands[i])[1];
    if (std::find(loads_.begin(), loads_.end(), body) == loads_.end()) loads_.push_back(body);
  }
  // The commands in the protocol's own format (RESP arrays of bulk strings), written into one
  // buffer handed to hiredis once: hiredis formats each argument with sdscatfmt, which cost
  // more than the server's work for a pipeline of short commands.
  std::string wire;
  size_t bytes = 0;
  for (const Command* command : commands)
    for (const std::string& arg : *command) bytes += arg.size() + 16;
  wire.reserve(bytes + 64 * loads_.size() + 16);
  const auto bulk = [&](std::string_view arg) {
    wire += '$';
    wire += std::to_string(arg.size());
    wire += "\r\n";
    wire.append(arg.data(), arg.size());
    wire += "\r\n";
  };
  const auto array = [&](size_t n) {
    wire += '*';
    wire += std::to_string(n);
    wire += "\r\n";
  };
  for (const std::string& body : loads_) {
    array(3);
    bulk("SCRIPT");
    bulk("LOAD");
    bulk(body);
  }
  for (size_t i = 0; i < commands.size(); ++i) {
    const Command& command = *commands[i];
    array(command.size());
    const auto sha = by_sha[i] ? script_shas_.find(command[1]) : script_shas_.end();
    for (size_t a = 0; a < command.size(); ++a) {
      if (sha != script_shas_.end() && a == 0) bulk("EVALSHA");
      else if (sha != script_shas_.end() && a == 1) bulk(sha->second);
      else bulk(command[a]);
    }
  }
  if (!wire.empty() && redisAppendFormattedCommand(context_, wire.data(), wire.size()) != REDIS_OK)
    fail(commands.empty() ? Command{"(pipeline)"} : *commands[0], std::string("cannot queue the commands: ") + context_->errstr);
  sent_ = commands;
  has_sent_ = true;
  // Written out now, so that pipelines to several servers travel at the same time.
  const SigpipeGuard no_sigpipe;
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(context_, &done) != REDIS_OK)
      fail(commands.empty() ? Command{"(pipeline)"} : *commands[0], std::string("connection lost: ") + context_->errstr);
  }
}

Replies Connection::receive() {
  TD_CHECK(has_sent_, RuntimeError, node_.endpoint(), ": no pipeline was sent");
  const std::vector<const Command*> commands = std::move(sent_);
  sent_.clear();
  has_sent_ = false;
  const SigpipeGuard no_sigpipe;
  auto next_reply = [&](const Command& command) {
    void* reply = nullptr;
    if (redisGetReply(context_, &reply) != REDIS_OK || reply == nullptr) {
      const bool timed_out = context_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
      fail(command, timed_out ? "no reply within the command timeout (" +
                                    std::to_string(options_.command_timeout.count()) + " ms)"
                              : std::string("connection lost: ") + context_->errstr);
    }
    return static_cast<redisReply*>(reply);
  };
  for (const std::string& body : loads_) {
    Replies load;
    load.push_back(next_reply({"SCRIPT", "LOAD"}));
    if (!load[0].is_error()) script_shas_.emplace(body, std::string(load[0].str()));
  }
  Replies replies;
  bool lost_script = false;
  for (const Command* command : commands) {
    replies.push_back(next_reply(*command));
    const ReplyRef last = replies[replies.size() - 1];
    lost_script = lost_script || (last.is_error() && last.str().rfind("NOSCRIPT", 0) == 0);
  }
  if (lost_script) {
    // Someone flushed the server's scripts (SCRIPT FLUSH): nothing of that command ran. Alone,
    // it is sent again with its text; in a pipeline, the other commands have run, so the
    // NOSCRIPT reply is the caller's to handle.
    script_shas_.clear();
    if (commands.size() == 1) {
      send(commands);
      return receive();
    }
  }
  return replies;
}

}  // namespace redis
}  // namespace tensordict
