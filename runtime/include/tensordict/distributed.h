#pragma once
// Tensordicts between processes over c10d (Python tensordict's send/recv, isend/irecv,
// init_remote/from_remote_init and the collectives over leaves), on any c10d::ProcessGroup
// (Gloo on the CPU, in LibTorch 1.13 and 2.x).
//
// A transfer starts with a header carrying a hash of the structure (every key path, dtype,
// shape, non-tensor key and the batch size); the receiver answers before any data moves, so a
// mismatch is a DistributedError on both sides naming the first differing key. Leaves go in
// sorted key order: small ones packed into one buffer, large ones as they are (no copy), a
// consolidated tensordict received into a consolidated one of the same layout as its one
// storage. Every wait has a timeout; a peer that dies or never answers is an error, not a hang.

#include <chrono>
#include <future>
#include <memory>
#include <type_traits>
#include <utility>

#include <tensordict/errors.h>
#include <tensordict/tensor_dict.h>

namespace c10d {
class ProcessGroup;
}  // namespace c10d

namespace tensordict {

/// A transfer or collective that failed: mismatched structures (naming the first differing
/// key), a timeout, a peer that went away, or an error of the process group itself.
class DistributedError : public RuntimeError {
  using RuntimeError::RuntimeError;
};

namespace distributed {

struct Options {
  /// How long each step may wait for the peer (the header, its answer, each message).
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  /// The c10d tag of every message of a point-to-point transfer: transfers between the same
  /// ranks with different tags do not mix.
  int tag = 0;
};

enum class ReduceOp { Sum, Product, Min, Max };

/// Sends `td` to rank `dst`; returns when the receiver has it all.
void send(const TensorDict& td, c10d::ProcessGroup& pg, int dst, const Options& options = {});
/// Receives into `td` (preallocated with the sender's structure) from rank `src`: tensor
/// leaves are written in place, non-tensor values replaced.
void recv(TensorDict& td, c10d::ProcessGroup& pg, int src, const Options& options = {});

/// A transfer running in the background. wait() rethrows its error; dropping an unfinished
/// Work waits for it (the tensors it reads or writes must outlive it).
class Work {
 public:
  Work() = default;
  explicit Work(std::future<void> done) : done_(std::move(done)) {}
  /// Blocks until done (DistributedError when it failed), or until `timeout`: false then.
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  bool is_completed() const;

 private:
  std::future<void> done_;
};

Work isend(const TensorDict& td, c10d::ProcessGroup& pg, int dst, const Options& options = {});
Work irecv(TensorDict& td, c10d::ProcessGroup& pg, int src, const Options& options = {});

/// Sends the structure (keys, batch sizes, shapes, dtypes, nesting, non-tensor values), then
/// the data: the receiver needs nothing preallocated.
void init_remote(const TensorDict& td, c10d::ProcessGroup& pg, int dst, const Options& options = {});
/// The tensordict init_remote sent (consolidated: its leaves view one storage).
TensorDict from_remote_init(c10d::ProcessGroup& pg, int src, const Options& options = {});

/// Every rank's leaves reduced into every rank's `td`, in place. One flat buffer per dtype.
void all_reduce_(TensorDict& td, c10d::ProcessGroup& pg, ReduceOp op = ReduceOp::Sum, const Options& options = {});
/// `root`'s leaves (and non-tensor values) copied into every rank's `td`, in place.
void broadcast_(TensorDict& td, c10d::ProcessGroup& pg, int root, const Options& options = {});
/// Every rank's leaves reduced into `dst`'s `td`, in place (other ranks' tensordicts are left
/// as the process group leaves its inputs).
void reduce_(TensorDict& td, c10d::ProcessGroup& pg, int dst, ReduceOp op = ReduceOp::Sum, const Options& options = {});
/// Every rank's `td` stacked along a new first batch dim, in rank order (non-tensor values are
/// this rank's).
TensorDict all_gather(const TensorDict& td, c10d::ProcessGroup& pg, const Options& options = {});
/// Python's gather_and_stack: every rank but `dst` sends its `td`; on `dst`, `td` (batch
/// [world - 1, ...]) receives them in rank order, row i from the i-th other rank, in place.
void gather_and_stack(TensorDict& td, c10d::ProcessGroup& pg, int dst, const Options& options = {});

// ---- Typed classes (TensorClass, TypedTensorDict): the same calls, the class back ------------
template <class T>
using if_typed = decltype(std::declval<T&>().typed_storage(), void());

template <class T, class = if_typed<T>>
void send(const T& typed, c10d::ProcessGroup& pg, int dst, const Options& options = {}) {
  send(typed.typed_storage(), pg, dst, options);
}
template <class T, class = if_typed<T>>
void recv(T& typed, c10d::ProcessGroup& pg, int src, const Options& options = {}) {
  recv(typed.typed_storage(), pg, src, options);
}
template <class T, class = if_typed<T>>
void init_remote(const T& typed, c10d::ProcessGroup& pg, int dst, const Options& options = {}) {
  init_remote(typed.typed_storage(), pg, dst, options);
}
/// from_remote_init, checked and wrapped as `T`.
template <class T>
T from_remote_init_as(c10d::ProcessGroup& pg, int src, const Options& options = {}) {
  return T::from_tensordict(from_remote_init(pg, src, options));
}
template <class T, class = if_typed<T>>
void all_reduce_(T& typed, c10d::ProcessGroup& pg, ReduceOp op = ReduceOp::Sum, const Options& options = {}) {
  all_reduce_(typed.typed_storage(), pg, op, options);
}
template <class T, class = if_typed<T>>
void broadcast_(T& typed, c10d::ProcessGroup& pg, int root, const Options& options = {}) {
  broadcast_(typed.typed_storage(), pg, root, options);
}
template <class T, class = if_typed<T>>
void reduce_(T& typed, c10d::ProcessGroup& pg, int dst, ReduceOp op = ReduceOp::Sum, const Options& options = {}) {
  reduce_(typed.typed_storage(), pg, dst, op, options);
}
/// all_gather, wrapped as `T` (its batch gains the rank dim in front).
template <class T, class = if_typed<T>>
T all_gather(const T& typed, c10d::ProcessGroup& pg, const Options& options = {}) {
  return T::from_tensordict(all_gather(typed.typed_storage(), pg, options));
}

}  // namespace distributed
}  // namespace tensordict
