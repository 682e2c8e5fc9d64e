// run_io_tasks (core/io_tasks.h): the pool that memmap writes use runs every task once, rethrows
// the first error after the running tasks end, and cannot deadlock when called from its own pool.
#include "support/catch_torch.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <stdexcept>
#include <vector>

#include <ATen/Parallel.h>

#include "core/io_tasks.h"

using tensordict::detail::io_threads;
using tensordict::detail::run_io_tasks;

TEST_CASE("run_io_tasks runs every task exactly once, on several threads", "[io_tasks]") {
  for (int threads : {1, 2, 4, 16}) {
    std::vector<std::atomic<int>> runs(100);
    run_io_tasks(runs.size(), threads, [&](size_t i) { ++runs[i]; });
    for (auto& r : runs) CHECK(r == 1);
  }
  run_io_tasks(0, 4, [](size_t) { FAIL("no task to run"); });
}

TEST_CASE("run_io_tasks rethrows the first error and starts no task after it", "[io_tasks]") {
  std::atomic<int> started{0};
  CHECK_THROWS_WITH(run_io_tasks(1000, 2,
                                 [&](size_t i) {
                                   ++started;
                                   if (i == 3) throw std::runtime_error("task 3 failed");
                                 }),
                    "task 3 failed");
  CHECK(started < 1000);
}

TEST_CASE("run_io_tasks called from inside the inter-op pool finishes", "[io_tasks]") {
  // Every pool thread busy with a call that itself asks the pool for helpers.
  const int pool = at::get_num_interop_threads();
  std::vector<std::promise<int>> done(pool);
  std::vector<std::future<int>> results;
  for (auto& p : done) results.push_back(p.get_future());
  for (int t = 0; t < pool; ++t) {
    at::launch([&, t] {
      std::atomic<int> sum{0};
      run_io_tasks(50, 8, [&](size_t i) { sum += static_cast<int>(i); });
      done[t].set_value(sum);
    });
  }
  for (auto& r : results) CHECK(r.get() == 50 * 49 / 2);
}

TEST_CASE("io_threads takes the request or the inter-op pool's size", "[io_tasks]") {
  CHECK(io_threads(3) == 3);
  CHECK(io_threads(0) == std::max(1, at::get_num_interop_threads()));
}
