// A store level (the root or a nested one): keys, leaves and nested levels as the server holds them.
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
    if (const LeafMetadata& planned = layout.leaves.at(p); Layout::in_records(planned)) {
      std::optional<Entry> read = get_from_records(p, planned, *layout.records);
      if (read) return std::move(*read);
      if (attempt == 0) continue;  // changed since the layout was read
      return Entry();
    }
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

std::optional<Entry> StoreLevel::get_from_records(const std::string& p, const LeafMetadata& planned,
                                                  const Layout::Records& records) const {
  // The leaf's metadata and rows in one transaction: whole records (MGET) when a row of this
  // leaf is a good part of them, else its range of each (GETRANGE per row).
  const std::string meta_key = state_->keys.meta(p), data_key = state_->keys.data(p);
  const int64_t row = row_bytes_of(planned, meta_key);
  const bool whole = records.row_bytes <= std::max<int64_t>(4096, 4 * row);
  const std::vector<int64_t> rows = all_record_rows(records.rows);
  std::vector<Command> commands = {{"MULTI"}, {"HGETALL", meta_key}, {"HMGET", state_->keys.rows(), "rows", "row_bytes"}};
  if (whole) {
    add_record_reads(commands, state_->keys, rows);
  } else if (row > 0) {
    for (int64_t r : rows)
      commands.push_back({"GETRANGE", state_->keys.record(r), std::to_string(planned.row_offset),
                          std::to_string(planned.row_offset + row - 1)});
  }
  commands.push_back({"EXEC"});
  Replies replies = state_->client.pipeline(commands);
  for (size_t i = 0; i < commands.size(); ++i) state_->client.check(replies[i], commands[i]);
  const ReplyRef exec = replies[replies.size() - 1];
  TD_CHECK(exec.is_array() && exec.size() == commands.size() - 2, StorageError, state_->client.options().endpoint(),
           ": ", data_key, ": the read transaction was aborted");
  for (size_t i = 0; i < exec.size(); ++i) state_->client.check(exec[i], commands[i + 1]);
  if (exec[0].size() == 0) return std::nullopt;  // erased
  const LeafMetadata now = parse_metadata(hash_pairs(exec[0]), meta_key);
  if (now.row_offset != planned.row_offset || now.shape != planned.shape || now.dtype != planned.dtype) return std::nullopt;
  const ReplyRef header = exec[1];  // the records as planned (a store made again may differ)
  if (!header.is_array() || header.size() != 2 || header[0].is_nil() || header[1].is_nil() ||
      header[0].str() != std::to_string(records.rows) || header[1].str() != std::to_string(records.row_bytes))
    return std::nullopt;
  if (whole) {
    std::vector<ReplyRef> mgets;
    for (size_t i = 2; i < exec.size(); ++i) mgets.push_back(exec[i]);
    return record_leaf(now, record_views(mgets, rows, records, state_->keys), data_key, device_);
  }
  std::vector<std::string_view> parts;
  for (size_t i = 2; i < exec.size(); ++i) {
    TD_CHECK(!exec[i].is_nil(), StorageError, state_->keys.record(static_cast<int64_t>(i - 2)), ": the store's record is missing");
    parts.push_back(exec[i].str());
  }
  return decode_tensor(now, parts, data_key, device_);
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
  // Every record (the per-row layout) when a leaf of this level is in them, then every other
  // leaf's value.
  const bool held = records_under(layout, path_);
  const std::vector<int64_t> rows = all_record_rows(held ? layout.records->rows : 0);
  std::vector<Command> commands;
  add_record_reads(commands, state_->keys, rows);
  const size_t record_commands = commands.size();
  std::vector<std::string> paths;
  for (const auto& [path, meta] : layout.leaves) {
    if (!is_under_level(path, path_) || Layout::in_records(meta)) continue;
    paths.push_back(path);
    commands.push_back({"GET", state_->keys.data(path)});
  }
  Replies replies = state_->client.pipeline(commands);
  for (size_t i = 0; i < commands.size(); ++i) {
    state_->client.check(replies[i], commands[i]);
    TD_CHECK(i < record_commands || !replies[i].is_nil(), StorageError, commands[i][1],
             ": listed in __keys__ but holds no value");
  }
  std::vector<std::string_view> records;
  if (held) {
    std::vector<ReplyRef> mgets;
    for (size_t i = 0; i < record_commands; ++i) mgets.push_back(replies[i]);
    records = record_views(mgets, rows, *layout.records, state_->keys);
  }
  const std::map<std::string, size_t> reply_of = reply_index(paths);
  return build(
      layout, path_, batch_size_,
      [&](const std::string& p, c10::IntArrayRef batch) {
        const LeafMetadata& meta = layout.leaves.at(p);
        if (Layout::in_records(meta)) return record_leaf(meta, records, state_->keys.data(p), device_);
        return decode_leaf(meta, replies[record_commands + reply_of.at(p)].str(), state_->keys.data(p), batch, device_);
      },
      [](c10::IntArrayRef batch) { return BatchSize(batch.begin(), batch.end()); });
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
  const Layout& layout = state_->layout(false);
  if (layout.records) {
    // A tensor leaf of the records takes a value of its shape and dtype, in place; a non-tensor
    // value replaces one. Nothing else can change (StoreLayout::per_row).
    auto it = layout.leaves.find(p);
    const bool known = it != layout.leaves.end();
    if (known && Layout::in_records(it->second) && value.is_tensor() &&
        value.tensor().sizes() == c10::IntArrayRef(it->second.shape) && value.tensor().scalar_type() == it->second.dtype &&
        !value.tensor().requires_grad()) {
      write_(key, value.tensor());
      return;
    }
    if (!(known && it->second.is_non_tensor && value.is_non_tensor()))
      throw_fixed_records(state_->keys, state_->client.options().endpoint(), known ? "replace" : "add",
                          NestedKey(key).repr());
  }
  std::vector<Command> commands;
  add_removal(commands, state_->keys, layout, p, /*keep_place=*/true);
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
  const Layout& layout = state_->layout(true);
  add_removal(commands, state_->keys, layout, p);
  if (commands.empty()) return;
  if (layout.records) throw_fixed_records(state_->keys, state_->client.options().endpoint(), "erase", NestedKey(key).repr());
  drop_children(p);
  state_->forget_layout();
  state_->transaction(std::move(commands));
  bump_layout_version();
}

void StoreLevel::rename(std::string_view from, std::string_view to) {
  const auto guard = state_->lock();
  const std::string source = full(from), target = full(to);
  const Layout layout = state_->layout(true);
  if (layout.records)
    throw_fixed_records(state_->keys, state_->client.options().endpoint(), "rename", NestedKey(from).repr());
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

TensorDict StoreLevel::make_child(std::string_view key, c10::IntArrayRef batch_size) const {
  const auto guard = state_->lock();
  const std::string p = full(key);
  if (state_->layout(false).records)
    throw_fixed_records(state_->keys, state_->client.options().endpoint(), "add the level", NestedKey(key).repr());
  state_->forget_layout();
  state_->transaction({{"HSET", state_->keys.nested(), p, shape_json(batch_size)},
                       {"ZADD", state_->keys.order(), "NX", next_order_score(), p}});
  auto level = c10::make_intrusive<StoreLevel>(state_, p + ".", batch_size, device_);
  children_[p] = level;
  return TensorDict(level);
}

void StoreLevel::set_batch_size(c10::IntArrayRef batch_size) {
  const auto guard = state_->lock();
  // The records are rows of dim 0: that dim stays (or goes, leaving the leaves as they are).
  if (const Layout& layout = state_->layout(true); layout.records && path_.empty() && !batch_size.empty() &&
                                                   batch_size[0] != layout.records->rows)
    throw_fixed_records(state_->keys, state_->client.options().endpoint(), "change dim 0 of the batch size to",
                        shape_json(batch_size));
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
