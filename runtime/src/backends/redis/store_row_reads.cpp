// Reads of rows of a store: one GETRANGE per run of consecutive rows of dim 0 and leaf, all
// leaves in one round trip.
#include "backends/redis/store_level.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <sstream>

#include <ATen/ATen.h>

#include <tensordict/batch_index.h>
#include <tensordict/dtype.h>
#include <tensordict/function_ref.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/json.h>
#include <tensordict/non_tensor.h>
#include <tensordict/tensor_dict.h>

#include "backends/redis/store_records.h"
#include "core/non_tensor_write.h"


namespace tensordict {
namespace redis {

namespace {

// Rows start..stop of dim 0, one byte range of every leaf: what an integer or a step-1 slice
// selects.
struct RowRun {
  int64_t start, stop;
};

std::optional<RowRun> row_run(const BatchIndex& index) {
  const auto& items = index.items();
  if (items.size() != 1 || index.source_dims() != 1) return std::nullopt;
  const BatchIndex::Item& item = items[0];
  if (item.kind == BatchIndex::Item::Kind::Integer) return RowRun{item.integer, item.integer + 1};
  if (item.kind == BatchIndex::Item::Kind::Slice && item.step == 1)
    return RowRun{item.start, std::max(item.start, item.stop)};
  return std::nullopt;
}

// The rows of dim 0 a 1-d index tensor or mask on dim 0 selects, in order, checked against
// `size`; nullopt for any other index.
std::optional<std::vector<int64_t>> selected_rows(const BatchIndex& index, int64_t size) {
  std::vector<int64_t> rows;
  const auto& items = index.items();
  if (items.size() != 1 || index.source_dims() != 1) return std::nullopt;
  const BatchIndex::Item& item = items[0];
  switch (item.kind) {
    case BatchIndex::Item::Kind::Tensor: {
      if (item.tensor.dim() != 1) return std::nullopt;
      at::Tensor picks = item.tensor.scalar_type() == at::kBool ? item.tensor.nonzero().view(-1) : item.tensor;
      picks = picks.to(at::kCPU, at::kLong).contiguous();
      const int64_t* p = picks.data_ptr<int64_t>();
      for (int64_t i = 0; i < picks.numel(); ++i) {
        const int64_t r = p[i] < 0 ? p[i] + size : p[i];
        TD_CHECK(r >= 0 && r < size, IndexError, "index ", p[i], " is out of bounds for dimension 0 with size ", size);
        rows.push_back(r);
      }
      break;
    }
    default: return std::nullopt;
  }
  return rows;
}

}  // namespace

std::optional<RowSelection> row_selection(const BatchIndex& index, int64_t size) {
  if (const std::optional<RowRun> run = row_run(index)) {  // one span, without listing its rows
    const bool integer = index.items()[0].kind == BatchIndex::Item::Kind::Integer;
    const int64_t count = run->stop - run->start;
    return RowSelection{count == 0 ? std::vector<RowSpan>{} : std::vector<RowSpan>{{run->start, 0, count}}, count, integer};
  }
  const std::optional<std::vector<int64_t>> picked = selected_rows(index, size);
  if (!picked) return std::nullopt;
  const std::vector<int64_t>& rows = *picked;
  RowSelection out;
  out.count = static_cast<int64_t>(rows.size());
  out.integer = index.items()[0].kind == BatchIndex::Item::Kind::Integer;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    out.spans.push_back({rows[i], static_cast<int64_t>(i), static_cast<int64_t>(j - i)});
    i = j;
  }
  return out;
}

TensorDict StoreLevel::index(const BatchIndex& index) const {
  const auto guard = state_->lock();
  // Rows of dim 0 (an integer, a step-1 slice, an index tensor or a mask) are byte ranges of
  // every tensor leaf, all in one round trip. Other indices read the leaves whole (the default).
  if (batch_size_.empty()) return TensorDictBase::index(index);
  std::optional<RowSelection> selection = row_selection(index, batch_size_[0]);
  // No rows: nothing to move (and GETRANGE has no empty range).
  if (!selection || selection->count == 0) return TensorDictBase::index(index);
  // The rows as the cached structure places them, read in one transaction with the structure as
  // it is now, and used only if that is still the same: one round trip, one more per change.
  bool failed = false;
  for (int attempt = 0; attempt < 4 && !failed; ++attempt) {
    if (!state_->cached) state_->layout(true);
    RowRead read = plan_row_ranges(*selection, *state_->cached);
    std::vector<Command> commands;
    commands.reserve(read.commands.size() + 3);
    commands.push_back({"MULTI"});
    commands.push_back(layout_command(state_->keys));
    for (Command& c : read.commands) commands.push_back(std::move(c));
    commands.push_back({"EXEC"});
    const Replies replies = state_->client.pipeline(commands);
    for (size_t i = 0; i < commands.size(); ++i) state_->client.check(replies[i], commands[i]);
    const ReplyRef exec = replies[commands.size() - 1];
    TD_CHECK(exec.is_array() && exec.size() == commands.size() - 2, StorageError, state_->client.options().endpoint(),
             ": ", state_->keys.base(), ": the read transaction was aborted");
    for (size_t i = 0; i < read.commands.size(); ++i) read.commands[i] = std::move(commands[i + 2]);
    // A command that failed when run (in a cluster, a script meeting a key its slot's migration
    // has moved) is left to the path below, whose commands the client retries one by one.
    for (size_t i = 0; i < exec.size(); ++i) failed = failed || exec[i].is_error();
    if (failed) break;
    Layout now = parse_layout(exec[0], state_->keys, state_->client.options().endpoint());
    const bool same = same_structure(now, *state_->cached);
    state_->cached = std::move(now);
    if (same) {
      std::vector<ReplyRef> rows;
      rows.reserve(read.commands.size());
      for (size_t i = 1; i < exec.size(); ++i) rows.push_back(exec[i]);
      return finish_row_read(index, *state_->cached, read, rows);
    }
  }
  TD_CHECK(failed, StorageError, state_->client.options().endpoint(), ": ", state_->keys.base(),
           ": the store's structure kept changing while its rows were read (4 attempts)");
  // The structure, the rows, and the structure again: the rows are used only if it stayed the same.
  for (int attempt = 0; attempt < 4; ++attempt) {
    const Layout layout = state_->layout(true);
    const RowRead read = plan_row_ranges(*selection, layout);
    const Replies replies = state_->client.pipeline(read.commands);
    if (!same_structure(state_->layout(true), layout)) continue;
    std::vector<ReplyRef> rows;
    rows.reserve(replies.size());
    for (size_t i = 0; i < replies.size(); ++i) rows.push_back(replies[i]);
    return finish_row_read(index, layout, read, rows);
  }
  TD_THROW(StorageError, state_->client.options().endpoint(), ": ", state_->keys.base(),
           ": the store's structure kept changing while its rows were read (4 attempts)");
}

std::optional<RowRead> StoreLevel::plan_row_read(const BatchIndex& index, const Layout& layout) const {
  if (batch_size_.empty()) return std::nullopt;
  std::optional<RowSelection> selection = row_selection(index, batch_size_[0]);
  if (!selection || selection->count == 0) return std::nullopt;
  return plan_row_ranges(std::move(*selection), layout);
}

RowRead StoreLevel::plan_row_ranges(RowSelection selection, const Layout& layout) const {
  // One GETRANGE per run of rows and leaf, all pipelined. Python sends a Lua GETRANGES script
  // per leaf instead; Redis 7 spends about 4 us in Lua per range (redis.call's setup) against
  // 0.5 us for a GETRANGE command, so 256 random rows of 3 leaves took 3.9 ms that way.
  // The per-row layout: the selected rows of every leaf held in records are one MGET.
  RowRead out;
  out.selection = std::move(selection);
  if (records_under(layout, path_)) {
    out.record_rows = selected_record_rows(out.selection);
    add_record_reads(out.commands, state_->keys, out.record_rows);
    out.record_commands = out.commands.size();
  }
  for (const auto& [path, meta] : layout.leaves) {
    if (!is_under_level(path, path_) || Layout::in_records(meta)) continue;
    out.paths.push_back(path);
    out.first_reply.push_back(out.commands.size());
    if (meta.is_non_tensor || meta.shape.empty()) {
      out.commands.push_back({"GET", state_->keys.data(path)});
      continue;
    }
    const int64_t row = leaf_bytes(c10::IntArrayRef(meta.shape).slice(1), meta.dtype, state_->keys.data(path));
    for (const RowSpan& span : out.selection.spans) {
      const int64_t first = span.row * row;
      out.commands.push_back({"GETRANGE", state_->keys.data(path), std::to_string(first),
                              std::to_string(first + span.count * row - 1)});
    }
  }
  out.first_reply.push_back(out.commands.size());
  return out;
}

TensorDict StoreLevel::finish_row_read(const BatchIndex& index, const Layout& layout, const RowRead& read,
                                       const std::vector<ReplyRef>& replies) const {
  TD_CHECK(replies.size() == read.commands.size(), StorageError, state_->client.options().endpoint(), ": ",
           state_->keys.base(), ": ", replies.size(), " replies to ", read.commands.size(), " row reads");
  for (size_t i = 0; i < read.commands.size(); ++i) state_->client.check(replies[i], read.commands[i]);
  const std::map<std::string, size_t> reply_of = reply_index(read.paths);
  const int64_t rows = read.selection.count;
  std::vector<std::string_view> records;
  if (read.record_commands > 0) {
    std::vector<ReplyRef> mgets;
    for (size_t i = 0; i < read.record_commands; ++i) mgets.push_back(replies[i]);
    records = record_views(mgets, read.record_rows, *layout.records, state_->keys);
  }
  return build(
      layout, path_, batch_size_,
      [&](const std::string& p, c10::IntArrayRef batch) {
        const LeafMetadata& meta = layout.leaves.at(p);
        const std::string key = state_->keys.data(p);
        if (Layout::in_records(meta)) {
          Entry out = record_leaf(meta, records, key, device_);
          return read.selection.integer ? Entry(out.tensor().squeeze(0)) : out;
        }
        const size_t which = reply_of.at(p);
        const size_t first = read.first_reply[which], last = read.first_reply[which + 1];
        const ReplyRef data = replies[first];
        TD_CHECK(!data.is_nil(), StorageError, key, ": listed in __keys__ but holds no value");
        if (meta.is_non_tensor || read.commands[first][0] == "GET") {  // read whole, indexed here
          Entry whole = decode_leaf(meta, data.str(), key, batch, device_);
          if (whole.is_tensor()) return Entry(index.apply(whole.tensor()));
          const NonTensorData& value = whole.non_tensor();
          return Entry(value.is_stack() ? value.with_ids(index.apply(value.ids())) : value);
        }
        LeafMetadata part = meta;
        part.shape[0] = rows;
        std::vector<std::string_view> runs;  // each run's bytes, copied once into the tensor
        for (size_t r = first; r < last; ++r) runs.push_back(replies[r].str());
        Entry out = decode_tensor(part, runs, key, device_);
        return read.selection.integer ? Entry(out.tensor().squeeze(0)) : out;
      },
      [&](c10::IntArrayRef batch) {
        BatchSize out(index.result_batch_size().begin(), index.result_batch_size().end());
        out.append(batch.begin() + index.source_batch_dims(), batch.end());
        return out;
      });
}

}  // namespace redis
}  // namespace tensordict
