// send / recv / isend / irecv / init_remote / from_remote_init.
//
// A transfer, on one tag between two ranks (messages between a pair on one tag arrive in order):
//   sender -> receiver  header: magic, version, structure hash, storage layout hash, tensor
//                       bytes, structure text length, non-tensor text length
//   receiver -> sender  answer: agreed or not, and whether to send the consolidated storage
//   then, agreed        the data: the storage as one message, or the planned messages
//                       (wire::plan), then the non-tensor values as JSON text
//   or, not agreed      the sender's structure text; the receiver answers with what differs
//                       (length, then text) and both raise it.

#include <tensordict/distributed.h>

#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/non_tensor.h>

#include "backends/consolidated/rebuild.h"
#include "distributed/channel.h"
#include "distributed/wire_layout.h"

namespace tensordict {
namespace distributed {

namespace {

constexpr int64_t kMagic = 0x54444352;  // "TDCR"
constexpr int64_t kVersion = 1;
constexpr int64_t kTransfer = 1, kInit = 2;
enum Header : int64_t { kMagicAt, kVersionAt, kKindAt, kHashAt, kStorageHashAt, kBytesAt, kStructureAt, kNonTensorAt, kHeaderSize };
constexpr int64_t kAgreed = 1, kDiffer = 2;
// How the data go: planned messages (wire::plan); the sender's consolidated storage straight
// into the receiver's (same layout); or that storage as one message, after the leaves' offsets
// in it, unpacked by a receiver that is not consolidated the same way.
constexpr int64_t kSendLeaves = 0, kSendStorage = 1, kSendStorageAndOffsets = 2;

at::Tensor ints(std::initializer_list<int64_t> values) {
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, at::kLong);
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t v : values) *p++ = v;
  return t;
}

at::Tensor header_of(int64_t kind, const wire::Layout& layout, int64_t structure_bytes, int64_t non_tensor_bytes) {
  at::Tensor h = at::zeros({kHeaderSize}, at::kLong);
  int64_t* p = h.data_ptr<int64_t>();
  p[kMagicAt] = kMagic;
  p[kVersionAt] = kVersion;
  p[kKindAt] = kind;
  p[kHashAt] = static_cast<int64_t>(layout.structure_hash);
  p[kStorageHashAt] = static_cast<int64_t>(layout.storage_layout_hash);
  p[kBytesAt] = layout.tensor_bytes;
  p[kStructureAt] = structure_bytes;
  p[kNonTensorAt] = non_tensor_bytes;
  return h;
}

const int64_t* checked_header(const at::Tensor& h, int64_t kind, const Channel& ch) {
  const int64_t* p = h.data_ptr<int64_t>();
  TD_CHECK(p[kMagicAt] == kMagic && p[kVersionAt] == kVersion, DistributedError, ch.transfer(),
           ": rank ", ch.peer(), " did not start a tensordict transfer (wrong magic or version: another message on tag?)");
  TD_CHECK(p[kKindAt] == kind, DistributedError, ch.transfer(), ": rank ", ch.peer(), " sent ",
           p[kKindAt] == kInit ? "init_remote" : "send", " but this rank called ",
           kind == kInit ? "from_remote_init" : "recv");
  return p;
}

// Where each leaf starts in the storage, then the storage's size.
at::Tensor storage_offsets(const wire::Layout& layout) {
  at::Tensor out = at::empty({static_cast<int64_t>(layout.leaves.size()) + 1}, at::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  const auto* base = static_cast<const char*>(layout.storage.data_ptr());
  for (const wire::Leaf& leaf : layout.leaves)
    *p++ = leaf.nbytes() ? static_cast<const char*>(leaf.tensor.data_ptr()) - base : 0;
  *p = layout.storage.numel();
  return out;
}

void send_data(Channel& ch, const wire::Layout& layout, int64_t mode) {
  if (mode == kSendStorageAndOffsets) ch.send(storage_offsets(layout), "storage offsets");
  if (mode == kSendStorage || mode == kSendStorageAndOffsets) {
    if (layout.storage.numel() > 0) ch.send(layout.storage, "consolidated storage");
    return;
  }
  for (const wire::Message& m : wire::plan(layout)) ch.send(wire::outgoing(layout, m), m.packed ? "packed leaves" : "leaf");
}

void recv_data(Channel& ch, const wire::Layout& layout, int64_t mode) {
  if (mode == kSendStorage) {
    if (layout.storage.numel() > 0) ch.recv(layout.storage, "consolidated storage");
    return;
  }
  if (mode == kSendStorageAndOffsets) {
    const at::Tensor offsets = ch.recv_ints(static_cast<int64_t>(layout.leaves.size()) + 1, "storage offsets");
    const int64_t* p = offsets.data_ptr<int64_t>();
    const int64_t size = p[layout.leaves.size()];
    TD_CHECK(size >= 0, DistributedError, ch.transfer(), ": malformed storage offsets");
    at::Tensor storage = at::empty({size}, at::kByte);
    if (size > 0) ch.recv(storage, "consolidated storage");
    for (size_t i = 0; i < layout.leaves.size(); ++i) {
      const int64_t n = layout.leaves[i].nbytes();
      if (n == 0) continue;
      TD_CHECK(p[i] >= 0 && p[i] + n <= size, DistributedError, ch.transfer(), ": leaf '",
               layout.leaves[i].path.join("."), "' lies outside the sender's storage");
      wire::deliver_leaf(layout.leaves[i], storage.narrow(0, p[i], n));
    }
    return;
  }
  for (const wire::Message& m : wire::plan(layout)) {
    at::Tensor buffer = wire::incoming(layout, m);
    ch.recv(buffer, m.packed ? "packed leaves" : "leaf");
    wire::deliver(layout, m, buffer);
  }
}

Channel channel(c10d::ProcessGroup& pg, int peer, const Options& options, const char* verb, const char* preposition) {
  return Channel(pg, peer, options.tag, options.timeout,
                 rank_context(pg) + ": " + verb + " " + preposition + " rank " + std::to_string(peer));
}

}  // namespace

void send(const TensorDict& td, c10d::ProcessGroup& pg, int dst, const Options& options) {
  Channel ch = channel(pg, dst, options, "send", "to");
  const wire::Layout layout = wire::describe(td);
  const std::string non_tensor = layout.non_tensors.empty() ? std::string() : wire::non_tensor_values(layout);
  ch.send(header_of(kTransfer, layout, static_cast<int64_t>(layout.structure.size()),
                    static_cast<int64_t>(non_tensor.size())),
          "header");
  const at::Tensor answer = ch.recv_ints(2, "receiver's answer");
  const int64_t* a = answer.data_ptr<int64_t>();
  if (a[0] != kAgreed) {
    ch.send_text(layout.structure, "structure");
    const int64_t n = ch.recv_ints(1, "difference")[0].item<int64_t>();
    TD_THROW(DistributedError, ch.transfer(), ": the structures differ: ", ch.recv_text(n, "difference"));
  }
  send_data(ch, layout, a[1]);
  if (!non_tensor.empty()) ch.send_text(non_tensor, "non-tensor values");
}

void recv(TensorDict& td, c10d::ProcessGroup& pg, int src, const Options& options) {
  Channel ch = channel(pg, src, options, "recv", "from");
  const wire::Layout layout = wire::describe(td);
  const at::Tensor header = ch.recv_ints(kHeaderSize, "header");
  const int64_t* h = checked_header(header, kTransfer, ch);
  if (static_cast<uint64_t>(h[kHashAt]) != layout.structure_hash) {
    ch.send(ints({kDiffer, 0}), "answer");
    const std::string theirs = ch.recv_text(h[kStructureAt], "sender's structure");
    const std::string for_them = wire::first_difference(theirs, layout.structure, ch.rank());
    ch.send(ints({static_cast<int64_t>(for_them.size())}), "difference");
    ch.send_text(for_them, "difference");
    TD_THROW(DistributedError, ch.transfer(), ": the structures differ: ",
             wire::first_difference(layout.structure, theirs, src));
  }
  const bool sender_consolidated = h[kStorageHashAt] != 0;
  const bool same_storage = layout.storage.defined() && static_cast<uint64_t>(h[kStorageHashAt]) == layout.storage_layout_hash;
  const int64_t mode = same_storage ? kSendStorage : sender_consolidated ? kSendStorageAndOffsets : kSendLeaves;
  ch.send(ints({kAgreed, mode}), "answer");
  recv_data(ch, layout, mode);
  if (h[kNonTensorAt] > 0) {
    wire::set_non_tensor_values(layout, ch.recv_text(h[kNonTensorAt], "non-tensor values"),
                                ch.transfer() + " (non-tensor values)");
  }
}

bool Work::wait(std::chrono::milliseconds timeout) {
  if (!done_.valid()) return true;
  if (timeout != std::chrono::milliseconds::max() && done_.wait_for(timeout) != std::future_status::ready) return false;
  std::future<void> done = std::move(done_);
  done.get();  // rethrows the transfer's error
  return true;
}

bool Work::is_completed() const {
  return !done_.valid() || done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

Work isend(const TensorDict& td, c10d::ProcessGroup& pg, int dst, const Options& options) {
  return Work(std::async(std::launch::async, [td, &pg, dst, options] { send(td, pg, dst, options); }));
}

Work irecv(TensorDict& td, c10d::ProcessGroup& pg, int src, const Options& options) {
  return Work(std::async(std::launch::async, [td, &pg, src, options]() mutable { recv(td, pg, src, options); }));
}

namespace {

// Per-row non-tensor values (stacks): consolidated metadata cannot carry them (Python cannot read
// them back), so init_remote sends them apart, as JSON {path: nested list}.
std::vector<NestedKey> non_tensor_stacks(const TensorDict& td) {
  std::vector<NestedKey> out;
  for (const auto& [key, entry] : td.items(/*include_nested=*/true)) {
    if (entry.is_non_tensor() && entry.non_tensor().is_stack()) out.push_back(key);
  }
  return out;
}

constexpr std::string_view kPathSep = "\x1f";

}  // namespace

void init_remote(const TensorDict& td, c10d::ProcessGroup& pg, int dst, const Options& options) {
  Channel ch = channel(pg, dst, options, "init_remote", "to");
  // The consolidated form carries the rest (keys, nesting, batch sizes, shapes, dtypes, uniform
  // non-tensor values, lazy stacks) in its metadata, and the data as one storage.
  const std::vector<NestedKey> stacks = non_tensor_stacks(td);
  const TensorDict body = stacks.empty() ? td : td.exclude(stacks);
  const TensorDict packed = is_consolidated(body) ? body : consolidate(body, ConsolidateOptions{at::Device(at::kCPU), {}});
  const at::Tensor storage = consolidated_storage(packed).to(at::kCPU).contiguous();
  const std::string metadata = consolidated_metadata(packed).dump();
  std::string stack_values;
  if (!stacks.empty()) {
    json::Object values;
    for (const NestedKey& key : stacks) values.emplace_back(key.join(kPathSep), td.get_non_tensor(key).tolist());
    stack_values = json::Value(std::move(values)).dump();
  }
  wire::Layout sizes;
  sizes.tensor_bytes = storage.numel();
  ch.send(header_of(kInit, sizes, static_cast<int64_t>(metadata.size()), static_cast<int64_t>(stack_values.size())),
          "header");
  ch.send_text(metadata, "structure");
  if (storage.numel() > 0) ch.send(storage, "consolidated storage");
  if (!stack_values.empty()) ch.send_text(stack_values, "per-row non-tensor values");
}

TensorDict from_remote_init(c10d::ProcessGroup& pg, int src, const Options& options) {
  Channel ch = channel(pg, src, options, "from_remote_init", "from");
  const at::Tensor header = ch.recv_ints(kHeaderSize, "header");
  const int64_t* h = checked_header(header, kInit, ch);
  TD_CHECK(h[kStructureAt] > 0 && h[kBytesAt] >= 0 && h[kNonTensorAt] >= 0, DistributedError, ch.transfer(),
           ": malformed header");
  const std::string source = ch.transfer();
  const json::Value metadata = json::parse(ch.recv_text(h[kStructureAt], "structure"), source);
  at::Tensor storage = at::empty({h[kBytesAt]}, at::kByte);
  if (storage.numel() > 0) ch.recv(storage, "consolidated storage");
  TensorDict out = detail::rebuild_consolidated(storage, metadata, source);
  if (h[kNonTensorAt] > 0) {
    const json::Value stacks = json::parse(ch.recv_text(h[kNonTensorAt], "per-row non-tensor values"), source);
    TD_CHECK(stacks.is_object(), DistributedError, source, ": malformed per-row non-tensor values");
    out.unlock_();
    for (const auto& [path, value] : stacks.as_object()) {
      const NestedKey key = NestedKey::split(path, kPathSep);
      const NestedKey parent(std::vector<std::string>(key.parts().begin(), key.parts().end() - 1));
      const c10::IntArrayRef batch = parent.size() ? out.get_tensordict(parent).batch_size() : out.batch_size();
      out.set(key, NonTensorData::from_list(value, batch));
    }
    out.lock_();
  }
  return out;
}

}  // namespace distributed
}  // namespace tensordict
