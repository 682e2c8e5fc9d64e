// Writes of rows of a store (write_at_, put_at_): each leaf's rows as SETRANGEs, guarded by its
// metadata in one transaction; per-element non-tensor values read, changed and written back.
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

// Rows of several leaves go in one round trip, written only if each leaf's metadata are still
// those the offsets were computed from (another client may have re-shaped, re-typed or erased
// a leaf, or re-created the store with other records, since they were cached): WATCH the
// hashes, then this script compares the fields and, if one changed, touches the hash (a field
// set and removed again, or another type restored as it was: no net change) so that the server
// aborts the transaction; then MULTI, the writes, EXEC. The bytes never pass through Lua, which
// copies its arguments at about 1 us per KiB. KEYS: the hashes; ARGV, for each: the number of
// fields n, n field names, n values ("" for a field that must be absent).
const char* const kCheckMetadataScript = R"lua(
local a = 1
for j = 1, #KEYS do
  local n = tonumber(ARGV[a])
  local m = redis.pcall('HMGET', KEYS[j], unpack(ARGV, a + 1, a + n))
  local changed = m.err ~= nil
  for f = 1, n do
    if not changed and (m[f] or '') ~= ARGV[a + n + f] then changed = true end
  end
  if changed then
    if m.err then
      local ttl = redis.call('PTTL', KEYS[j])
      redis.call('RESTORE', KEYS[j], ttl > 0 and ttl or 0, redis.call('DUMP', KEYS[j]), 'REPLACE')
    else
      redis.call('HSET', KEYS[j], '__touch__', '1')
      redis.call('HDEL', KEYS[j], '__touch__')
    end
    return 0
  end
  a = a + 1 + 2 * n
end
return 1
)lua";

// Fields of a hash a write was planned with, which the server must still hold.
struct HashGuard {
  std::string key;
  std::vector<std::pair<std::string, std::string>> fields;
};

// A leaf's m: hash: its shape, dtype and row_offset ("" for a leaf kept whole).
HashGuard guard_of(const StoreKeys& keys, const std::string& path, const LeafMetadata& meta) {
  return {keys.meta(path),
          {{"shape", shape_json(meta.shape)},
           {"dtype", torch_dtype_name(meta.dtype)},
           {"row_offset", meta.row_offset >= 0 ? std::to_string(meta.row_offset) : std::string()}}};
}

// `value` cast to the leaf's dtype and broadcast to the selected rows (c10::Error when it does
// not fit the leaf as `meta` describes it), as C-order bytes.
std::string rows_bytes(const std::string& key, const LeafMetadata& meta, const RowSelection& selection,
                       const at::Tensor& value, int64_t max_bytes) {
  std::vector<int64_t> rows(meta.shape.begin(), meta.shape.end());
  rows[0] = selection.count;
  at::Tensor v = value.is_cpu() && value.scalar_type() == meta.dtype ? value : value.to(at::kCPU, meta.dtype);
  const c10::IntArrayRef target = selection.integer ? c10::IntArrayRef(rows).slice(1) : c10::IntArrayRef(rows);
  if (v.sizes() != target) v = v.expand(target);
  return tensor_bytes(v, key, max_bytes);
}

// The writes of rows of several leaves, and what they were planned with.
struct RowWritePlan {
  std::vector<HashGuard> guards;
  std::vector<Command> writes;      // SETRANGEs into d: values
  std::vector<RecordPiece> pieces;  // rows of leaves in records (the per-row layout)
};

// Rows of one leaf into `plan`: ranges of its d: value (one per run of rows), or its pieces of
// the records. c10::Error when the value does not fit the leaf.
void plan_rows(RowWritePlan& plan, const StoreKeys& keys, const std::string& path, const LeafMetadata& meta,
               const RowSelection& selection, const at::Tensor& value, int64_t max_bytes) {
  const std::string data_key = keys.data(path);
  // A leaf in records is sent a row per value: only the records' size is limited (checked when
  // they were made).
  const bool records = Layout::in_records(meta);
  std::string bytes =
      rows_bytes(data_key, meta, selection, value, records ? std::numeric_limits<int64_t>::max() : max_bytes);
  plan.guards.push_back(guard_of(keys, path, meta));
  const int64_t row = row_bytes_of(meta, data_key);
  if (records) {
    plan.pieces.push_back({meta.row_offset, row, std::move(bytes)});
    return;
  }
  if (selection.spans.size() == 1) {
    plan.writes.push_back({"SETRANGE", data_key, std::to_string(selection.spans[0].row * row), std::move(bytes)});
    return;
  }
  for (const RowSpan& span : selection.spans)
    plan.writes.push_back({"SETRANGE", data_key, std::to_string(span.row * row),
                           bytes.substr(static_cast<size_t>(span.value_row * row), static_cast<size_t>(span.count * row))});
}

// `plan`'s record pieces as commands: whole records (MSET) when they cover every leaf the
// records hold, else a SETRANGE per row and leaf.
void add_piece_writes(RowWritePlan& plan, const StoreKeys& keys, const Layout& layout, const RowSelection& selection) {
  if (plan.pieces.empty()) return;
  // The records' size too: whole records written with a stale one would cut another leaf off.
  plan.guards.push_back({keys.rows(),
                         {{"rows", std::to_string(layout.records->rows)},
                          {"row_bytes", std::to_string(layout.records->row_bytes)}}});
  const std::vector<int64_t> rows = selected_record_rows(selection);
  const auto held = std::count_if(layout.leaves.begin(), layout.leaves.end(),
                                  [](const auto& leaf) { return Layout::in_records(leaf.second); });
  if (static_cast<size_t>(held) == plan.pieces.size()) {
    add_record_writes(plan.writes, keys, rows, plan.pieces, layout.records->row_bytes);
  } else {
    for (const RecordPiece& piece : plan.pieces) add_leaf_row_writes(plan.writes, keys, rows, piece);
  }
  plan.pieces.clear();
}

// Every write in one round trip (kCheckMetadataScript); false, with nothing written, when the
// server found a leaf's metadata changed.
bool send_guarded(RedisClient& client, RowWritePlan plan) {
  std::vector<Command> commands;
  commands.reserve(4 + plan.writes.size());
  commands.push_back({"WATCH"});
  commands.push_back({"EVAL", kCheckMetadataScript, std::to_string(plan.guards.size())});
  for (const HashGuard& g : plan.guards) commands[0].push_back(g.key);
  for (const HashGuard& g : plan.guards) commands[1].push_back(g.key);
  for (const HashGuard& g : plan.guards) {
    commands[1].push_back(std::to_string(g.fields.size()));
    for (const auto& field : g.fields) commands[1].push_back(field.first);
    for (const auto& field : g.fields) commands[1].push_back(field.second);
  }
  commands.push_back({"MULTI"});
  for (Command& w : plan.writes) commands.push_back(std::move(w));
  commands.push_back({"EXEC"});
  Replies replies = client.pipeline(commands);
  const bool unguarded = replies[1].is_error() && replies[1].str().rfind("NOSCRIPT", 0) == 0;
  if (unguarded) {
    // Someone flushed the server's scripts since this connection loaded the check, so the
    // transaction ran unguarded. It was right if the metadata are still those it was planned
    // with; otherwise say so rather than let it pass.
    std::vector<Command> reread;
    for (const HashGuard& g : plan.guards) {
      reread.push_back({"HMGET", g.key});
      for (const auto& field : g.fields) reread.back().push_back(field.first);
    }
    const Replies now = client.pipeline(reread);
    for (size_t j = 0; j < plan.guards.size(); ++j) {
      const ReplyRef m = now[j];
      const auto& fields = plan.guards[j].fields;
      bool same = m.is_array() && m.size() == fields.size();
      for (size_t f = 0; same && f < fields.size(); ++f)
        same = (m[f].is_nil() ? std::string_view() : m[f].str()) == fields[f].second;
      TD_CHECK(same, StorageError, client.options().endpoint(), ": ", plan.guards[j].key,
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

void StoreLevel::write_(std::string_view key, const at::Tensor& value) {
  const auto guard = state_->lock();
  const LeafMeta meta = leaf_meta(key);
  // Cast and broadcast as at::Tensor::copy_ does.
  const at::Tensor stored = value.to(at::kCPU, meta.dtype).expand(meta.shape);
  const std::string p = full(key);
  const Layout& layout = state_->layout(false);
  const LeafMetadata leaf = layout.leaves.at(p);
  if (!Layout::in_records(leaf)) {  // the whole leaf in one SET
    state_->client.run({"SET", state_->keys.data(p), tensor_bytes(stored, state_->keys.data(p), state_->client.options().max_value_bytes)});
    return;
  }
  // Every row of it, guarded as write_at_'s rows are.
  const int64_t rows = leaf.shape[0];
  if (rows == 0) return;
  const RowSelection all{{{0, 0, rows}}, rows, false};
  RowWritePlan plan;
  plan_rows(plan, state_->keys, p, leaf, all, stored, state_->client.options().max_value_bytes);
  add_piece_writes(plan, state_->keys, layout, all);
  TD_CHECK(send_guarded(state_->client, std::move(plan)), StorageError, state_->client.options().endpoint(), ": ",
           state_->keys.meta(p), ": the leaf changed while it was written");
}

void StoreLevel::write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) {
  const auto guard = state_->lock();
  // Rows of dim 0 (an integer, a step-1 slice, an index tensor or a mask) are byte ranges: one
  // SETRANGE per run of consecutive rows, of the value cast to the leaf's dtype and broadcast
  // to the rows' shape (the bounds were checked when the index was parsed), guarded by the
  // metadata they were computed from (send_guarded). Other indices read the leaf, change it and
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
    RowWritePlan plan;
    try {
      plan_rows(plan, state_->keys, p, meta, *selection, value, state_->client.options().max_value_bytes);
    } catch (const c10::Error&) {
      if (attempt == 0) continue;  // the value may fit the leaf as it is now
      throw;
    }
    add_piece_writes(plan, state_->keys, layout, *selection);
    if (send_guarded(state_->client, std::move(plan))) return;
  }
  TD_THROW(StorageError, state_->client.options().endpoint(), ": ", state_->keys.meta(p),
           ": the leaf kept changing while it was written");
}

namespace {

// Every leaf of `values` planned as rows of the leaf the cached structure has at its path
// (`level`: the path prefix of the level `values` goes into). False when an entry is not a
// tensor the structure knows, or a value does not fit its leaf: the caller goes key by key.
bool plan_all_rows(const StoreKeys& keys, const Layout& layout, const std::string& level, const TensorDict& values,
                   const RowSelection& selection, int64_t max_bytes, RowWritePlan& out) {
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
      plan_rows(out, keys, path, it->second, selection, entry.tensor_unchecked(), max_bytes);
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
  // they were planned with (send_guarded). Anything else (a key to create, non-tensor data,
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
    RowWritePlan plan;
    if (plan_all_rows(state_->keys, *state_->cached, path_, rest, *selection,
                      state_->client.options().max_value_bytes, plan)) {
      add_piece_writes(plan, state_->keys, *state_->cached, *selection);
      if (plan.guards.empty() || send_guarded(state_->client, std::move(plan))) return;
    }
    state_->forget_layout();
  }
  TensorDictBase::put_at_(index, rest);
}

}  // namespace redis
}  // namespace tensordict
