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

#include "core/non_tensor_write.h"

namespace tensordict {
namespace redis {

namespace {


// The whole structure in one round trip: batch size, device, nested levels, then each leaf
// path followed by its metadata hash.
const char* const kLayoutScript = R"lua(-- read-only
local base = ARGV[1]
local out = {}
out[1] = redis.call('GET', base .. '__batch_size__')
out[2] = redis.call('GET', base .. '__device__')
out[3] = redis.call('HGETALL', base .. '__nested__')
out[4] = redis.call('ZRANGE', base .. '__order__', 0, -1, 'WITHSCORES')
local members = redis.call('SMEMBERS', base .. '__keys__')
for i = 1, #members do
  out[#out + 1] = members[i]
  out[#out + 1] = redis.call('HGETALL', base .. 'm:' .. members[i])
end
return out
)lua";

std::vector<std::pair<std::string, std::string>> hash_pairs(ReplyRef reply) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i + 1 < reply.size(); i += 2) out.emplace_back(reply[i].str(), reply[i + 1].str());
  return out;
}

bool under(const std::string& path, const std::string& prefix) {
  return path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 && path[prefix.size()] == '.';
}

// The server refuses values over its proto-max-bulk-len (StoreOptions::max_value_bytes):
// refused here, before anything is sent.
std::string tensor_bytes(const at::Tensor& tensor, const std::string& key, int64_t max_bytes) {
  // Checked before anything is materialized: an expanded tensor may be small in memory.
  const int64_t nbytes = tensor.numel() * static_cast<int64_t>(tensor.element_size());
  check_value_bytes(nbytes, key, max_bytes);
  // Each ATen call costs about a microsecond: a single-row write makes none it does not need.
  at::Tensor t = tensor.is_cpu() ? tensor : tensor.to(at::kCPU);
  if (t.is_conj() || t.is_neg()) t = t.resolve_conj().resolve_neg();  // lazy views: bytes as read
  if (!t.is_contiguous()) t = t.contiguous();
  return std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(nbytes));
}

// Commands removing what the store holds at `full_path` (a leaf, or a nested level and
// everything under it). With `keep_place`, the path keeps its place in the key order: it is
// about to be written again.
void add_removal(std::vector<Command>& out, const StoreKeys& keys, const Layout& layout, const std::string& full_path,
                 bool keep_place = false) {
  const auto drop_order = [&](const std::string& path) {
    if (!(keep_place && path == full_path)) out.push_back({"ZREM", keys.order(), path});
  };
  for (const auto& [path, meta] : layout.leaves) {
    if (path != full_path && !under(path, full_path)) continue;
    out.push_back({"DEL", keys.data(path), keys.meta(path)});
    out.push_back({"SREM", keys.keys(), path});
    drop_order(path);
  }
  for (const auto& [path, batch] : layout.nested) {
    if (path != full_path && !under(path, full_path)) continue;
    out.push_back({"HDEL", keys.nested(), path});
    drop_order(path);
  }
}

std::string score_text(double score) {
  std::ostringstream text;
  text.precision(17);
  text << score;
  return text.str();
}

bool is_under_level(const std::string& path, const std::string& level) {
  return level.empty() || path.compare(0, level.size(), level) == 0;
}

// One reply per path, by path.
std::map<std::string, size_t> reply_index(const std::vector<std::string>& paths) {
  std::map<std::string, size_t> out;
  for (size_t i = 0; i < paths.size(); ++i) out.emplace(paths[i], i);
  return out;
}

}  // namespace

void check_value_bytes(int64_t nbytes, const std::string& key, int64_t max_bytes) {
  TD_CHECK(nbytes <= max_bytes, StorageError, key, ": ", nbytes, " bytes are over the server's limit for one value (",
           max_bytes, " bytes, StoreOptions::max_value_bytes); split the leaf, or raise the server's proto-max-bulk-len");
}

const Layout& StoreState::layout(bool refresh) {
  if (cached && !refresh) return *cached;
  Replies replies = client.run({"EVAL", kLayoutScript, "1", keys.keys(), keys.base()});
  const ReplyRef root = replies[0];
  TD_CHECK(root.is_array() && root.size() >= 4, StorageError, client.options().endpoint(), ": ", keys.base(),
           ": unexpected reply to the layout script");
  Layout out;
  if (!root[0].is_nil()) {
    out.exists = true;
    const std::vector<int64_t> batch = parse_shape(root[0].str(), keys.batch_size());
    out.batch.assign(batch.begin(), batch.end());
  }
  if (!root[1].is_nil() && !root[1].str().empty()) {
    const std::string text(root[1].str());
    try {
      out.device = at::Device(text);
    } catch (const c10::Error&) {
      TD_THROW(StorageError, keys.device(), ": not a device: '", text.substr(0, 64), "'");
    }
  }
  for (const auto& [path, batch] : hash_pairs(root[2])) {
    const std::vector<int64_t> dims = parse_shape(batch, keys.nested() + " (field '" + path + "')");
    out.nested.emplace(path, BatchSize(dims.begin(), dims.end()));
  }
  for (const auto& [path, score] : hash_pairs(root[3])) {
    try {
      out.order.emplace(path, std::stod(score));
    } catch (const std::exception&) {
      TD_THROW(StorageError, keys.order(), ": the score of '", path.substr(0, 64), "' is not a number");
    }
  }
  for (size_t i = 4; i + 1 < root.size(); i += 2) {
    const std::string path(root[i].str());
    out.leaves.emplace(path, parse_metadata(hash_pairs(root[i + 1]), keys.meta(path)));
  }
  cached = std::move(out);
  return *cached;
}

bool StoreState::transaction(std::vector<Command> commands, bool watched) {
  commands.insert(commands.begin(), Command{"MULTI"});
  commands.push_back({"EXEC"});
  Replies replies = client.pipeline(commands);
  for (size_t i = 0; i + 1 < commands.size(); ++i) client.check(replies[i], commands[i]);
  const ReplyRef exec = replies[replies.size() - 1];
  client.check(exec, commands.back());
  if (watched && exec.is_nil()) return false;  // a key the caller WATCHed changed: nothing applied
  TD_CHECK(exec.is_array(), StorageError, client.options().endpoint(), ": the transaction was aborted");
  // Commands queued fine but failing when run (a wrong type) come back inside EXEC's reply.
  for (size_t i = 0; i < exec.size(); ++i) client.check(exec[i], commands[i + 1]);
  return true;
}

std::string next_order_score() {
  static std::mutex mutex;
  static double last = 0;
  const double now = static_cast<double>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  std::lock_guard<std::mutex> lock(mutex);
  last = std::max(now, last + 1);
  return score_text(last);
}

void add_store_commands(std::vector<Command>& out, const StoreKeys& keys, const std::string& full_path,
                        const Entry& entry, c10::IntArrayRef batch, int64_t max_bytes) {
  // NX: a replaced entry keeps its place.
  out.push_back({"ZADD", keys.order(), "NX", next_order_score(), full_path});
  if (entry.is_tensordict()) {
    const TensorDict& td = entry.tensordict();
    out.push_back({"HSET", keys.nested(), full_path, shape_json(td.batch_size())});
    td.impl()->for_each([&](const std::string& key, const Entry& child) {
      add_store_commands(out, keys, full_path + "." + key_part(key), child, td.batch_size(), max_bytes);
    });
    return;
  }
  // HSET merges fields: the old hash goes first, so a tensor written over a non-tensor (or
  // back) keeps no stale field (a v0.14 weakness).
  out.push_back({"DEL", keys.meta(full_path)});
  if (entry.is_tensor()) {
    const at::Tensor& t = entry.tensor();
    TD_CHECK(!t.requires_grad(), RuntimeError, keys.data(full_path),
             ": cannot store a tensor that requires grad (the store keeps bytes, not the graph); detach() it first");
    out.push_back({"SET", keys.data(full_path), tensor_bytes(t, keys.data(full_path), max_bytes)});
    out.push_back({"HSET", keys.meta(full_path), "shape", shape_json(t.sizes()), "dtype", torch_dtype_name(t.scalar_type())});
  } else {
    const NonTensorData& value = entry.non_tensor();
    std::string encoding = "json";
    std::string text;
    // Per-element values: Python's json_array (one value per row) for a one-dim batch; for more
    // dims the whole nested list, flagged `elements` so it is not read as rows of lists.
    const bool stack = value.is_stack() && !value.is_uniform();
    const bool per_element = stack && batch.size() > 1;
    if (stack) encoding = "json_array";
    text = stack ? value.tolist().dump_stdlib() : value.value().dump_stdlib();
    check_value_bytes(static_cast<int64_t>(text.size()), keys.data(full_path), max_bytes);
    out.push_back({"SET", keys.data(full_path), std::move(text)});
    Command meta{"HSET", keys.meta(full_path), "is_non_tensor", "1", "encoding", encoding};
    if (per_element) meta.insert(meta.end(), {"elements", "1"});
    out.push_back(std::move(meta));
  }
  out.push_back({"SADD", keys.keys(), full_path});
}

StoreLevel::StoreLevel(std::shared_ptr<StoreState> state, std::string path, c10::IntArrayRef batch_size,
                       std::optional<at::Device> device)
    : TensorDictBase(batch_size, std::move(device), StoragePolicy{}), state_(std::move(state)), path_(std::move(path)) {}

EntryKind StoreLevel::kind_in(const Layout& layout, const std::string& full_path) const {
  if (auto it = layout.leaves.find(full_path); it != layout.leaves.end())
    return it->second.is_non_tensor ? EntryKind::NonTensor : EntryKind::Tensor;
  if (layout.nested.count(full_path)) return EntryKind::TensorDict;
  // A level Python wrote exists only as the prefix of its leaves.
  const auto first = layout.leaves.lower_bound(full_path + ".");
  return first != layout.leaves.end() && under(first->first, full_path) ? EntryKind::TensorDict : EntryKind::Undefined;
}

EntryKind StoreLevel::kind(std::string_view key) const {
  const auto guard = state_->lock();
  // Re-read: another client may have added or erased it since.
  return kind_in(state_->layout(true), full(key));
}

std::vector<std::string> keys_in(const Layout& layout, const std::string& level) {
  // Each key at the earliest score of the paths under it; keys without one (written by Python)
  // after those with one, by name.
  std::map<std::string, double> first;
  auto add = [&](const std::string& path) {
    if (path.size() <= level.size() || !is_under_level(path, level)) return;
    const std::string rest = path.substr(level.size());
    const std::string key = key_name(rest.substr(0, rest.find('.')));
    auto score = layout.order.find(path);
    const double s = score == layout.order.end() ? std::numeric_limits<double>::infinity() : score->second;
    auto [it, inserted] = first.emplace(key, s);
    if (!inserted) it->second = std::min(it->second, s);
  };
  for (const auto& [path, meta] : layout.leaves) add(path);
  for (const auto& [path, batch] : layout.nested) add(path);
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [key, s] : first) ranked.emplace_back(s, key);
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (auto& [s, key] : ranked) out.push_back(std::move(key));
  return out;
}

std::vector<std::string> StoreLevel::keys() const {
  const auto guard = state_->lock();
  return keys_in(state_->layout(true), path_);
}

void StoreLevel::for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const {
  const auto guard = state_->lock();
  const Layout& layout = state_->layout(true);
  for (const std::string& key : keys_in(layout, path_)) fn(key, kind_in(layout, full(key)));
}

c10::intrusive_ptr<StoreLevel> StoreLevel::child(const Layout& layout, const std::string& full_path) const {
  if (auto cached = children_.find(full_path); cached != children_.end()) return cached->second;
  auto it = layout.nested.find(full_path);
  c10::IntArrayRef batch = it != layout.nested.end() ? c10::IntArrayRef(it->second) : c10::IntArrayRef(batch_size_);
  auto level = c10::make_intrusive<StoreLevel>(state_, full_path + ".", batch, device_);
  children_.emplace(full_path, level);
  return level;
}

void StoreLevel::drop_children(const std::string& full_path) {
  const auto guard = state_->lock();
  for (auto it = children_.begin(); it != children_.end();) {
    it = it->first == full_path || under(it->first, full_path) ? children_.erase(it) : std::next(it);
  }
}

void StoreLevel::release_resources() {
  const auto guard = state_->lock();
  children_.clear();
  TensorDictBase::release_resources();
}

void StoreLevel::move_to_end(std::string_view key) {
  const auto guard = state_->lock();
  // Only the key order changes: the entry and everything under it get new, later scores.
  const std::string p = full(key);
  const Layout& layout = state_->layout(true);
  std::vector<std::pair<double, std::string>> paths;
  for (const auto& [path, score] : layout.order)
    if (path == p || under(path, p)) paths.emplace_back(score, path);
  std::sort(paths.begin(), paths.end());
  std::vector<Command> commands;
  for (const auto& [score, path] : paths)
    commands.push_back({"ZADD", state_->keys.order(), "XX", next_order_score(), path});
  if (commands.empty()) return;
  state_->forget_layout();
  state_->transaction(std::move(commands));
  bump_layout_version();
}

Entry StoreLevel::get(std::string_view key) const {
  const auto guard = state_->lock();
  const std::string p = full(key);
  const std::string meta_key = state_->keys.meta(p), data_key = state_->keys.data(p);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Layout& layout = state_->layout(attempt > 0);
    const EntryKind k = kind_in(layout, p);
    if (k == EntryKind::Undefined) {
      if (attempt == 0) continue;  // another client may have added it since
      return Entry();
    }
    if (k == EntryKind::TensorDict) return Entry(TensorDict(child(layout, p)));
    // The leaf's metadata and bytes together, in one transaction: writers change both in one,
    // so they always agree, whatever another client did since the layout was read.
    const std::vector<Command> commands = {{"MULTI"}, {"HGETALL", meta_key}, {"GET", data_key}, {"EXEC"}};
    Replies replies = state_->client.pipeline(commands);
    for (size_t i = 0; i < commands.size(); ++i) state_->client.check(replies[i], commands[i]);
    const ReplyRef exec = replies[3];
    TD_CHECK(exec.is_array() && exec.size() == 2, StorageError, state_->client.options().endpoint(), ": ", data_key,
             ": the read transaction was aborted");
    if (exec[1].is_nil() || exec[0].size() == 0) {
      if (attempt == 0) continue;  // erased since the layout was read
      return Entry();
    }
    return decode_leaf(parse_metadata(hash_pairs(exec[0]), meta_key), exec[1].str(), data_key, batch_size_, device_);
  }
  return Entry();
}

TensorDict StoreLevel::build(const Layout& layout, const std::string& prefix, c10::IntArrayRef stored_batch,
                             FunctionRef<Entry(const std::string&, c10::IntArrayRef)> leaf,
                             FunctionRef<BatchSize(c10::IntArrayRef)> result_batch) const {
  const BatchSize batch = result_batch(stored_batch);
  TensorDict out = TensorDict::empty_with(batch, device_);
  for (const std::string& key : keys_in(layout, prefix)) {
    const std::string p = prefix + key_part(key);
    if (kind_in(layout, p) == EntryKind::TensorDict) {
      auto it = layout.nested.find(p);
      // A level Python wrote has no batch of its own: the parent's, as Python reads it.
      const c10::IntArrayRef sub = it != layout.nested.end() ? c10::IntArrayRef(it->second) : stored_batch;
      out.impl()->insert_or_assign(key, Entry(build(layout, p + ".", sub, leaf, result_batch)));
    } else {
      out.impl()->insert_or_assign(key, leaf(p, stored_batch));
    }
  }
  return out;
}

TensorDict StoreLevel::snapshot() const {
  const auto guard = state_->lock();
  const Layout layout = state_->layout(true);
  std::vector<std::string> paths;
  std::vector<Command> commands;
  for (const auto& [path, meta] : layout.leaves) {
    if (!is_under_level(path, path_)) continue;
    paths.push_back(path);
    commands.push_back({"GET", state_->keys.data(path)});
  }
  Replies replies = state_->client.pipeline(commands);
  for (size_t i = 0; i < paths.size(); ++i) {
    state_->client.check(replies[i], commands[i]);
    TD_CHECK(!replies[i].is_nil(), StorageError, commands[i][1], ": listed in __keys__ but holds no value");
  }
  const std::map<std::string, size_t> reply_of = reply_index(paths);
  return build(
      layout, path_, batch_size_,
      [&](const std::string& p, c10::IntArrayRef batch) {
        return decode_leaf(layout.leaves.at(p), replies[reply_of.at(p)].str(), state_->keys.data(p), batch, device_);
      },
      [](c10::IntArrayRef batch) { return BatchSize(batch.begin(), batch.end()); });
}

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

// Lua GETRANGES, as Python's store uses for index tensors: ARGV holds (offset, length) pairs,
// and the reply is their bytes concatenated, in order.
const char* const kGetRangesScript = R"lua(-- read-only
local out = {}
for i = 1, #ARGV, 2 do
  local first = tonumber(ARGV[i])
  out[#out + 1] = redis.call('GETRANGE', KEYS[1], first, first + tonumber(ARGV[i + 1]) - 1)
end
return table.concat(out)
)lua";

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

// The rows of dim 0 an index selects (an integer, a step-1 slice, an index tensor or a mask),
// as runs of consecutive rows (one byte range of every leaf): each span is `count` rows from `row`, taken from the
// value's rows from `value_row`. nullopt for indices that are not rows of dim 0.
struct RowSpan {
  int64_t row, value_row, count;
};
struct RowSelection {
  std::vector<RowSpan> spans;
  int64_t count = 0;     // rows selected: the value's dim 0, unless `integer`
  bool integer = false;  // an integer index: the value has no row dim
};

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

}  // namespace

TensorDict StoreLevel::index(const BatchIndex& index) const {
  const auto guard = state_->lock();
  // Rows of dim 0 (an integer, a step-1 slice, an index tensor or a mask) are byte ranges of
  // every tensor leaf: one GETRANGE for a run of rows, else one Lua GETRANGES per leaf, all in
  // one round trip. Other indices read the leaves whole (the default).
  if (batch_size_.empty()) return TensorDictBase::index(index);
  const std::optional<RowSelection> selection = row_selection(index, batch_size_[0]);
  // No rows: nothing to move (and GETRANGE has no empty range).
  if (!selection || selection->count == 0) return TensorDictBase::index(index);
  const std::vector<RowSpan>& spans = selection->spans;
  const Layout layout = state_->layout(true);
  std::vector<std::string> paths;
  std::vector<Command> commands;
  for (const auto& [path, meta] : layout.leaves) {
    if (!is_under_level(path, path_)) continue;
    paths.push_back(path);
    if (meta.is_non_tensor || meta.shape.empty()) {
      commands.push_back({"GET", state_->keys.data(path)});
      continue;
    }
    const int64_t row = leaf_bytes(c10::IntArrayRef(meta.shape).slice(1), meta.dtype, state_->keys.data(path));
    if (spans.size() == 1) {
      const int64_t first = spans[0].row * row;
      commands.push_back({"GETRANGE", state_->keys.data(path), std::to_string(first),
                          std::to_string(first + spans[0].count * row - 1)});
      continue;
    }
    Command eval{"EVAL", kGetRangesScript, "1", state_->keys.data(path)};
    for (const RowSpan& span : spans) {
      eval.push_back(std::to_string(span.row * row));
      eval.push_back(std::to_string(span.count * row));
    }
    commands.push_back(std::move(eval));
  }
  Replies replies = state_->client.pipeline(commands);
  for (size_t i = 0; i < paths.size(); ++i) state_->client.check(replies[i], commands[i]);
  const std::map<std::string, size_t> reply_of = reply_index(paths);
  const int64_t rows = selection->count;
  return build(
      layout, path_, batch_size_,
      [&](const std::string& p, c10::IntArrayRef batch) {
        const LeafMetadata& meta = layout.leaves.at(p);
        const std::string key = state_->keys.data(p);
        const ReplyRef data = replies[reply_of.at(p)];
        TD_CHECK(!data.is_nil(), StorageError, key, ": listed in __keys__ but holds no value");
        if (meta.is_non_tensor || commands[reply_of.at(p)][0] == "GET") {  // read whole, indexed here
          Entry whole = decode_leaf(meta, data.str(), key, batch, device_);
          if (whole.is_tensor()) return Entry(index.apply(whole.tensor()));
          const NonTensorData& value = whole.non_tensor();
          return Entry(value.is_stack() ? value.with_ids(index.apply(value.ids())) : value);
        }
        LeafMetadata part = meta;
        part.shape[0] = rows;
        Entry out = decode_leaf(part, data.str(), key, batch, device_);
        return selection->integer ? Entry(out.tensor().squeeze(0)) : out;
      },
      [&](c10::IntArrayRef batch) {
        BatchSize out(index.result_batch_size().begin(), index.result_batch_size().end());
        out.append(batch.begin() + index.source_batch_dims(), batch.end());
        return out;
      });
}

void StoreLevel::for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const {
  const auto guard = state_->lock();
  const TensorDict all = snapshot();
  all.impl()->for_each([&](const std::string& key, const Entry& entry) {
    // Nested levels stay live views of the store; leaves are the fresh reads.
    if (entry.is_tensordict()) {
      fn(key, Entry(TensorDict(child(state_->layout(false), full(key)))));
    } else {
      fn(key, entry);
    }
  });
}

LeafMeta StoreLevel::leaf_meta(std::string_view key) const {
  const auto guard = state_->lock();
  const std::string p = full(key);
  const Layout& layout = state_->layout(true);
  auto it = layout.leaves.find(p);
  TD_CHECK(it != layout.leaves.end() && !it->second.is_non_tensor, KeyError, "key ", NestedKey(key).repr(),
           " is not a tensor leaf of the store");
  return LeafMeta{BatchSize(it->second.shape.begin(), it->second.shape.end()), it->second.dtype,
                  device_.value_or(at::Device(at::kCPU))};
}

void StoreLevel::insert_or_assign(std::string_view key, Entry value) {
  const auto guard = state_->lock();
  const std::string p = full(key);
  if (value.is_tensordict()) {
    // The handle stores back the level it got from get(): it is already on the server.
    const StoreLevel* level = as_store_level(*value.tensordict().impl());
    if (level != nullptr && level->state_ == state_ && level->path_ == p + ".") return;
  }
  std::vector<Command> commands;
  add_removal(commands, state_->keys, state_->layout(false), p, /*keep_place=*/true);
  add_store_commands(commands, state_->keys, p, value, batch_size_, state_->client.options().max_value_bytes);
  drop_children(p);
  state_->forget_layout();
  state_->transaction(std::move(commands));
  bump_layout_version();
}

void StoreLevel::erase(std::string_view key) {
  const auto guard = state_->lock();
  const std::string p = full(key);
  std::vector<Command> commands;
  add_removal(commands, state_->keys, state_->layout(true), p);
  if (commands.empty()) return;
  drop_children(p);
  state_->forget_layout();
  state_->transaction(std::move(commands));
  bump_layout_version();
}

void StoreLevel::rename(std::string_view from, std::string_view to) {
  const auto guard = state_->lock();
  const std::string source = full(from), target = full(to);
  const Layout layout = state_->layout(true);
  std::vector<Command> commands;
  add_removal(commands, state_->keys, layout, target);
  const StoreKeys& k = state_->keys;
  for (const auto& [path, meta] : layout.leaves) {
    if (path != source && !under(path, source)) continue;
    const std::string moved = target + path.substr(source.size());
    commands.push_back({"RENAME", k.data(path), k.data(moved)});
    commands.push_back({"RENAME", k.meta(path), k.meta(moved)});
    commands.push_back({"SREM", k.keys(), path});
    commands.push_back({"SADD", k.keys(), moved});
  }
  // The renamed entry keeps its place.
  for (const auto& [path, score] : layout.order) {
    if (path != source && !under(path, source)) continue;
    commands.push_back({"ZREM", k.order(), path});
    commands.push_back({"ZADD", k.order(), score_text(score), target + path.substr(source.size())});
  }
  drop_children(source);
  drop_children(target);
  for (const auto& [path, batch] : layout.nested) {
    if (path != source && !under(path, source)) continue;
    commands.push_back({"HDEL", k.nested(), path});
    commands.push_back({"HSET", k.nested(), target + path.substr(source.size()), shape_json(batch)});
  }
  state_->forget_layout();
  state_->transaction(std::move(commands));
  bump_layout_version();
}

void StoreLevel::write_(std::string_view key, const at::Tensor& value) {
  const auto guard = state_->lock();
  const LeafMeta meta = leaf_meta(key);
  // Cast and broadcast as at::Tensor::copy_ does, then the whole leaf in one SET.
  const at::Tensor stored = value.to(at::kCPU, meta.dtype).expand(meta.shape);
  const std::string p = full(key);
  state_->client.run({"SET", state_->keys.data(p), tensor_bytes(stored, state_->keys.data(p), state_->client.options().max_value_bytes)});
}

namespace {

// Rows of several leaves go in one round trip, written only if each leaf's metadata are still
// those the offsets were computed from (another client may have re-shaped, re-typed or erased
// a leaf since they were cached): WATCH the m: hashes, then this script compares them and, if
// one changed, touches it (a field set and removed again, or a missing hash created and
// deleted, or another type restored as it was: no net change) so that the server aborts the
// transaction; then MULTI, the
// SETRANGEs, EXEC. The bytes never pass through Lua, which copies its arguments at about
// 1 us per KiB. KEYS: the m: hashes; ARGV: shape, dtype of each.
const char* const kCheckMetadataScript = R"lua(
for j = 1, #KEYS do
  local m = redis.pcall('HMGET', KEYS[j], 'shape', 'dtype')
  if m.err or m[1] ~= ARGV[2 * j - 1] or m[2] ~= ARGV[2 * j] then
    if m.err then
      local ttl = redis.call('PTTL', KEYS[j])
      redis.call('RESTORE', KEYS[j], ttl > 0 and ttl or 0, redis.call('DUMP', KEYS[j]), 'REPLACE')
    else
      redis.call('HSET', KEYS[j], '__touch__', '1')
      redis.call('HDEL', KEYS[j], '__touch__')
    end
    return 0
  end
end
return 1
)lua";

// Rows of one leaf, ready for send_rows: (byte offset, bytes) per run of rows.
struct RowWrite {
  std::string data_key, meta_key, shape, dtype;
  std::vector<std::pair<std::string, std::string>> ranges;
};

// `value` cast to the leaf's dtype and broadcast to the selected rows (c10::Error when it does
// not fit the leaf as `meta` describes it), cut into one range per run of rows.
RowWrite plan_rows(const StoreKeys& keys, const std::string& path, const LeafMetadata& meta,
                   const RowSelection& selection, const at::Tensor& value, int64_t max_bytes) {
  std::vector<int64_t> rows(meta.shape.begin(), meta.shape.end());
  rows[0] = selection.count;
  at::Tensor v = value.is_cpu() && value.scalar_type() == meta.dtype ? value : value.to(at::kCPU, meta.dtype);
  const c10::IntArrayRef target = selection.integer ? c10::IntArrayRef(rows).slice(1) : c10::IntArrayRef(rows);
  if (v.sizes() != target) v = v.expand(target);
  RowWrite out;
  out.data_key = keys.data(path);
  out.meta_key = keys.meta(path);
  out.shape = shape_json(meta.shape);
  out.dtype = torch_dtype_name(meta.dtype);
  const int64_t row = leaf_bytes(c10::IntArrayRef(rows).slice(1), meta.dtype, out.data_key);
  std::string bytes = tensor_bytes(v, out.data_key, max_bytes);
  if (selection.spans.size() == 1) {
    out.ranges.emplace_back(std::to_string(selection.spans[0].row * row), std::move(bytes));
    return out;
  }
  for (const RowSpan& span : selection.spans)
    out.ranges.emplace_back(std::to_string(span.row * row),
                            bytes.substr(static_cast<size_t>(span.value_row * row), static_cast<size_t>(span.count * row)));
  return out;
}

// Every leaf's rows in one round trip (kCheckMetadataScript); false, with nothing written, when
// the server found a leaf's metadata changed.
bool send_rows(RedisClient& client, std::vector<RowWrite> writes) {
  const size_t n = writes.size();
  std::vector<Command> commands;
  commands.reserve(4 + n);
  commands.push_back({"WATCH"});
  commands.push_back({"EVAL", kCheckMetadataScript, std::to_string(n)});
  for (const RowWrite& w : writes) commands[0].push_back(w.meta_key);
  for (const RowWrite& w : writes) commands[1].push_back(w.meta_key);
  for (RowWrite& w : writes) {
    commands[1].push_back(std::move(w.shape));
    commands[1].push_back(std::move(w.dtype));
  }
  commands.push_back({"MULTI"});
  for (RowWrite& w : writes)
    for (auto& [offset, bytes] : w.ranges) commands.push_back({"SETRANGE", w.data_key, std::move(offset), std::move(bytes)});
  commands.push_back({"EXEC"});
  Replies replies = client.pipeline(commands);
  const bool unguarded = replies[1].is_error() && replies[1].str().rfind("NOSCRIPT", 0) == 0;
  if (unguarded) {
    // Someone flushed the server's scripts since this connection loaded the check, so the
    // transaction ran unguarded. It was right if the metadata are still those it was planned
    // with; otherwise say so rather than let it pass.
    std::vector<Command> reread;
    for (size_t j = 0; j < n; ++j) reread.push_back({"HMGET", commands[0][1 + j], "shape", "dtype"});
    const Replies now = client.pipeline(reread);
    for (size_t j = 0; j < n; ++j) {
      const ReplyRef m = now[j];
      const bool same = m.is_array() && m.size() == 2 && m[0].str() == commands[1][3 + n + 2 * j] &&
                        m[1].str() == commands[1][4 + n + 2 * j];
      TD_CHECK(same, StorageError, client.options().endpoint(), ": ", reread[j][1],
               ": the server's scripts were flushed during a row write and the leaf changed meanwhile: its rows may "
               "have been written with the old shape's offsets");
    }
  }
  // A check script that failed otherwise left the transaction unguarded too: its error is
  // reported, as is any other (a queued command the server refused aborts the transaction).
  for (size_t i = 0; i + 1 < commands.size(); ++i)
    if (i != 1 || !unguarded) client.check(replies[i], commands[i]);
  const ReplyRef exec = replies[commands.size() - 1];
  if (exec.is_nil()) return false;  // aborted: a watched hash changed
  client.check(exec, commands.back());
  for (size_t i = 0; i < exec.size(); ++i) client.check(exec[i], commands[3 + i]);
  return true;
}

}  // namespace

void StoreLevel::write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) {
  const auto guard = state_->lock();
  // Rows of dim 0 (an integer, a step-1 slice, an index tensor or a mask) are byte ranges: one
  // SETRANGE per run of consecutive rows, of the value cast to the leaf's dtype and broadcast
  // to the rows' shape (the bounds were checked when the index was parsed), guarded by the
  // metadata they were computed from (send_rows). Other indices read the leaf, change it and
  // write it back whole.
  const std::string p = full(key);
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The cached metadata first (the handle has just read the structure to find the leaf);
    // the server refuses them if they are stale, and they are read again once.
    const Layout& layout = state_->layout(attempt > 0);
    auto it = layout.leaves.find(p);
    if (it == layout.leaves.end() && attempt == 0) continue;
    TD_CHECK(it != layout.leaves.end() && !it->second.is_non_tensor, KeyError, "key ", NestedKey(key).repr(),
             " is not a tensor leaf of the store");
    const LeafMetadata meta = it->second;
    const std::optional<RowSelection> selection =
        meta.shape.empty() ? std::nullopt : row_selection(index, meta.shape[0]);
    if (!selection) {
      TensorDictBase::write_at_(key, index, value);
      return;
    }
    if (selection->count == 0) return;
    std::vector<RowWrite> writes;
    try {
      writes.push_back(plan_rows(state_->keys, p, meta, *selection, value, state_->client.options().max_value_bytes));
    } catch (const c10::Error&) {
      if (attempt == 0) continue;  // the value may fit the leaf as it is now
      throw;
    }
    if (send_rows(state_->client, std::move(writes))) return;
  }
  TD_THROW(StorageError, state_->client.options().endpoint(), ": ", state_->keys.meta(p),
           ": the leaf kept changing while it was written");
}

namespace {

// Every leaf of `values` planned as rows of the leaf the cached structure has at its path
// (`level`: the path prefix of the level `values` goes into). False when an entry is not a
// tensor the structure knows, or a value does not fit its leaf: the caller goes key by key.
bool plan_all_rows(const StoreKeys& keys, const Layout& layout, const std::string& level, const TensorDict& values,
                   const RowSelection& selection, int64_t max_bytes, std::vector<RowWrite>& out) {
  bool ok = true;
  values.impl()->for_each([&](const std::string& key, const Entry& entry) {
    if (!ok) return;
    const std::string path = level + key_part(key);
    if (entry.is_tensordict()) {
      const bool known = layout.nested.count(path) > 0 ||
                         std::any_of(layout.leaves.begin(), layout.leaves.end(),
                                     [&](const auto& leaf) { return under(leaf.first, path); });
      ok = known && plan_all_rows(keys, layout, path + ".", entry.tensordict_unchecked(), selection, max_bytes, out);
      return;
    }
    auto it = layout.leaves.find(path);
    if (!entry.is_tensor() || it == layout.leaves.end() || it->second.is_non_tensor || it->second.shape.empty()) {
      ok = false;
      return;
    }
    try {
      out.push_back(plan_rows(keys, path, it->second, selection, entry.tensor_unchecked(), max_bytes));
    } catch (const c10::Error&) {
      ok = false;  // reported, with its key path, by the key-by-key write
    }
  });
  return ok;
}

}  // namespace

struct NonTensorRows {
  NestedKey key;     // in `values`
  std::string path;  // in the store
  BatchSize batch;   // of the level holding it
  NonTensorData incoming;
};

namespace {

bool holds_non_tensor(const TensorDict& values) {
  bool found = false;
  values.impl()->for_each([&](const std::string&, const Entry& entry) {
    found = found || entry.is_non_tensor() || (entry.is_tensordict() && holds_non_tensor(entry.tensordict_unchecked()));
  });
  return found;
}

void collect_non_tensor_rows(const Layout& layout, const std::string& level, c10::IntArrayRef level_batch,
                             const TensorDict& values, const NestedKey& prefix, std::vector<NonTensorRows>& out) {
  values.impl()->for_each([&](const std::string& key, const Entry& entry) {
    const std::string path = level + key_part(key);
    if (entry.is_tensordict()) {
      auto nested = layout.nested.find(path);
      const BatchSize batch = nested != layout.nested.end() ? nested->second : BatchSize(level_batch.begin(), level_batch.end());
      collect_non_tensor_rows(layout, path + ".", batch, entry.tensordict_unchecked(), prefix.child(key), out);
      return;
    }
    auto leaf = layout.leaves.find(path);
    if (entry.is_non_tensor() && leaf != layout.leaves.end() && leaf->second.is_non_tensor)
      out.push_back({prefix.child(key), path, BatchSize(level_batch.begin(), level_batch.end()), entry.non_tensor()});
  });
}

}  // namespace

bool StoreLevel::write_non_tensor_rows(const BatchIndex& index, const std::vector<NonTensorRows>& rows) {
  // Read, change the selected elements, write back: under WATCH, so that a value another
  // client changed in between (another row's writer) aborts the transaction, which is then
  // redone from what the server holds. Nothing is lost to a concurrent writer.
  const StoreKeys& keys = state_->keys;
  RedisClient& client = state_->client;
  constexpr int kAttempts = 100;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::vector<Command> read{{"WATCH"}};
    for (const NonTensorRows& r : rows) {
      read[0].push_back(keys.data(r.path));
      read[0].push_back(keys.meta(r.path));
    }
    for (const NonTensorRows& r : rows) {
      read.push_back({"GET", keys.data(r.path)});
      read.push_back({"HGETALL", keys.meta(r.path)});
    }
    const Replies current = client.pipeline(read);
    for (size_t i = 0; i < read.size(); ++i) client.check(current[i], read[i]);
    std::vector<Command> write{{"MULTI"}};
    for (size_t i = 0; i < rows.size(); ++i) {
      const NonTensorRows& r = rows[i];
      const std::string meta_key = keys.meta(r.path), data_key = keys.data(r.path);
      const ReplyRef data = current[1 + 2 * i], hash = current[2 + 2 * i];
      if (data.is_nil() || hash.size() == 0) {
        client.run({"UNWATCH"});
        return false;  // erased meanwhile: the caller writes it as a new key
      }
      const LeafMetadata meta = parse_metadata(hash_pairs(hash), meta_key);
      if (!meta.is_non_tensor) {
        client.run({"UNWATCH"});
        return false;
      }
      const NonTensorData now = decode_leaf(meta, data.str(), data_key, r.batch, device_).non_tensor();
      const NonTensorData updated = detail::assign_non_tensor(now, r.batch, index, r.incoming);
      if (updated == now) continue;
      add_store_commands(write, keys, r.path, Entry(updated), r.batch, client.options().max_value_bytes);
    }
    if (write.size() == 1) {
      client.run({"UNWATCH"});
      return true;
    }
    write.push_back({"EXEC"});
    const Replies done = client.pipeline(write);
    for (size_t i = 0; i + 1 < write.size(); ++i) client.check(done[i], write[i]);
    const ReplyRef exec = done[write.size() - 1];
    if (exec.is_nil()) continue;  // another client changed one of them: read again
    client.check(exec, write.back());
    for (size_t i = 0; i < exec.size(); ++i) client.check(exec[i], write[1 + i]);
    return true;
  }
  TD_THROW(StorageError, client.options().endpoint(), ": ", keys.data(rows.front().path), ": the value kept changing (",
           kAttempts, " attempts) while its rows were written");
}

void StoreLevel::put_at_(const BatchIndex& index, const TensorDict& values) {
  const auto guard = state_->lock();
  // Rows of dim 0 into leaves the cached structure knows: every leaf's bytes in one round trip,
  // as hand-written pipelined SETRANGEs, written only if the server still has the metadata
  // they were planned with (send_rows). Anything else (a key to create, non-tensor data,
  // another index, metadata another client changed) goes key by key, which re-reads the
  // structure.
  // Per-element non-tensor values of existing non-tensor keys are read, changed and written
  // back atomically (write_non_tensor_rows); the key-by-key path would lose another writer's
  // rows between its read and its write.
  TensorDict rest = values;
  if (holds_non_tensor(values)) {
    std::vector<NonTensorRows> rows;
    collect_non_tensor_rows(state_->layout(true), path_, batch_size_, values, NestedKey(), rows);
    if (!rows.empty() && write_non_tensor_rows(index, rows)) {
      std::vector<NestedKey> written;
      for (const NonTensorRows& r : rows) written.push_back(r.key);
      rest = values.exclude(written);
    }
  }
  const std::optional<RowSelection> selection =
      batch_size_.empty() || !state_->cached ? std::nullopt : row_selection(index, batch_size_[0]);
  if (selection && selection->count > 0) {
    std::vector<RowWrite> writes;
    if (plan_all_rows(state_->keys, *state_->cached, path_, rest, *selection,
                      state_->client.options().max_value_bytes, writes)) {
      if (writes.empty() || send_rows(state_->client, std::move(writes))) return;
    }
    state_->forget_layout();
  }
  TensorDictBase::put_at_(index, rest);
}

TensorDict StoreLevel::make_child(std::string_view key, c10::IntArrayRef batch_size) const {
  const auto guard = state_->lock();
  const std::string p = full(key);
  state_->forget_layout();
  state_->transaction({{"HSET", state_->keys.nested(), p, shape_json(batch_size)},
                       {"ZADD", state_->keys.order(), "NX", next_order_score(), p}});
  auto level = c10::make_intrusive<StoreLevel>(state_, p + ".", batch_size, device_);
  children_[p] = level;
  return TensorDict(level);
}

void StoreLevel::set_batch_size(c10::IntArrayRef batch_size) {
  const auto guard = state_->lock();
  if (path_.empty()) {
    state_->client.run({"SET", state_->keys.batch_size(), shape_json(batch_size)});
  } else {
    state_->client.run({"HSET", state_->keys.nested(), path_.substr(0, path_.size() - 1), shape_json(batch_size)});
  }
  state_->forget_layout();
  TensorDictBase::set_batch_size(batch_size);
}

const StoreLevel* as_store_level(const TensorDictBase& impl) { return dynamic_cast<const StoreLevel*>(&impl); }

}  // namespace redis
}  // namespace tensordict
