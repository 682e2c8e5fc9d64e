#pragma once
// The per-row layout (StoreLayout::per_row): row r of every tensor leaf whose dim 0 is the
// batch's lives in one record, `r:<r>`, at the leaf's `row_offset`. Rows of every leaf are then
// one key each: a sample of rows is one MGET, a write of whole rows one MSET (the per-leaf
// layout needs a range per row and leaf). The records' size is fixed when the store is created,
// so the tensor leaves are too.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "backends/redis/store_level.h"

namespace tensordict {
namespace redis {

/// Records per MGET or MSET: one command stays well under the server's argument limits.
constexpr int64_t kRecordsPerCommand = 1024;

/// The __rows__ hash's fields; StorageError naming `key` when they are not two sizes.
Layout::Records parse_records(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& key);
/// StorageError naming the leaf's m: `key` when its row does not fit the records.
void check_record_leaf(const LeafMetadata& meta, const std::optional<Layout::Records>& records, const std::string& key);
/// The bytes of one row of a leaf (its shape without dim 0).
int64_t row_bytes_of(const LeafMetadata& meta, const std::string& key);

/// Lays out the records of a store being created: each tensor leaf whose dim 0 is `rows` gets
/// the next offset; the records are sent last, in the creating transaction.
class RecordBuilder {
 public:
  /// `rows`: the batch's dim 0; nullopt for a batch of no dims (no leaf goes in records).
  explicit RecordBuilder(std::optional<int64_t> rows) : rows_(rows.value_or(0)), has_rows_(rows.has_value()) {}
  /// The offset of `t`'s rows (its bytes are kept for the records), or -1 when its dim 0 is not
  /// the rows (it is then stored whole). Only a record's size is limited, not the leaf's.
  int64_t add(const at::Tensor& t, const std::string& key);
  /// The offset of a zero-filled leaf of `shape` and `dtype` (from_schema), or -1.
  int64_t add_zeros(c10::IntArrayRef shape, c10::ScalarType dtype, const std::string& key);
  /// HSET __rows__, then the records: MSETs of their bytes, or, when every leaf is zeros,
  /// SETRANGEs that have the server allocate them zero-filled.
  void add_commands(std::vector<Command>& out, const StoreKeys& keys, int64_t max_bytes) const;

 private:
  int64_t next(int64_t row_bytes);
  int64_t rows_, row_bytes_ = 0;
  bool has_rows_;
  std::vector<std::pair<int64_t, std::string>> leaves_;  // offset, C-order bytes
};

/// True when a leaf of the level at path prefix `level` ("" or "next.") is kept in records.
bool records_under(const Layout& layout, const std::string& level);
/// Rows 0 .. rows - 1 (every record).
std::vector<int64_t> all_record_rows(int64_t rows);
/// The rows a selection reads or writes, in the order of the value's rows.
std::vector<int64_t> selected_record_rows(const RowSelection& selection);
/// MGETs of the records of `rows`.
void add_record_reads(std::vector<Command>& out, const StoreKeys& keys, const std::vector<int64_t>& rows);
/// The records add_record_reads asked for, from its MGETs' replies: StorageError naming the
/// record when one is missing or not `records.row_bytes` long.
std::vector<std::string_view> record_views(const std::vector<ReplyRef>& mgets, const std::vector<int64_t>& rows,
                                           const Layout::Records& records, const StoreKeys& keys);
/// A leaf's rows cut out of `records` (one per row, in order), copied once into one tensor.
Entry record_leaf(const LeafMetadata& meta, const std::vector<std::string_view>& records, const std::string& key,
                  const std::optional<at::Device>& device);

/// One leaf's part of rows of the records: its offset, row size and the value's rows (C order).
struct RecordPiece {
  int64_t offset, row_bytes;
  std::string bytes;
};
/// SETRANGEs writing `piece` into its place in records `rows`, one per row.
void add_leaf_row_writes(std::vector<Command>& out, const StoreKeys& keys, const std::vector<int64_t>& rows,
                         const RecordPiece& piece);
/// MSETs of whole records `rows` made of `pieces`, which must cover every byte of a record.
void add_record_writes(std::vector<Command>& out, const StoreKeys& keys, const std::vector<int64_t>& rows,
                       const std::vector<RecordPiece>& pieces, int64_t row_bytes);

/// The StorageError for a change of a per-row store's tensor leaves (`what`: "add", "erase",
/// "rename", "re-shape", ... `key`).
[[noreturn]] void throw_fixed_records(const StoreKeys& keys, const std::string& endpoint, const std::string& what,
                                      const std::string& key);

}  // namespace redis
}  // namespace tensordict
