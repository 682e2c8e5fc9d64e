#include "distributed/channel.h"

#include <cstring>
#include <mutex>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <tensordict/distributed.h>

namespace tensordict {
namespace distributed {

namespace {
// Works that failed or timed out: c10d may still complete them into their tensors.
void keep_alive(const c10::intrusive_ptr<c10d::Work>& work) {
  static std::mutex mutex;
  static auto* kept = new std::vector<c10::intrusive_ptr<c10d::Work>>();
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(work);
}
}  // namespace

void wait_for(const c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds timeout, const std::string& what) {
  bool done = false;
  try {
    done = work->wait(timeout);
  } catch (const std::exception& e) {
    keep_alive(work);
    TD_THROW(DistributedError, what, ": ", e.what());
  }
  if (!done) {
    keep_alive(work);
    TD_THROW(DistributedError, what, ": timed out after ", timeout.count(), " ms");
  }
}

std::string rank_context(c10d::ProcessGroup& pg) { return "rank " + std::to_string(pg.getRank()); }

Channel::Channel(c10d::ProcessGroup& pg, int peer, int tag, std::chrono::milliseconds timeout, std::string transfer)
    : pg_(pg), peer_(peer), tag_(tag), timeout_(timeout), transfer_(std::move(transfer)) {
  TD_CHECK(peer >= 0 && peer < pg.getSize() && peer != pg.getRank(), ValueError, transfer_, ": rank ", peer,
           " is not another rank of this group of ", pg.getSize(), " (this is rank ", pg.getRank(), ")");
}

int Channel::rank() const { return pg_.getRank(); }

void Channel::send(const at::Tensor& t, const char* what) { move(t, /*sending=*/true, what); }

void Channel::recv(const at::Tensor& t, const char* what) { move(t, /*sending=*/false, what); }

void Channel::move(const at::Tensor& t, bool sending, const char* what) {
  std::vector<at::Tensor> tensors{t};
  const std::string step = transfer_ + (sending ? ": sending the " : ": waiting for the ") + what;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = sending ? pg_.send(tensors, peer_, tag_) : pg_.recv(tensors, peer_, tag_);
  } catch (const std::exception& e) {
    TD_THROW(DistributedError, step, ": ", e.what());
  }
  wait_for(work, timeout_, step);
}

at::Tensor Channel::recv_ints(int64_t n, const char* what) {
  at::Tensor out = at::empty({n}, at::kLong);
  recv(out, what);
  return out;
}

void Channel::send_text(const std::string& text, const char* what) {
  at::Tensor bytes = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::memcpy(bytes.data_ptr(), text.data(), text.size());
  send(bytes, what);
}

std::string Channel::recv_text(int64_t n, const char* what) {
  at::Tensor bytes = at::empty({n}, at::kByte);
  recv(bytes, what);
  return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(n));
}

}  // namespace distributed
}  // namespace tensordict
