#pragma once
// A real redis-server for one test: started on a unix socket in a fresh temporary directory,
// with persistence off, and always stopped (SIGTERM, then SIGKILL) when the object dies. The
// child also dies with the test process (PR_SET_PDEATHSIG), so a crashed test leaves no server
// behind. stop() and start() let fault tests take the server away and bring it back on the same
// socket.

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tensordict/backends/store_options.h>

#include "support/temp_dir.h"

namespace testing_support {

class RedisServer {
 public:
  /// `extra` are more redis-server options ("--proto-max-bulk-len", "4gb").
  explicit RedisServer(std::vector<std::string> extra = {}) : dir_("td_redis"), extra_(std::move(extra)) { start(); }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  const std::string& socket() const { return socket_; }
  bool running() const { return pid_ > 0; }

  void start() {
    if (pid_ > 0) return;
    socket_ = dir_.path("redis.sock");
    std::vector<std::string> args = {"redis-server", "--port", "0", "--unixsocket", socket_,
                                     "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                                     "--dir", dir_.path(), "--logfile", dir_.path("redis.log")};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::execvp("redis-server", argv.data());
      ::_exit(127);  // not installed: scripts/install-deps.sh installs redis-server
    }
    pid_ = pid;
    // Ready when the socket accepts a connection.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!accepts()) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("redis-server exited at start (status " + std::to_string(status) +
                                 "); is it installed? see " + dir_.path("redis.log"));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        throw std::runtime_error("redis-server did not accept connections within 10 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  /// Stops the server at once, as a crash would (no shutdown).
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  bool accepts() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_.c_str(), sizeof(addr.sun_path) - 1);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  }

  TempDir dir_;
  std::vector<std::string> extra_;
  std::string socket_;
  pid_t pid_ = -1;
};

/// Options that reach `server` through its socket.
inline tensordict::StoreOptions store_options(const RedisServer& server) {
  tensordict::StoreOptions options;
  options.unix_socket = server.socket();
  return options;
}

}  // namespace testing_support
