#pragma once
// Python's map / map_iter: a function over chunks of a tensordict along one batch dim, run by a
// pool of threads (Python uses a pool of processes; here the chunks are views, nothing is
// pickled, and `fn` must be safe to call from several threads at once). See docs/operations.md.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include <tensordict/tensor_dict.h>

namespace tensordict {

struct MapOptions {
  /// The batch dim to split (negative counts from the end).
  int64_t dim = 0;
  /// Threads calling `fn`; 0: one per hardware thread.
  int num_workers = 0;
  /// Rows per chunk; 0 gives `fn` single rows without the dim (Python's chunksize=0). Unset:
  /// `num_chunks` chunks. Both set is a ValueError.
  std::optional<int64_t> chunksize;
  /// Number of chunks (default: the number of workers).
  std::optional<int64_t> num_chunks;
  /// map_iter: the chunks in a random order, drawn from `seed` (random when unset).
  bool shuffle = false;
  std::optional<uint64_t> seed;
  /// Results computed ahead of the consumer at most (memory stays bounded); 0: twice the workers.
  int max_prefetch = 0;
};

/// A chunk in, its result out; nullopt drops the chunk's result (Python's None).
using MapFunction = std::function<std::optional<TensorDict>(const TensorDict&)>;

/// The results of `fn` over the chunks, one at a time, in chunk order (or shuffled). Workers
/// start at once and run ahead by at most max_prefetch results; an exception `fn` threw is
/// rethrown by next(). Destroying the iterator stops the workers.
class MapIter {
 public:
  MapIter(const TensorDict& td, MapFunction fn, const MapOptions& options = {});
  ~MapIter();
  MapIter(MapIter&&) noexcept;
  MapIter& operator=(MapIter&&) noexcept;
  /// The next non-null result, or nullopt when every chunk is done.
  std::optional<TensorDict> next();
  /// How many chunks the tensordict was split into.
  int64_t num_chunks() const;

  struct State;

 private:
  friend TensorDict& map(const TensorDict&, MapFunction, TensorDict&, const MapOptions&);
  /// The next chunk's index into the split and its result (null ones too); false when done.
  bool next_chunk(int64_t& chunk, std::optional<TensorDict>& result);

  std::unique_ptr<State> state_;
};

MapIter map_iter(const TensorDict& td, MapFunction fn, const MapOptions& options = {});
/// The results concatenated along `dim` (stacked when chunksize is 0); nullopt when every
/// result was null.
std::optional<TensorDict> map(const TensorDict& td, MapFunction fn, const MapOptions& options = {});
/// Each result written into the matching rows of `out` (existing keys, in place). Returns out.
TensorDict& map(const TensorDict& td, MapFunction fn, TensorDict& out, const MapOptions& options = {});

}  // namespace tensordict
