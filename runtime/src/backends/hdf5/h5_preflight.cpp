// The child process of the untrusted-file check (h5_preflight.h): started, watched, reported.

#include "backends/hdf5/h5_preflight.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include <hdf5.h>

#include <tensordict/errors.h>

#include "backends/hdf5/h5_id.h"

namespace tensordict {
namespace h5 {

namespace {

// What the child writes on its pipe once the walk is over: this byte, the walk's failure (empty
// when clean), a newline.
constexpr char kFinished = 'k';
// The longest failure the parent reads (HDF5's error stacks can be long).
constexpr size_t kMaxReport = 2048;
// Its exit status when the walk threw (it ran out of memory).
constexpr int kThrew = 3;

struct Child {
  const char* path;
  std::string (*walk)(const char*);
  int read_fd;   // the parent's end
  int write_fd;  // the child's end
  pid_t parent;
  pid_t pid = -1;
  int fork_errno = 0;
};

[[noreturn]] void child_main(const Child& c) {
  // A crash shows as the signal's default action, whatever handlers the program installed (a
  // crash reporter would report a crash of the check as one of the program), with no core file;
  // and the child dies with its parent rather than walk on alone.
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGTRAP}) ::signal(s, SIG_DFL);
  const struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != c.parent) ::_exit(kThrew);
  ::close(c.read_fd);
  std::string report(1, kFinished);
  try {
    report += c.walk(c.path).substr(0, kMaxReport);
    std::replace(report.begin(), report.end(), '\n', ' ');  // one line: the parent reads up to '\n'
    report += '\n';
  } catch (...) {
    ::_exit(kThrew);
  }
  for (size_t done = 0; done < report.size();) {
    const ssize_t n = ::write(c.write_fd, report.data() + done, report.size() - done);
    if (n < 0 && errno != EINTR) ::_exit(kThrew);
    if (n > 0) done += static_cast<size_t>(n);
  }
  // _exit: no exit handlers, so nothing of the parent's HDF5 state (its open files) is flushed
  // or closed from here.
  ::_exit(0);
}

// Called by HDF5 for the first property of a list, inside H5Piterate: this thread holds HDF5's
// global (recursive) lock, so no other thread is inside HDF5 at the fork. The child, the only
// thread left, owns that lock and calls HDF5 from here; it never returns.
herr_t fork_inside_hdf5(hid_t, const char*, void* data) {
  Child& c = *static_cast<Child*>(data);
  c.pid = ::fork();
  if (c.pid == 0) child_main(c);
  if (c.pid < 0) c.fork_errno = errno;
  return 1;  // stops the iteration
}

void start(Child& c) {
  H5Id list(H5Pcreate(H5P_DATASET_XFER));
  if (list.valid()) H5Piterate(list.get(), nullptr, fork_inside_hdf5, &c);
  if (c.pid < 0 && c.fork_errno == 0) fork_inside_hdf5(H5I_INVALID_HID, nullptr, &c);  // HDF5 refused: plainly
  H5Eclear2(H5E_DEFAULT);
}

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;  // ECHILD: the program ignores SIGCHLD, the status is gone
  }
  return status;
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace

void run_contained(const std::string& path, std::chrono::milliseconds timeout, std::string (*walk)(const char*)) {
  silence_errors();
  int fds[2];
  TD_CHECK(::pipe2(fds, O_CLOEXEC) == 0, RuntimeError, path, ": cannot start the check of the HDF5 file: ",
           ::strerror(errno));
  Child c{path.c_str(), walk, fds[0], fds[1], ::getpid()};
  start(c);
  ::close(fds[1]);
  if (c.pid < 0) {
    ::close(fds[0]);
    TD_THROW(RuntimeError, path, ": cannot start the check of the HDF5 file: fork: ", ::strerror(c.fork_errno));
  }
  // The child's report up to its newline, or the end of the pipe when it dies first; no report
  // by the deadline is a hang.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string report;
  bool timed_out = false, ended = false;
  while (!ended && (report.empty() || report.back() != '\n')) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    struct pollfd p = {fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (ready == 0 || (ready < 0 && errno != EINTR)) {
      timed_out = true;
      break;
    }
    if (ready < 0) continue;
    char buffer[512];
    const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n > 0) report.append(buffer, static_cast<size_t>(n));
    ended = n == 0 || (n < 0 && errno != EINTR) || report.size() > kMaxReport + 2;
  }
  ::close(fds[0]);
  if (timed_out) ::kill(c.pid, SIGKILL);
  const int status = reap(c.pid);
  TD_CHECK(!timed_out, StorageError, path, ": the check of the HDF5 file timed out after ",
           static_cast<double>(timeout.count()) / 1000, " s (the HDF5 library hangs on it, or it holds more "
           "objects than the check can walk in that time: H5OpenOptions::check_timeout); it was not opened");
  if (report.size() >= 2 && report.front() == kFinished && report.back() == '\n') {
    const std::string failure = report.substr(1, report.size() - 2);
    TD_CHECK(failure.empty(), StorageError, path, ": the HDF5 library cannot read the file's structure (", failure,
             "); HDF5 1.10 is not safe on such corrupt files, so it was not opened");
    return;
  }
  TD_CHECK(status >= 0, StorageError, path, ": the check of the HDF5 file ended before it finished (its exit "
           "status is lost: the program ignores SIGCHLD); it was not opened");
  TD_CHECK(!WIFSIGNALED(status), StorageError, path, ": the HDF5 library crashed (", signal_name(WTERMSIG(status)),
           ") while reading the file in a check process: the file is corrupt or hostile; it was not opened");
  TD_THROW(StorageError, path, ": the check of the HDF5 file ended before it finished (exit status ",
           WIFEXITED(status) ? WEXITSTATUS(status) : status, "; out of memory?); it was not opened");
}

namespace {

// True when this process has `path` open for writing through HDF5 (compared by device and
// inode, on the default sec2 driver whose handle is a descriptor).
bool open_for_writing_here(const std::string& path) {
  struct stat target;
  if (::stat(path.c_str(), &target) != 0) return false;
  const ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE);
  if (n <= 0) return false;
  std::vector<hid_t> ids(static_cast<size_t>(n));
  const ssize_t listed = H5Fget_obj_ids(H5F_OBJ_ALL, H5F_OBJ_FILE, ids.size(), ids.data());
  bool found = false;
  for (ssize_t i = 0; i < listed && !found; ++i) {
    unsigned intent = 0;
    if (H5Fget_intent(ids[i], &intent) < 0 || (intent & H5F_ACC_RDWR) == 0) continue;
    H5Id access(H5Fget_access_plist(ids[i]));
    void* handle = nullptr;
    struct stat open;
    found = access.valid() && H5Pget_driver(access.get()) == H5FD_SEC2 &&
            H5Fget_vfd_handle(ids[i], H5P_DEFAULT, &handle) >= 0 && handle != nullptr &&
            ::fstat(*static_cast<const int*>(handle), &open) == 0 && open.st_dev == target.st_dev &&
            open.st_ino == target.st_ino;
  }
  H5Eclear2(H5E_DEFAULT);
  return found;
}

}  // namespace

void check_in_child(const std::string& path, std::chrono::milliseconds timeout) {
  silence_errors();
  if (open_for_writing_here(path)) return;
  run_contained(path, timeout, walk_for_check);
}

}  // namespace h5
}  // namespace tensordict
