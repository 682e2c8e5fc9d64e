// map / map_iter (tensordict/map.h): chunk bounds are computed up front, each worker indexes its
// chunk itself (a view in memory; only that chunk read from a file or a server) and calls fn.
// Reads from backends whose reads are copies go one at a time: a file or connection handle is
// not shared between threads.

#include <tensordict/map.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/errors.h>

#include "core/batch_dim.h"

namespace tensordict {

namespace {
struct Chunk {
  int64_t start = 0;
  int64_t stop = 0;  // stop == -1: the single row `start`, without the dim (chunksize 0)
};

std::vector<at::indexing::TensorIndex> chunk_index(int64_t dim, const Chunk& c) {
  std::vector<at::indexing::TensorIndex> idx(static_cast<size_t>(dim), at::indexing::Slice());
  if (c.stop < 0) idx.emplace_back(c.start);
  else idx.emplace_back(at::indexing::Slice(c.start, c.stop));
  return idx;
}
}  // namespace

struct MapIter::State {
  TensorDict td;
  MapFunction fn;
  int64_t dim = 0;
  std::vector<Chunk> chunks;
  std::vector<size_t> order;  // the chunk computed for position i
  size_t prefetch = 0;
  bool copies_on_read = false;

  std::mutex mutex;
  std::mutex read_mutex;
  std::condition_variable cv;
  std::vector<std::optional<TensorDict>> results;
  std::vector<char> done;
  std::exception_ptr error;
  size_t claimed = 0;
  size_t consumed = 0;
  bool stop = false;
  std::vector<std::thread> workers;

  void work() {
    for (;;) {
      size_t pos;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stop || claimed >= order.size() || claimed < consumed + prefetch; });
        if (stop || claimed >= order.size()) return;
        pos = claimed++;
      }
      std::optional<TensorDict> result;
      std::exception_ptr failure;
      try {
        const auto idx = chunk_index(dim, chunks[order[pos]]);
        TensorDict chunk;
        if (copies_on_read) {
          std::lock_guard<std::mutex> read_lock(read_mutex);
          chunk = td.index(idx);
        } else {
          chunk = td.index(idx);
        }
        result = fn(chunk);
      } catch (...) {
        failure = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (failure && !error) error = failure;
        if (failure) stop = true;
        results[pos] = std::move(result);
        done[pos] = 1;
      }
      cv.notify_all();
    }
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    cv.notify_all();
    for (auto& w : workers) {
      if (w.joinable()) w.join();
    }
  }
};

MapIter::MapIter(const TensorDict& td, MapFunction fn, const MapOptions& options) : state_(std::make_unique<State>()) {
  TD_CHECK(fn, ValueError, "map: no function given");
  TD_CHECK(!(options.chunksize && options.num_chunks), ValueError,
           "Either chunksize or num_chunks must be provided, but not both.");
  TD_CHECK(!LazyStackedTensorDict::is_lazy_stack(td) ||
               std::none_of(td.batch_size().begin(), td.batch_size().end(), [](int64_t s) { return s < 0; }),
           ValueError, "map: a lazy stack with ragged batch dims cannot be split");
  State& s = *state_;
  s.td = td;
  s.fn = std::move(fn);
  s.dim = detail::wrap_batch_dim<IndexError>(options.dim, td.batch_dims(), "map", td.batch_size());
  s.copies_on_read = !td.impl()->leaves_alias_storage();
  const int workers = options.num_workers > 0 ? options.num_workers
                                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t n = td.batch_size()[s.dim];
  if (options.chunksize && *options.chunksize == 0) {
    for (int64_t i = 0; i < n; ++i) s.chunks.push_back({i, -1});
  } else {
    int64_t size;
    if (options.chunksize) {
      TD_CHECK(*options.chunksize > 0, ValueError, "map: chunksize must be >= 0, got ", *options.chunksize);
      size = *options.chunksize;
    } else {
      const int64_t k = options.num_chunks ? *options.num_chunks : workers;
      TD_CHECK(k > 0, ValueError, "map: num_chunks must be positive, got ", k);
      size = std::max<int64_t>((n + std::min(n, k) - 1) / std::max<int64_t>(std::min(n, k), 1), 1);
    }
    for (int64_t start = 0; start < n; start += size) s.chunks.push_back({start, std::min(n, start + size)});
  }
  s.order.resize(s.chunks.size());
  std::iota(s.order.begin(), s.order.end(), size_t{0});
  if (options.shuffle) {
    std::mt19937_64 rng(options.seed ? *options.seed : std::random_device{}());
    std::shuffle(s.order.begin(), s.order.end(), rng);
  }
  s.results.resize(s.chunks.size());
  s.done.assign(s.chunks.size(), 0);
  s.prefetch = static_cast<size_t>(options.max_prefetch > 0 ? options.max_prefetch : 2 * workers);
  const size_t threads = std::min<size_t>(static_cast<size_t>(workers), s.chunks.size());
  for (size_t i = 0; i < threads; ++i) s.workers.emplace_back([&s] { s.work(); });
}

MapIter::~MapIter() {
  if (state_) state_->shutdown();
}
MapIter::MapIter(MapIter&&) noexcept = default;
MapIter& MapIter::operator=(MapIter&& other) noexcept {
  if (this != &other) {
    if (state_) state_->shutdown();
    state_ = std::move(other.state_);
  }
  return *this;
}

int64_t MapIter::num_chunks() const { return static_cast<int64_t>(state_->chunks.size()); }

bool MapIter::next_chunk(int64_t& chunk, std::optional<TensorDict>& result) {
  State& s = *state_;
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    if (s.consumed >= s.order.size()) return false;
    s.cv.wait(lock, [&] { return s.error || s.done[s.consumed]; });
    if (s.error) std::rethrow_exception(s.error);
    chunk = static_cast<int64_t>(s.order[s.consumed]);
    result = std::move(s.results[s.consumed]);
    s.results[s.consumed].reset();
    ++s.consumed;
  }
  s.cv.notify_all();
  return true;
}

std::optional<TensorDict> MapIter::next() {
  int64_t chunk;
  std::optional<TensorDict> result;
  while (next_chunk(chunk, result)) {
    if (result) return result;
  }
  return std::nullopt;
}

MapIter map_iter(const TensorDict& td, MapFunction fn, const MapOptions& options) {
  return MapIter(td, std::move(fn), options);
}

std::optional<TensorDict> map(const TensorDict& td, MapFunction fn, const MapOptions& options) {
  TD_CHECK(!options.shuffle, ValueError, "map: shuffle is for map_iter (map keeps the chunk order)");
  MapIter it(td, std::move(fn), options);
  std::vector<TensorDict> results;
  while (auto r = it.next()) results.push_back(std::move(*r));
  if (results.empty()) return std::nullopt;
  const int64_t dim = detail::wrap_batch_dim<IndexError>(options.dim, td.batch_dims(), "map", td.batch_size());
  if (options.chunksize && *options.chunksize == 0) return maybe_dense_stack(results, dim);
  return cat(results, dim);
}

TensorDict& map(const TensorDict& td, MapFunction fn, TensorDict& out, const MapOptions& options) {
  TD_CHECK(!options.shuffle, ValueError, "map: shuffle is for map_iter (map keeps the chunk order)");
  TD_CHECK(out.batch_size() == td.batch_size(), ShapeError, "map: out has batch size ", out.batch_size(),
           " but the tensordict mapped has ", td.batch_size());
  MapIter it(td, std::move(fn), options);
  const int64_t dim = it.state_->dim;
  int64_t chunk;
  std::optional<TensorDict> result;
  // Written on this thread as results arrive (Python writes on the main process too); a null
  // result leaves its rows alone.
  while (it.next_chunk(chunk, result)) {
    if (result) out.update_at_(*result, chunk_index(dim, it.state_->chunks[static_cast<size_t>(chunk)]));
  }
  return out;
}

}  // namespace tensordict
