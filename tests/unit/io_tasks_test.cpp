// run_io_tasks (core/io_tasks.h): the pool that memmap writes use runs every task once, rethrows
// the first error after the running tasks end, and cannot deadlock when called from its own pool;
// remove_tree (core/file_io.h), which the file backends clean up with.
#include "support/catch_torch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include <unistd.h>

#include <ATen/Parallel.h>

#include "core/file_io.h"
#include "core/io_tasks.h"
#include "support/temp_dir.h"

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
  // Every other task takes 1 ms: running all 1000 would need the failing thread descheduled
  // for half a second between its throw and the error's record (a loaded CI machine can hold it
  // back for the microseconds 1000 empty tasks take).
  CHECK_THROWS_WITH(run_io_tasks(1000, 2,
                                 [&](size_t i) {
                                   ++started;
                                   if (i == 3) throw std::runtime_error("task 3 failed");
                                   std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                 }),
                    "task 3 failed");
  CHECK(started < 1000);
}

TEST_CASE("run_io_tasks called from inside the inter-op pool finishes", "[io_tasks]") {
  // Every pool thread busy with a call that itself asks the pool for helpers.
  const int pool = static_cast<int>(at::get_num_interop_threads());
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
  CHECK(io_threads(0) == std::max(1, static_cast<int>(at::get_num_interop_threads())));
}

TEST_CASE("remove_tree removes a directory tree, and links but not what they point to", "[io_tasks]") {
  testing_support::TempDir outside, dir;
  const std::string kept = outside.write("kept.txt", "stays");
  dir.write("a/b/c.txt", "x");
  dir.write("a/d.txt", "y");
  REQUIRE(::symlink(kept.c_str(), (dir / "a/b/link").c_str()) == 0);
  REQUIRE(::symlink(outside.path().c_str(), (dir / "a/dirlink").c_str()) == 0);
  tensordict::detail::remove_tree(dir / "a");
  CHECK_FALSE(std::filesystem::exists(dir / "a"));
  CHECK(std::filesystem::exists(kept));
  tensordict::detail::remove_tree(dir / "missing");  // nothing there: nothing happens
  const std::string file = dir.write("f.txt", "z");
  tensordict::detail::remove_tree(file);
  CHECK_FALSE(std::filesystem::exists(file));
}
