#pragma once
// A child process a test starts, watches (its stdout, line by line) and kills.

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace testing_support {

class ChildProcess {
 public:
  /// Runs `argv[0]` (a path) with `argv`, its stdout (and stderr, with `merge_stderr`)
  /// readable through wait_for_line and read_all.
  explicit ChildProcess(const std::vector<std::string>& argv, bool merge_stderr = false) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      if (merge_stderr) ::dup2(fds[1], STDERR_FILENO);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    if (out_ >= 0) ::close(out_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// Reads stdout until a line equal to `line`; false when the child closed it first or
  /// `timeout` passed.
  bool wait_for_line(const std::string& line, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        const std::string got = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (got == line) return true;
        continue;
      }
      if (!read_some(deadline)) return false;
    }
  }

  /// Reads stdout until a line starting with `prefix` (stored in `line`); false when the child
  /// closed it first or `timeout` passed.
  bool wait_for_prefix(const std::string& prefix, std::string& line,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (line.compare(0, prefix.size(), prefix) == 0) return true;
        continue;
      }
      if (!read_some(deadline)) return false;
    }
  }

  /// Everything the child writes until it closes its output.
  std::string read_all() {
    char chunk[4096];
    for (ssize_t n; (n = ::read(out_, chunk, sizeof(chunk))) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    return std::move(buffer_);
  }

  void kill() { ::kill(pid_, SIGKILL); }
  pid_t pid() const { return pid_; }

  /// The wait status once the child exits, or -1 when it still runs after `timeout` (it is
  /// then killed: a test must not hang on a hung child).
  int wait_or_kill(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return status;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill();
        wait();
        return -1;
      }
      ::usleep(10000);
    }
  }

  /// Waits for the child; its wait status.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  // Appends what the child wrote, waiting until `deadline`; false at its end or the deadline.
  bool read_some(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[256];
      const ssize_t n = ::read(out_, chunk, sizeof(chunk));
      if (n <= 0) return false;
      buffer_.append(chunk, static_cast<size_t>(n));
      return true;
    }
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
};

}  // namespace testing_support
