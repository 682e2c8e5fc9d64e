#pragma once
// One peer of a point-to-point transfer over a c10d process group, and the wait every c10d
// call goes through: bounded by the timeout, and any failure (the peer gone, a timeout, an
// error of the process group) turned into a DistributedError saying what was being done.

#include <chrono>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

namespace c10d {
class ProcessGroup;
class Work;
}  // namespace c10d

namespace tensordict {
namespace distributed {

/// Waits for `work` at most `timeout`. On failure the work (and the tensors it holds) is kept
/// alive for the rest of the process: the process group may still write into them later.
void wait_for(const c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds timeout, const std::string& what);

/// "rank 0 -> rank 1" style context for messages.
std::string rank_context(c10d::ProcessGroup& pg);

class Channel {
 public:
  Channel(c10d::ProcessGroup& pg, int peer, int tag, std::chrono::milliseconds timeout, std::string transfer);

  void send(const at::Tensor& contiguous_cpu, const char* what);
  void recv(const at::Tensor& contiguous_cpu, const char* what);
  /// A message of `n` int64 values.
  at::Tensor recv_ints(int64_t n, const char* what);
  void send_text(const std::string& text, const char* what);
  std::string recv_text(int64_t n, const char* what);

  int peer() const { return peer_; }
  int rank() const;
  const std::string& transfer() const { return transfer_; }

 private:
  void move(const at::Tensor& t, bool sending, const char* what);

  c10d::ProcessGroup& pg_;
  int peer_;
  int tag_;
  std::chrono::milliseconds timeout_;
  std::string transfer_;  // "send to rank 1", for messages
};

}  // namespace distributed
}  // namespace tensordict
