#pragma once
// Independent I/O tasks (leaf files, chunks of large leaves) run on LibTorch's inter-op thread
// pool, the calling thread working too: memmap writes, consolidate, map.

#include <cstddef>
#include <functional>

namespace tensordict {
namespace detail {

/// The threads an I/O call uses: `requested` when positive, else at::get_num_interop_threads().
int io_threads(int requested);

/// Runs task(0) .. task(n - 1), on at most `threads` threads: the calling thread and up to
/// threads - 1 helpers from the inter-op pool. The calling thread takes tasks too and never
/// waits for a helper that has not started, so a busy pool (or a call from inside one of its
/// tasks) only makes it slower, never deadlocks. The first exception stops the tasks not yet
/// started and is rethrown here once the running ones are done.
void run_io_tasks(size_t n, int threads, const std::function<void(size_t)>& task);

}  // namespace detail
}  // namespace tensordict
