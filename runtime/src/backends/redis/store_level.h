#pragma once
// The backend behind TensorDictStore. StoreState is one store on one server, shared by every
// level handed out; StoreLevel is the root or a nested level, named by its path prefix ("" or
// "next."). Reads are fresh tensors (no aliasing), so every write reaches the server through
// write_ or insert_or_assign (Note [Reads, copies and writes] in tensor_dict_base.h).
//
// Refresh rule: the structure (keys, shapes, dtypes, nested levels) is read in one round trip
// by a server-side script and cached. Listing (keys, for_each, snapshot, to_tensordict) always
// re-reads it, so a reader sees keys other clients added; a read of a key the cache does not
// know re-reads it too. `get` of a leaf reads its metadata and bytes together in one
// transaction, so it sees the leaf as it is now. Data are never cached.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <tensordict/backends/store.h>
#include <tensordict/batch_index.h>
#include <tensordict/function_ref.h>
#include <tensordict/tensor_dict_base.h>

#include "backends/redis/redis_client.h"
#include "backends/redis/store_layout.h"

namespace tensordict {
namespace redis {

/// What the server holds for a store's structure.
struct Layout {
  /// False when the store has no __batch_size__: no such store.
  bool exists = false;
  BatchSize batch;
  std::optional<at::Device> device;
  /// Every leaf, by full path ("next.obs").
  std::map<std::string, LeafMetadata> leaves;
  /// Nested levels recorded in __nested__, by path, with their batch sizes.
  std::map<std::string, BatchSize> nested;
  /// When each path was first written (__order__); paths a Python client wrote have none.
  std::map<std::string, double> order;
  /// The per-row layout's records (__rows__, StoreLayout::per_row): `rows` of `row_bytes` each.
  struct Records {
    int64_t rows = 0, row_bytes = 0;
  };
  std::optional<Records> records;
  /// True when `meta`'s bytes are in the records rather than in a d: value.
  static bool in_records(const LeafMetadata& meta) { return !meta.is_non_tensor && meta.row_offset >= 0; }
};

struct StoreState {
  StoreState(StoreOptions options, const std::string& td_id) : client(options), keys(options.prefix, td_id) {}

  /// The structure, re-read when `refresh` or when nothing is cached.
  const Layout& layout(bool refresh);
  void forget_layout() { cached.reset(); }
  /// Sends `commands` as one MULTI/EXEC transaction and checks every reply. With `watched`
  /// (the caller WATCHed keys first), false when the server aborted it: nothing was applied.
  bool transaction(std::vector<Command> commands, bool watched = false);

  /// Held by every operation of a level of this store: the levels share one connection and
  /// one cached layout, which threads sharing a handle must take turns with. Recursive:
  /// operations call each other.
  std::unique_lock<std::recursive_mutex> lock() const { return std::unique_lock<std::recursive_mutex>(mutex); }

  RedisClient client;
  StoreKeys keys;
  std::optional<Layout> cached;

 private:
  mutable std::recursive_mutex mutex;
};

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
/// The layout script's command for the store `keys` name, and its reply read into a Layout
/// (StorageError naming the store at `endpoint` when the reply is not one).
Command layout_command(const StoreKeys& keys);
Layout parse_layout(ReplyRef reply, const StoreKeys& keys, const std::string& endpoint);
/// True when rows read by `a`'s placement of the leaves read the same from `b` (the key order
/// aside): the same batch size, device, nested levels, leaves and records.
bool same_structure(const Layout& a, const Layout& b);

/// The commands that read the rows an index selects from every leaf of a level, and where each
/// leaf's replies are (store_row_reads.cpp).
struct RowRead {
  RowSelection selection;
  std::vector<std::string> paths;
  std::vector<Command> commands;
  std::vector<size_t> first_reply;  // per path, then one past the last command
  /// The per-row layout: the records of the selected rows, read by the first commands (MGETs);
  /// the leaves kept in them are not in `paths`.
  std::vector<int64_t> record_rows;
  size_t record_commands = 0;
};

/// A non-tensor value of an indexed write into an existing non-tensor leaf (store_level.cpp).
struct NonTensorRows;

class StoreLevel final : public TensorDictBase {
 public:
  StoreLevel(std::shared_ptr<StoreState> state, std::string path, c10::IntArrayRef batch_size,
             std::optional<at::Device> device);

  const char* type_name() const override { return "TensorDictStore"; }
  const std::shared_ptr<StoreState>& state() const { return state_; }
  const std::string& path() const { return path_; }

  size_t num_entries() const override { return keys().size(); }
  std::vector<std::string> keys() const override;
  bool has(std::string_view key) const override { return kind(key) != EntryKind::Undefined; }
  Entry get(std::string_view key) const override;
  void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const override;
  void insert_or_assign(std::string_view key, Entry value) override;
  void erase(std::string_view key) override;
  void rename(std::string_view from, std::string_view to) override;

  EntryKind kind(std::string_view key) const override;
  void for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const override;
  LeafMeta leaf_meta(std::string_view key) const override;
  TensorDict snapshot() const override;
  void write_(std::string_view key, const at::Tensor& value) override;
  void write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) override;
  void put_at_(const BatchIndex& index, const TensorDict& values) override;
  TensorDict make_child(std::string_view key, c10::IntArrayRef batch_size) const override;
  void move_to_end(std::string_view key) override;
  void set_batch_size(c10::IntArrayRef batch_size) override;
  void release_resources() override;
  TensorDict index(const BatchIndex& index) const override;
  /// index() in halves, so that reads of several stores share round trips (StoreGroup): the
  /// commands reading the rows `index` selects by `layout`, nullopt for an index that is not rows
  /// of dim 0; then the result from their replies (one per command of `read`).
  std::optional<RowRead> plan_row_read(const BatchIndex& index, const Layout& layout) const;
  TensorDict finish_row_read(const BatchIndex& index, const Layout& layout, const RowRead& read,
                             const std::vector<ReplyRef>& replies) const;

 private:
  /// The commands reading `selection`'s rows of every leaf of this level by `layout`.
  RowRead plan_row_ranges(RowSelection selection, const Layout& layout) const;
  /// The path of this level's `key` (escaped as leaf_path does).
  std::string full(std::string_view key) const { return path_ + key_part(key); }
  EntryKind kind_in(const Layout& layout, const std::string& full_path) const;
  c10::intrusive_ptr<StoreLevel> child(const Layout& layout, const std::string& full_path) const;
  /// The level at `prefix` built in memory: `leaf(path, stored batch)` gives each leaf, and
  /// `result_batch(stored batch)` each level's batch size.
  TensorDict build(const Layout& layout, const std::string& prefix, c10::IntArrayRef stored_batch,
                   FunctionRef<Entry(const std::string&, c10::IntArrayRef)> leaf,
                   FunctionRef<BatchSize(c10::IntArrayRef)> result_batch) const;

  /// A leaf kept in the records (the per-row layout), read with its metadata in one
  /// transaction; nullopt when they are no longer `planned`.
  std::optional<Entry> get_from_records(const std::string& full_path, const LeafMetadata& planned,
                                        const Layout::Records& records) const;
  /// The indexed write of per-element non-tensor values into existing non-tensor leaves, each
  /// read, changed and written back under WATCH; false (nothing written) when one of them is
  /// no longer a non-tensor leaf.
  bool write_non_tensor_rows(const BatchIndex& index, const std::vector<NonTensorRows>& rows);
  /// Forgets the levels handed out at or under `full_path` (replaced, erased or renamed).
  void drop_children(const std::string& full_path);

  std::shared_ptr<StoreState> state_;
  std::string path_;
  // The nested levels handed out so far: one object per level, so its state (the lock) is the
  // same whichever handle reaches it.
  mutable std::map<std::string, c10::intrusive_ptr<StoreLevel>> children_;
};

/// The StoreState behind a TensorDictStore handle (a level); nullptr for another backend.
const StoreLevel* as_store_level(const TensorDictBase& impl);

/// A score for __order__ after every one this process gave before (microseconds since the
/// epoch, made strictly increasing), as ZADD takes it.
std::string next_order_score();
/// The keys of the level at path prefix `level` ("" or "next.") in `layout`, in their order.
std::vector<std::string> keys_in(const Layout& layout, const std::string& level);
/// StorageError naming `key` when a value of `nbytes` is over the server's limit (`max_bytes`).
void check_value_bytes(int64_t nbytes, const std::string& key, int64_t max_bytes);

class RecordBuilder;
/// The commands that store `entry` at `full_path` (its batch size `batch`): leaves as SET d: /
/// HSET m: / SADD, nested levels recursively, recorded in __nested__; with `records` (a store
/// created in the per-row layout), tensors whose dim 0 is the rows go there instead of d:.
/// Values over `max_bytes` are refused (StorageError) before anything is sent.
void add_store_commands(std::vector<Command>& out, const StoreKeys& keys, const std::string& full_path,
                        const Entry& entry, c10::IntArrayRef batch, int64_t max_bytes,
                        RecordBuilder* records = nullptr);

// Helpers the store's files share (store_state.cpp, store_row_reads.cpp).

/// A hash reply's (field, value) pairs.
std::vector<std::pair<std::string, std::string>> hash_pairs(ReplyRef reply);
/// True when `path` is strictly under the level path `prefix` ("next" holds "next.obs").
bool under(const std::string& path, const std::string& prefix);
/// True when `path` is in the level at path prefix `level` ("" or "next.").
bool is_under_level(const std::string& path, const std::string& level);
/// The bytes of `tensor` as stored; StorageError naming `key` when over `max_bytes`.
std::string tensor_bytes(const at::Tensor& tensor, const std::string& key, int64_t max_bytes);
/// Commands removing what the store holds at `full_path` (a leaf, or a nested level and
/// everything under it); with `keep_place` the path keeps its place in the key order.
void add_removal(std::vector<Command>& out, const StoreKeys& keys, const Layout& layout, const std::string& full_path,
                 bool keep_place = false);
/// A score as ZADD takes it, exactly.
std::string score_text(double score);
/// One reply per path, by path.
std::map<std::string, size_t> reply_index(const std::vector<std::string>& paths);

std::optional<RowSelection> row_selection(const BatchIndex& index, int64_t size);

/// The leaf read from `bytes` as `meta` says; StorageError naming `key` when their sizes
/// disagree or the encoding is refused.
Entry decode_leaf(const LeafMetadata& meta, std::string_view bytes, const std::string& key,
                  c10::IntArrayRef batch, const std::optional<at::Device>& device);
/// A tensor leaf whose bytes come in `parts`, in order (runs of rows read separately), copied
/// once into the result; StorageError naming `key` when their sizes do not add up to `meta`'s.
Entry decode_tensor(const LeafMetadata& meta, c10::ArrayRef<std::string_view> parts, const std::string& key,
                    const std::optional<at::Device>& device);

}  // namespace redis
}  // namespace tensordict
