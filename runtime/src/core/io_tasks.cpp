// run_io_tasks: a shared counter of tasks that the calling thread and the pool's helpers drain.

#include "core/io_tasks.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

#include <ATen/Parallel.h>

namespace tensordict {
namespace detail {

int io_threads(int requested) {
  // (an int in LibTorch 1.13, a size_t in 2.x)
  return requested > 0 ? requested : std::max(1, static_cast<int>(at::get_num_interop_threads()));
}

namespace {

// Shared with the helpers, which may start after run_io_tasks returned (they find no task then
// and leave without touching `task`).
struct TaskQueue {
  TaskQueue(size_t n, const std::function<void(size_t)>& task) : n(n), task(&task) {}
  const size_t n;
  const std::function<void(size_t)>* task;  // valid while `closed` is false
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::condition_variable idle;
  int active = 0;       // helpers inside drain()
  bool closed = false;  // run_io_tasks is returning: no helper may enter
  std::exception_ptr error;

  // Takes tasks until none is left; an exception ends every other thread's loop too.
  void drain() {
    for (size_t i = next++; i < n; i = next++) {
      try {
        (*task)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  }

  void help() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (closed) return;
      ++active;
    }
    drain();
    std::lock_guard<std::mutex> lock(mutex);
    if (--active == 0) idle.notify_all();
  }
};

}  // namespace

void run_io_tasks(size_t n, int threads, const std::function<void(size_t)>& task) {
  const size_t helpers = std::min<size_t>(n, static_cast<size_t>(std::max(threads, 1))) - (n > 0 ? 1 : 0);
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) task(i);
    return;
  }
  auto queue = std::make_shared<TaskQueue>(n, task);
  for (size_t h = 0; h < helpers; ++h) at::launch([queue] { queue->help(); });
  queue->drain();
  std::unique_lock<std::mutex> lock(queue->mutex);
  queue->closed = true;  // a helper that starts from now on leaves at once
  queue->idle.wait(lock, [&] { return queue->active == 0; });
  if (queue->error) std::rethrow_exception(queue->error);
}

}  // namespace detail
}  // namespace tensordict
