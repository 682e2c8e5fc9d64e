// The concurrency contract (docs/reliability.md): threads may read one tensordict at once, and
// threads or processes may write disjoint rows of it at once, on memmap, HDF5 and the store.
// HDF5 files are shared between processes by exclusion: a file open for writing in one process
// is refused, with a typed error, to every other.
#include "support/catch_torch.h"

#include <sys/wait.h>

#include <exception>
#include <mutex>
#include <thread>

#include <tensordict/backends/memmap.h>
#include <tensordict/tensordict.h>
#ifdef TENSORDICT_TEST_HDF5
#include <tensordict/backends/persistent.h>
#endif
#ifdef TENSORDICT_TEST_REDIS
#include <tensordict/backends/store.h>

#include "support/redis_server.h"
#endif

#include "support/child_process.h"
#include "reliability/payload.h"
#include "support/temp_dir.h"

using namespace tensordict;
using testing_support::ChildProcess;
using testing_support::TempDir;

namespace {

constexpr int kThreads = 4;
constexpr int64_t kRows = 256;

// Runs body(thread) on kThreads threads; the first exception any of them threw, rethrown here
// (Catch's assertions are for the main thread only).
void on_threads(const std::function<void(int)>& body) {
  std::exception_ptr error;
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      try {
        body(k);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

// Every thread reads the whole tensordict and single rows, many times; any wrong value throws.
void read_on_threads(const TensorDict& td, int generation) {
  on_threads([&](int k) {
    for (int round = 0; round < 20; ++round) {
      if (reliability::generation_of(td) != generation) throw std::logic_error("wrong generation");
      const int64_t r = (k * 37 + round * 11) % kRows;
      const TensorDict row = td.index({r});
      if (!at::equal(row.get("obs"), at::full({512}, static_cast<double>(generation)).to(at::kFloat)))
        throw std::logic_error("row " + std::to_string(r) + " read wrong");
    }
  });
}

// Thread k writes rows k, k + kThreads, ... one at a time.
void write_rows_on_threads(TensorDict td) {
  on_threads([&](int k) {
    for (int64_t r = k; r < kRows; r += kThreads) td.index_put_({r}, reliability::row_of(r));
  });
}

// kThreads writer processes, each writing its share of the rows of `dest`; their exit statuses.
std::vector<int> write_rows_in_processes(const std::string& backend, const std::string& dest) {
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int k = 0; k < kThreads; ++k) {
    children.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        WRITER_PROCESS_PATH, "rows", backend, dest, std::to_string(k), std::to_string(kThreads)}));
  }
  std::vector<int> statuses;
  for (auto& c : children) statuses.push_back(c->wait());
  return statuses;
}

bool all_succeeded(const std::vector<int>& statuses) {
  for (int s : statuses)
    if (!WIFEXITED(s) || WEXITSTATUS(s) != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("threads read one memmapped tensordict at once", "[reliability][concurrency]") {
  TempDir dir;
  memmap(reliability::payload(3, kRows), dir / "td");
  read_on_threads(load_memmap(dir / "td"), 3);
}

TEST_CASE("threads write disjoint rows of one memmapped tensordict at once", "[reliability][concurrency]") {
  TempDir dir;
  TensorDict td = memmap(reliability::payload(0, kRows), dir / "td");
  write_rows_on_threads(td);
  CHECK(reliability::rows_hold_their_index(td));
  CHECK(reliability::rows_hold_their_index(load_memmap(dir / "td")));  // in the files
}

TEST_CASE("processes write disjoint rows of one memmap directory at once", "[reliability][concurrency]") {
  TempDir dir;
  memmap(reliability::payload(0, kRows), dir / "td");
  TensorDict reader = load_memmap(dir / "td");  // mapped before: sees the writes as they land
  CHECK(all_succeeded(write_rows_in_processes("memmap", dir / "td")));
  CHECK(reliability::rows_hold_their_index(reader));
  CHECK(reliability::rows_hold_their_index(load_memmap(dir / "td")));
}

#ifdef TENSORDICT_TEST_HDF5
TEST_CASE("threads read one HDF5 tensordict at once", "[reliability][concurrency][h5]") {
  TempDir dir;
  PersistentTensorDict::to_h5(reliability::payload(3, kRows), dir / "td.h5").close();
  read_on_threads(PersistentTensorDict::from_h5(dir / "td.h5", "r"), 3);
}

TEST_CASE("threads write disjoint rows of one HDF5 tensordict at once", "[reliability][concurrency][h5]") {
  TempDir dir;
  PersistentTensorDict::to_h5(reliability::payload(0, kRows), dir / "td.h5").close();
  {
    PersistentTensorDict td = PersistentTensorDict::from_h5(dir / "td.h5", "r+");
    write_rows_on_threads(td);
    CHECK(reliability::rows_hold_their_index(td));
  }
  CHECK(reliability::rows_hold_their_index(PersistentTensorDict::from_h5(dir / "td.h5", "r")));
}

TEST_CASE("an HDF5 file open for writing is refused to other processes, which take turns",
          "[reliability][concurrency][h5]") {
  TempDir dir;
  const std::string path = dir / "td.h5";
  PersistentTensorDict::to_h5(reliability::payload(0, kRows), path).close();
  {
    PersistentTensorDict writer = PersistentTensorDict::from_h5(path, "r+");
    ChildProcess other({WRITER_PROCESS_PATH, "rows", "h5", path, "0", "1"}, /*merge_stderr=*/true);
    const std::string output = other.read_all();
    const int status = other.wait();
    INFO(output);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);  // a typed error
    CHECK(output.find(path) != std::string::npos);
    CHECK(output.find("lock") != std::string::npos);
    CHECK(at::equal(writer.get("obs"), at::zeros({kRows, 512})));  // nothing written
  }
  {
    // Readers share: two processes may read a file no one writes.
    PersistentTensorDict reader = PersistentTensorDict::from_h5(path, "r");
    ChildProcess info({TDTOOL_PATH, "info", path}, /*merge_stderr=*/true);
    const std::string output = info.read_all();
    INFO(output);
    CHECK(WEXITSTATUS(info.wait()) == 0);
  }
  // Writer processes one after another: every row lands.
  for (int k = 0; k < kThreads; ++k) {
    ChildProcess child({WRITER_PROCESS_PATH, "rows", "h5", path, std::to_string(k), std::to_string(kThreads)});
    const int status = child.wait();
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  CHECK(reliability::rows_hold_their_index(PersistentTensorDict::from_h5(path, "r")));
}
#endif

#ifdef TENSORDICT_TEST_REDIS
TEST_CASE("threads read and write disjoint rows of one store handle at once", "[reliability][concurrency][redis]") {
  testing_support::RedisServer server;
  StoreOptions options;
  options.unix_socket = server.socket();
  TensorDictStore store = TensorDictStore::from_tensordict(reliability::payload(3, kRows), options);
  read_on_threads(store, 3);
  write_rows_on_threads(store);
  CHECK(reliability::rows_hold_their_index(store));
  CHECK(reliability::rows_hold_their_index(TensorDictStore::from_store(store.td_id(), options)));
}
#endif
