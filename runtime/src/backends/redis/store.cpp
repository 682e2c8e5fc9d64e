// TensorDictStore's public factories and accessors.

#include <tensordict/backends/store.h>

#include <algorithm>
#include <optional>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "backends/redis/cluster_slot.h"
#include "backends/redis/store_level.h"
#include "backends/redis/store_records.h"

namespace tensordict {

namespace {

using redis::Command;
using redis::StoreLevel;
using redis::StoreState;

std::shared_ptr<StoreState> open_state(StoreOptions& options) {
  if (options.td_id.empty()) options.td_id = redis::new_td_id();
  return std::make_shared<StoreState>(options, options.td_id);
}

// How messages name a store: "TensorDictStore 'id' at host:port (prefix 'tensordict')".
std::string store_name(const StoreOptions& options) {
  return c10::str("TensorDictStore '", options.td_id, "' at ", options.endpoint(), " (prefix '", options.prefix, "')");
}

[[noreturn]] void throw_exists(const StoreOptions& options) {
  TD_THROW(StorageError, store_name(options),
           " already exists; creating it again would replace its data. Set StoreOptions::overwrite to replace it, "
           "or open it with TensorDictStore::from_store");
}

// The state of a store about to be created. Unless options.overwrite, an existing store is
// refused, and its __batch_size__ stays WATCHed until create(): a store another client creates
// meanwhile aborts the transaction instead of being replaced.
std::shared_ptr<StoreState> new_store_state(StoreOptions& options) {
  std::shared_ptr<StoreState> state = open_state(options);
  if (!options.overwrite) state->client.run({"WATCH", state->keys.batch_size()});
  if (!options.overwrite && state->layout(true).exists) {
    state->client.run({"UNWATCH"});
    throw_exists(options);
  }
  return state;
}

// The commands that make the store empty: every key `layout` lists for it (a store written
// before, under the same id, is replaced whole).
void add_clear(std::vector<Command>& out, const StoreState& state, const redis::Layout& layout) {
  const redis::StoreKeys& k = state.keys;
  for (const auto& [path, meta] : layout.leaves) out.push_back({"DEL", k.data(path), k.meta(path)});
  out.push_back({"DEL", k.keys(), k.nested(), k.order(), k.batch_size(), k.device(), k.rows()});
  const int64_t records = layout.records ? layout.records->rows : 0;
  for (int64_t first = 0; first < records; first += redis::kRecordsPerCommand) {
    Command del{"DEL"};
    for (int64_t r = first; r < std::min(records, first + redis::kRecordsPerCommand); ++r) del.push_back(k.record(r));
    out.push_back(std::move(del));
  }
}

void add_header(std::vector<Command>& out, const redis::StoreKeys& k, c10::IntArrayRef batch,
                const std::optional<at::Device>& device) {
  out.push_back({"SET", k.batch_size(), redis::shape_json(batch)});
  out.push_back({"SET", k.device(), device ? device->str() : std::string()});
}

// A per-row store's handle is locked, as a memory-mapped tensordict is: its tensor leaves are
// fixed (StoreLayout::per_row).
TensorDictStore root_of(const std::shared_ptr<StoreState>& state) {
  const redis::Layout& layout = state->layout(true);
  TensorDictStore out =
      TensorDictStore::from(TensorDict(c10::make_intrusive<StoreLevel>(state, "", layout.batch, layout.device)));
  if (layout.records) out.lock_();
  return out;
}

// The records of a per-row store of `batch` (nullopt for the per-leaf layout). A batch of no
// dims has no rows: no record, every leaf kept whole, the leaves fixed all the same.
std::optional<redis::RecordBuilder> record_builder(const StoreOptions& options, c10::IntArrayRef batch) {
  if (options.layout != StoreLayout::per_row) return std::nullopt;
  return redis::RecordBuilder(batch.empty() ? std::nullopt : std::optional<int64_t>(batch[0]));
}

const StoreLevel& level_of(const TensorDict& td) {
  const StoreLevel* level = redis::as_store_level(*td.impl());
  TD_CHECK(level != nullptr, TypeError, "expected a TensorDictStore, got a ", td.impl()->type_name());
  return *level;
}

// Creates the store from `commands` (after add_clear and add_header) in one transaction.
TensorDictStore create(const std::shared_ptr<StoreState>& state, std::vector<Command> commands) {
  const bool watched = !state->client.options().overwrite;
  state->forget_layout();
  if (!state->transaction(std::move(commands), watched)) throw_exists(state->client.options());
  return root_of(state);
}

// The nested levels above `key` (all of the root's batch size), recorded as from_tensordict does.
void add_levels(std::vector<Command>& out, const redis::StoreKeys& k, const NestedKey& key, c10::IntArrayRef batch) {
  for (size_t i = 1; i < key.size(); ++i) {
    const std::string level =
        redis::leaf_path(NestedKey(std::vector<std::string>(key.parts().begin(), key.parts().begin() + i)));
    out.push_back({"HSET", k.nested(), level, redis::shape_json(batch)});
    out.push_back({"ZADD", k.order(), "NX", redis::next_order_score(), level});
  }
}

}  // namespace

TensorDictStore TensorDictStore::from_tensordict(const TensorDict& td, StoreOptions options) {
  std::shared_ptr<StoreState> state = new_store_state(options);
  std::vector<Command> commands;
  add_clear(commands, *state, state->layout(false));
  add_header(commands, state->keys, td.batch_size(), td.device());
  std::optional<redis::RecordBuilder> records = record_builder(options, td.batch_size());
  td.impl()->for_each([&](const std::string& key, const Entry& entry) {
    redis::add_store_commands(commands, state->keys, redis::leaf_path(NestedKey(key)), entry, td.batch_size(),
                              options.max_value_bytes, records ? &*records : nullptr);
  });
  if (records) records->add_commands(commands, state->keys, options.max_value_bytes);
  return create(state, std::move(commands));
}

TensorDictStore TensorDictStore::from_schema(const LeafSpecs& schema, c10::IntArrayRef batch_size, StoreOptions options) {
  if (options.td_id.empty()) options.td_id = redis::new_td_id();
  check_leaf_specs(schema, batch_size, store_name(options));
  std::shared_ptr<StoreState> state = new_store_state(options);
  const redis::StoreKeys& k = state->keys;
  std::vector<Command> commands;
  add_clear(commands, *state, state->layout(false));
  add_header(commands, k, batch_size, std::nullopt);
  std::optional<redis::RecordBuilder> records = record_builder(options, batch_size);
  for (const auto& [key, spec] : schema) {
    const std::string path = redis::leaf_path(key);
    add_levels(commands, k, key, batch_size);
    if (!spec.is_tensor()) {
      // Small by nature (one JSON value): sent as from_tensordict sends it.
      redis::add_store_commands(commands, k, path, Entry(spec.value()), batch_size, options.max_value_bytes);
      continue;
    }
    commands.push_back({"ZADD", k.order(), "NX", redis::next_order_score(), path});
    std::vector<int64_t> shape(batch_size.begin(), batch_size.end());
    shape.insert(shape.end(), spec.event_shape().begin(), spec.event_shape().end());
    const int64_t nbytes = redis::leaf_bytes(shape, spec.dtype(), k.data(path));
    const int64_t offset = records ? records->add_zeros(shape, spec.dtype(), k.data(path)) : -1;
    Command meta{"HSET", k.meta(path), "shape", redis::shape_json(shape), "dtype", torch_dtype_name(spec.dtype())};
    if (offset >= 0) {
      meta.insert(meta.end(), {"row_offset", std::to_string(offset)});
    } else {
      redis::check_value_bytes(nbytes, k.data(path), options.max_value_bytes);
      // The server zero-fills up to the byte written: no tensor bytes leave the client.
      if (nbytes > 0) {
        commands.push_back({"SETRANGE", k.data(path), std::to_string(nbytes - 1), std::string(1, '\0')});
      } else {
        commands.push_back({"SET", k.data(path), ""});
      }
    }
    commands.push_back(std::move(meta));
    commands.push_back({"SADD", k.keys(), path});
  }
  if (records) records->add_commands(commands, k, options.max_value_bytes);
  return create(state, std::move(commands));
}

TensorDictStore TensorDictStore::from_store(const std::string& td_id, StoreOptions options) {
  options.td_id = td_id;
  std::shared_ptr<StoreState> state = open_state(options);
  TD_CHECK(state->layout(true).exists, KeyError, "No TensorDictStore with id '", td_id, "' at ",
           options.endpoint(), " (prefix '", options.prefix, "')");
  return root_of(state);
}

TensorDictStore TensorDictStore::from(const TensorDict& td) {
  level_of(td);
  return TensorDictStore(td);
}

bool TensorDictStore::is_store(const TensorDict& td) { return redis::as_store_level(*td.impl()) != nullptr; }

const std::string& TensorDictStore::td_id() const { return level_of(*this).state()->keys.td_id(); }

const StoreOptions& TensorDictStore::options() const { return level_of(*this).state()->client.options(); }

TensorDict TensorDictStore::to_tensordict() const { return impl()->snapshot(); }

void TensorDictStore::clear_store() {
  const StoreLevel& level = level_of(*this);
  StoreState& state = *level.state();
  std::vector<Command> commands;
  const redis::Layout& layout = state.layout(true);
  add_clear(commands, state, layout);
  add_header(commands, state.keys, layout.batch, layout.device);
  state.forget_layout();
  state.transaction(std::move(commands));
}

std::string store_id(const TensorDict& td) { return level_of(td).state()->keys.td_id(); }

std::vector<std::string> spread_store_ids(const std::string& base, int64_t count, const StoreOptions& options) {
  TD_CHECK(count >= 0, ValueError, "spread_store_ids: count must be >= 0, got ", count);
  std::vector<std::string> out;
  if (options.cluster_nodes.empty()) {
    for (int64_t i = 0; i < count; ++i) out.push_back(base + "-" + std::to_string(i));
    return out;
  }
  redis::RedisClient client(options);
  const std::vector<redis::NodeAddress> masters = client.masters();
  for (int64_t i = 0; i < count; ++i) {
    const redis::NodeAddress& wanted = masters[static_cast<size_t>(i) % masters.size()];
    // Each try lands on a given master with a chance of about 1/masters: a few tries suffice.
    for (int64_t k = 0;; ++k) {
      const std::string id = base + "-" + std::to_string(i) + (k == 0 ? "" : "." + std::to_string(k));
      const int slot = redis::key_hash_slot(redis::StoreKeys(options.prefix, id).batch_size());
      if (client.node_of_slot(slot) == wanted) {
        out.push_back(id);
        break;
      }
      TD_CHECK(k < 100000, StorageError, options.endpoint(), ": no id for master ", wanted.endpoint(),
               " (does it serve any slot?)");
    }
  }
  return out;
}

}  // namespace tensordict
