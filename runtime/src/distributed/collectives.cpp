// all_reduce_ / broadcast_ / reduce_ / all_gather over the leaves. Every call first checks, with
// one small all-reduce, that the ranks' structures agree (a mismatch would otherwise pair
// buffers of different leaves, or hang). Reductions use one flat buffer per dtype; broadcast
// and all_gather move bytes, in wire::plan's messages (small leaves packed, large ones as they
// are).

#include <tensordict/distributed.h>

#include <algorithm>
#include <cstring>
#include <map>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <tensordict/dtype.h>

#include "distributed/channel.h"
#include "distributed/wire_layout.h"

namespace tensordict {
namespace distributed {

namespace {

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return c10d::ReduceOp::SUM;
    case ReduceOp::Product: return c10d::ReduceOp::PRODUCT;
    case ReduceOp::Min: return c10d::ReduceOp::MIN;
    case ReduceOp::Max: return c10d::ReduceOp::MAX;
  }
  return c10d::ReduceOp::SUM;
}

// Every rank raises when the structures differ: an all-reduce MAX of (h, -h) gives (max h,
// -min h), equal to (h, -h) on every rank only when all hashes are equal.
void check_same_structure(const wire::Layout& layout, c10d::ProcessGroup& pg, const Options& options,
                          const std::string& what) {
  const auto h = static_cast<int64_t>(layout.structure_hash >> 1);  // 63 bits: -h cannot overflow
  at::Tensor t = at::empty({2}, at::kLong);
  t[0] = h;
  t[1] = -h;
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MAX;
  wait_for(pg.allreduce(tensors, opts), options.timeout, what + ": comparing the ranks' structures");
  if (t[0].item<int64_t>() == h && t[1].item<int64_t>() == -h) return;
  // Every rank saw the mismatch: they all gather the structure texts, to name the first
  // differing key against the first rank that differs from this one.
  std::vector<at::Tensor> length{at::full({1}, static_cast<int64_t>(layout.structure.size()), at::kLong)};
  std::vector<std::vector<at::Tensor>> lengths(1);
  for (int r = 0; r < pg.getSize(); ++r) lengths.front().push_back(at::empty({1}, at::kLong));
  wait_for(pg.allgather(lengths, length), options.timeout, what + ": gathering the ranks' structures");
  int64_t longest = 0;
  for (const at::Tensor& n : lengths.front()) longest = std::max(longest, n.item<int64_t>());
  std::vector<at::Tensor> mine{at::zeros({longest}, at::kByte)};
  std::memcpy(mine.front().data_ptr(), layout.structure.data(), layout.structure.size());
  std::vector<std::vector<at::Tensor>> texts(1);
  for (int r = 0; r < pg.getSize(); ++r) texts.front().push_back(at::empty({longest}, at::kByte));
  wait_for(pg.allgather(texts, mine), options.timeout, what + ": gathering the ranks' structures");
  for (int r = 0; r < pg.getSize(); ++r) {
    const at::Tensor& text = texts.front()[static_cast<size_t>(r)];
    const std::string theirs(static_cast<const char*>(text.data_ptr()),
                             static_cast<size_t>(lengths.front()[static_cast<size_t>(r)].item<int64_t>()));
    if (theirs != layout.structure) {
      TD_THROW(DistributedError, what, ": the ranks' tensordicts differ in structure: ",
               wire::first_difference(layout.structure, theirs, r));
    }
  }
  TD_THROW(DistributedError, what, ": the ranks' tensordicts differ in structure");
}

// The leaves of one dtype as one flat buffer (the leaf itself when it is alone and writable in
// place), and where each leaf lies in it.
struct DtypeGroup {
  std::vector<size_t> leaves;
  at::Tensor flat;
  bool shared = false;
};

std::vector<DtypeGroup> group_by_dtype(const wire::Layout& layout) {
  std::map<at::ScalarType, DtypeGroup> groups;
  for (size_t i = 0; i < layout.leaves.size(); ++i) {
    if (layout.leaves[i].tensor.numel() > 0) groups[layout.leaves[i].tensor.scalar_type()].leaves.push_back(i);
  }
  std::vector<DtypeGroup> out;
  for (auto& [dtype, g] : groups) {
    const wire::Leaf& first = layout.leaves[g.leaves.front()];
    if (g.leaves.size() == 1 && first.writable_in_place) {
      g.flat = first.tensor.detach().view({-1});
      g.shared = true;
    } else {
      std::vector<at::Tensor> parts;
      for (size_t i : g.leaves) parts.push_back(layout.leaves[i].tensor.detach().reshape({-1}).to(at::kCPU));
      g.flat = at::cat(parts);
    }
    out.push_back(std::move(g));
  }
  return out;
}

void write_back(const wire::Layout& layout, const DtypeGroup& g) {
  if (g.shared) return;
  c10::NoGradGuard no_grad;
  int64_t offset = 0;
  for (size_t i : g.leaves) {
    const wire::Leaf& leaf = layout.leaves[i];
    const at::Tensor value = g.flat.narrow(0, offset, leaf.tensor.numel()).view(leaf.tensor.sizes());
    offset += leaf.tensor.numel();
    if (leaf.writable_in_place) {
      leaf.tensor.copy_(value);
    } else {
      TensorDict level = leaf.level;
      level.set_(leaf.key, value);
    }
  }
}

template <class Start>
void reduce_groups(TensorDict& td, c10d::ProcessGroup& pg, const Options& options, const std::string& what,
                   bool write_result, Start start) {
  const wire::Layout layout = wire::describe(td);
  check_same_structure(layout, pg, options, what);
  std::vector<DtypeGroup> groups = group_by_dtype(layout);
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (auto& g : groups) {
    std::vector<at::Tensor> tensors{g.flat};
    try {
      works.push_back(start(tensors));
    } catch (const std::exception& e) {
      TD_THROW(DistributedError, what, ": the process group refused the ", torch_dtype_name(g.flat.scalar_type()),
               " leaves: ", e.what());
    }
  }
  for (size_t i = 0; i < works.size(); ++i) {
    wait_for(works[i], options.timeout, what + " (" + torch_dtype_name(groups[i].flat.scalar_type()) + " leaves)");
  }
  if (write_result) {
    for (const auto& g : groups) write_back(layout, g);
  }
}

std::string what_of(c10d::ProcessGroup& pg, const char* op) { return rank_context(pg) + ": " + op; }

}  // namespace

void all_reduce_(TensorDict& td, c10d::ProcessGroup& pg, ReduceOp op, const Options& options) {
  c10d::AllreduceOptions opts;
  opts.reduceOp = to_c10d(op);
  reduce_groups(td, pg, options, what_of(pg, "all_reduce_"), true,
                [&](std::vector<at::Tensor>& tensors) { return pg.allreduce(tensors, opts); });
}

void reduce_(TensorDict& td, c10d::ProcessGroup& pg, int dst, ReduceOp op, const Options& options) {
  TD_CHECK(dst >= 0 && dst < pg.getSize(), ValueError, "reduce_: rank ", dst, " is not in this group of ", pg.getSize());
  c10d::ReduceOptions opts;
  opts.reduceOp = to_c10d(op);
  opts.rootRank = dst;
  reduce_groups(td, pg, options, what_of(pg, "reduce_"), pg.getRank() == dst,
                [&](std::vector<at::Tensor>& tensors) { return pg.reduce(tensors, opts); });
}

void broadcast_(TensorDict& td, c10d::ProcessGroup& pg, int root, const Options& options) {
  TD_CHECK(root >= 0 && root < pg.getSize(), ValueError, "broadcast_: rank ", root, " is not in this group of ",
           pg.getSize());
  const std::string what = what_of(pg, "broadcast_");
  const wire::Layout layout = wire::describe(td);
  check_same_structure(layout, pg, options, what);
  const bool is_root = pg.getRank() == root;
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  for (const wire::Message& m : wire::plan(layout)) {
    std::vector<at::Tensor> tensors{is_root ? wire::outgoing(layout, m) : wire::incoming(layout, m)};
    wait_for(pg.broadcast(tensors, opts), options.timeout, what);
    if (!is_root) wire::deliver(layout, m, tensors.front());
  }
  if (layout.non_tensors.empty()) return;
  std::string text = is_root ? wire::non_tensor_values(layout) : std::string();
  std::vector<at::Tensor> length{at::full({1}, static_cast<int64_t>(text.size()), at::kLong)};
  wait_for(pg.broadcast(length, opts), options.timeout, what + " (non-tensor values)");
  std::vector<at::Tensor> bytes{at::empty({length.front()[0].item<int64_t>()}, at::kByte)};
  if (is_root) std::memcpy(bytes.front().data_ptr(), text.data(), text.size());
  wait_for(pg.broadcast(bytes, opts), options.timeout, what + " (non-tensor values)");
  if (!is_root) {
    wire::set_non_tensor_values(
        layout, std::string_view(static_cast<const char*>(bytes.front().data_ptr()), static_cast<size_t>(bytes.front().numel())),
        what);
  }
}

TensorDict all_gather(const TensorDict& td, c10d::ProcessGroup& pg, const Options& options) {
  const std::string what = what_of(pg, "all_gather");
  const wire::Layout layout = wire::describe(td);
  check_same_structure(layout, pg, options, what);
  const int world = pg.getSize();
  // One in-memory copy of the structure per rank, filled with what that rank sent.
  std::vector<TensorDict> parts;
  std::vector<wire::Layout> part_layouts;
  for (int r = 0; r < world; ++r) {
    parts.push_back(td.clone());
    part_layouts.push_back(wire::describe(parts.back()));
  }
  for (const wire::Message& m : wire::plan(layout)) {
    std::vector<at::Tensor> input{wire::outgoing(layout, m)};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < world; ++r) output.front().push_back(at::empty({m.nbytes}, at::kByte));
    wait_for(pg.allgather(output, input), options.timeout, what);
    for (int r = 0; r < world; ++r) wire::deliver(part_layouts[static_cast<size_t>(r)], m, output.front()[static_cast<size_t>(r)]);
  }
  return stack(parts, 0);
}

void gather_and_stack(TensorDict& td, c10d::ProcessGroup& pg, int dst, const Options& options) {
  const int world = pg.getSize();
  TD_CHECK(dst >= 0 && dst < world, ValueError, "gather_and_stack: dst ", dst, " is not a rank of a group of ", world);
  if (pg.getRank() != dst) {
    send(td, pg, dst, options);
    return;
  }
  TD_CHECK(td.batch_dims() > 0 && td.batch_size()[0] == world - 1, ValueError,
           "gather_and_stack: on the destination the tensordict must have batch size [world - 1, ...] = [", world - 1,
           ", ...], got ", td.batch_size());
  // Point to point, so each row's structure is checked against its sender's (the destination's
  // own tensordict is the stack, not a row of it).
  for (int r = 0, row = 0; r < world; ++r) {
    if (r == dst) continue;
    TensorDict received = td.index({row}).clone();
    recv(received, pg, r, options);
    td.update_at_(received, {row});
    ++row;
  }
}

}  // namespace distributed
}  // namespace tensordict
