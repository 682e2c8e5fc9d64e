// The server-side state of a store: its structure read in one round trip (the layout script),
// transactions, and the commands that store an entry; helpers the level's files share.
#include "backends/redis/store_level.h"

#include <algorithm>
#include <chrono>
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


// The whole structure in one round trip: batch size, device, nested levels, key order, the
// per-row layout's header, then each leaf path followed by its metadata hash.
const char* const kLayoutScript = R"lua(-- read-only
local base = ARGV[1]
local out = {}
out[1] = redis.call('GET', base .. '__batch_size__')
out[2] = redis.call('GET', base .. '__device__')
out[3] = redis.call('HGETALL', base .. '__nested__')
out[4] = redis.call('ZRANGE', base .. '__order__', 0, -1, 'WITHSCORES')
out[5] = redis.call('HGETALL', base .. '__rows__')
local members = redis.call('SMEMBERS', base .. '__keys__')
for i = 1, #members do
  out[#out + 1] = members[i]
  out[#out + 1] = redis.call('HGETALL', base .. 'm:' .. members[i])
end
return out
)lua";

}  // namespace

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
                 bool keep_place) {
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

void check_value_bytes(int64_t nbytes, const std::string& key, int64_t max_bytes) {
  TD_CHECK(nbytes <= max_bytes, StorageError, key, ": ", nbytes, " bytes are over the server's limit for one value (",
           max_bytes, " bytes, StoreOptions::max_value_bytes); split the leaf, or raise the server's proto-max-bulk-len");
}

const Layout& StoreState::layout(bool refresh) {
  if (cached && !refresh) return *cached;
  Replies replies = client.run(layout_command(keys));
  cached = parse_layout(replies[0], keys, client.options().endpoint());
  return *cached;
}

Command layout_command(const StoreKeys& keys) { return {"EVAL", kLayoutScript, "1", keys.keys(), keys.base()}; }

Layout parse_layout(ReplyRef root, const StoreKeys& keys, const std::string& endpoint) {
  const auto& client_endpoint = endpoint;
  TD_CHECK(root.is_array() && root.size() >= 5, StorageError, client_endpoint, ": ", keys.base(),
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
  if (root[4].size() > 0) out.records = parse_records(hash_pairs(root[4]), keys.rows());
  for (size_t i = 5; i + 1 < root.size(); i += 2) {
    const std::string path(root[i].str());
    const LeafMetadata& meta =
        out.leaves.emplace(path, parse_metadata(hash_pairs(root[i + 1]), keys.meta(path))).first->second;
    if (Layout::in_records(meta)) check_record_leaf(meta, out.records, keys.meta(path));
  }
  // The records are the batch's rows (a store whose batch lost its dims keeps them, tied to its
  // leaves above); a count that is neither is refused before anything reads or deletes them.
  if (out.records && out.records->rows != 0) {
    const bool held = std::any_of(out.leaves.begin(), out.leaves.end(), [](const auto& l) { return Layout::in_records(l.second); });
    TD_CHECK(out.batch.empty() ? held : out.batch[0] == out.records->rows, StorageError, keys.rows(), ": ",
             out.records->rows, " records for a store of batch size ", shape_json(out.batch));
  }
  return out;
}

bool same_structure(const Layout& a, const Layout& b) {
  const auto same_leaf = [](const auto& x, const auto& y) {
    const LeafMetadata &m = x.second, &n = y.second;
    return x.first == y.first && m.is_non_tensor == n.is_non_tensor && m.shape == n.shape && m.dtype == n.dtype &&
           m.encoding == n.encoding && m.per_element == n.per_element && m.row_offset == n.row_offset;
  };
  const bool same_records = a.records.has_value() == b.records.has_value() &&
                            (!a.records || (a.records->rows == b.records->rows && a.records->row_bytes == b.records->row_bytes));
  return a.exists == b.exists && a.batch == b.batch && a.device == b.device && a.nested == b.nested && same_records &&
         a.leaves.size() == b.leaves.size() && std::equal(a.leaves.begin(), a.leaves.end(), b.leaves.begin(), same_leaf);
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
                        const Entry& entry, c10::IntArrayRef batch, int64_t max_bytes, RecordBuilder* records) {
  // NX: a replaced entry keeps its place.
  out.push_back({"ZADD", keys.order(), "NX", next_order_score(), full_path});
  if (entry.is_tensordict()) {
    const TensorDict& td = entry.tensordict();
    out.push_back({"HSET", keys.nested(), full_path, shape_json(td.batch_size())});
    td.impl()->for_each([&](const std::string& key, const Entry& child) {
      add_store_commands(out, keys, full_path + "." + key_part(key), child, td.batch_size(), max_bytes, records);
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
    const int64_t offset = records != nullptr ? records->add(t, keys.data(full_path)) : -1;
    Command meta{"HSET", keys.meta(full_path), "shape", shape_json(t.sizes()), "dtype", torch_dtype_name(t.scalar_type())};
    if (offset >= 0) {
      meta.insert(meta.end(), {"row_offset", std::to_string(offset)});
    } else {
      out.push_back({"SET", keys.data(full_path), tensor_bytes(t, keys.data(full_path), max_bytes)});
    }
    out.push_back(std::move(meta));
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

}  // namespace redis
}  // namespace tensordict
