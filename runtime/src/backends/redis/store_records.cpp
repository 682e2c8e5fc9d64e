// The per-row layout's records (store_records.h): their header, how a new store's leaves are
// placed in them, and the commands that read and write rows of them.
#include "backends/redis/store_records.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <ATen/ATen.h>

#include <tensordict/entry.h>
#include <tensordict/errors.h>

namespace tensordict {
namespace redis {

Layout::Records parse_records(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& key) {
  Layout::Records out;
  bool rows = false, bytes = false;
  for (const auto& [field, value] : fields) {
    if (field != "rows" && field != "row_bytes") continue;
    const std::vector<int64_t> n = parse_shape("[" + value + "]", key + " (field '" + field + "')");
    TD_CHECK(n.size() == 1, StorageError, key, ": field '", field, "' must be one integer >= 0");
    (field == "rows" ? out.rows : out.row_bytes) = n[0];
    (field == "rows" ? rows : bytes) = true;
  }
  TD_CHECK(rows && bytes, StorageError, key, ": the per-row layout's header needs 'rows' and 'row_bytes'");
  return out;
}

int64_t row_bytes_of(const LeafMetadata& meta, const std::string& key) {
  return leaf_bytes(c10::IntArrayRef(meta.shape).slice(1), meta.dtype, key);
}

void check_record_leaf(const LeafMetadata& meta, const std::optional<Layout::Records>& records, const std::string& key) {
  TD_CHECK(records.has_value(), StorageError, key, ": has a 'row_offset' but the store has no __rows__ header");
  const int64_t row = row_bytes_of(meta, key);
  TD_CHECK(meta.shape[0] == records->rows && meta.row_offset <= records->row_bytes &&
               row <= records->row_bytes - meta.row_offset,
           StorageError, key, ": rows of ", row, " bytes at offset ", meta.row_offset, " of ", meta.shape[0],
           " rows do not fit the store's records (", records->rows, " of ", records->row_bytes, " bytes)");
}

int64_t RecordBuilder::next(int64_t row_bytes) {
  const int64_t offset = row_bytes_;
  row_bytes_ += row_bytes;
  return offset;
}

int64_t RecordBuilder::add(const at::Tensor& t, const std::string& key) {
  if (!has_rows_ || t.dim() == 0 || t.size(0) != rows_) return -1;
  const int64_t offset = next(leaf_bytes(t.sizes().slice(1), t.scalar_type(), key));
  // Only a record's size is limited (add_commands): the leaf goes out a row per value.
  leaves_.emplace_back(offset, tensor_bytes(t, key, std::numeric_limits<int64_t>::max()));
  return offset;
}

int64_t RecordBuilder::add_zeros(c10::IntArrayRef shape, c10::ScalarType dtype, const std::string& key) {
  if (!has_rows_ || shape.empty() || shape[0] != rows_) return -1;
  return next(leaf_bytes(shape.slice(1), dtype, key));
}

void RecordBuilder::add_commands(std::vector<Command>& out, const StoreKeys& keys, int64_t max_bytes) const {
  check_value_bytes(row_bytes_, keys.record(0), max_bytes);
  out.push_back({"HSET", keys.rows(), "rows", std::to_string(rows_), "row_bytes", std::to_string(row_bytes_)});
  if (leaves_.empty() && row_bytes_ > 0) {
    // Zeros: the server allocates them, no bytes leave the client.
    for (int64_t r = 0; r < rows_; ++r) out.push_back({"SETRANGE", keys.record(r), std::to_string(row_bytes_ - 1), std::string(1, '\0')});
    return;
  }
  for (int64_t first = 0; first < rows_; first += kRecordsPerCommand) {
    const int64_t last = std::min(rows_, first + kRecordsPerCommand);
    Command mset{"MSET"};
    mset.reserve(static_cast<size_t>(1 + 2 * (last - first)));
    for (int64_t r = first; r < last; ++r) {
      std::string record(static_cast<size_t>(row_bytes_), '\0');
      for (const auto& [offset, bytes] : leaves_) {
        const size_t row = bytes.size() / static_cast<size_t>(rows_);
        if (row > 0) std::memcpy(&record[static_cast<size_t>(offset)], bytes.data() + static_cast<size_t>(r) * row, row);
      }
      mset.push_back(keys.record(r));
      mset.push_back(std::move(record));
    }
    out.push_back(std::move(mset));
  }
}

bool records_under(const Layout& layout, const std::string& level) {
  return std::any_of(layout.leaves.begin(), layout.leaves.end(), [&](const auto& leaf) {
    return Layout::in_records(leaf.second) && is_under_level(leaf.first, level);
  });
}

std::vector<int64_t> all_record_rows(int64_t rows) {
  std::vector<int64_t> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) out[static_cast<size_t>(r)] = r;
  return out;
}

std::vector<int64_t> selected_record_rows(const RowSelection& selection) {
  std::vector<int64_t> rows(static_cast<size_t>(selection.count));
  for (const RowSpan& span : selection.spans)
    for (int64_t k = 0; k < span.count; ++k) rows[static_cast<size_t>(span.value_row + k)] = span.row + k;
  return rows;
}

void add_record_reads(std::vector<Command>& out, const StoreKeys& keys, const std::vector<int64_t>& rows) {
  for (size_t first = 0; first < rows.size(); first += kRecordsPerCommand) {
    const size_t last = std::min(rows.size(), first + static_cast<size_t>(kRecordsPerCommand));
    Command mget{"MGET"};
    mget.reserve(1 + last - first);
    for (size_t i = first; i < last; ++i) mget.push_back(keys.record(rows[i]));
    out.push_back(std::move(mget));
  }
}

std::vector<std::string_view> record_views(const std::vector<ReplyRef>& mgets, const std::vector<int64_t>& rows,
                                           const Layout::Records& records, const StoreKeys& keys) {
  std::vector<std::string_view> out;
  out.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const ReplyRef reply = mgets[i / static_cast<size_t>(kRecordsPerCommand)];
    const size_t in_reply = i % static_cast<size_t>(kRecordsPerCommand);
    TD_CHECK(reply.is_array() && in_reply < reply.size(), StorageError, keys.record(rows[i]),
             ": the reply to the MGET of the store's records is not one value per record");
    const ReplyRef record = reply[in_reply];
    TD_CHECK(!record.is_nil(), StorageError, keys.record(rows[i]), ": the store's record of row ", rows[i],
             " is missing");
    const std::string_view bytes = record.str();
    TD_CHECK(static_cast<int64_t>(bytes.size()) == records.row_bytes, StorageError, keys.record(rows[i]), ": holds ",
             bytes.size(), " bytes, but the store's records are ", records.row_bytes, " bytes (", keys.rows(), ")");
    out.push_back(bytes);
  }
  return out;
}

Entry record_leaf(const LeafMetadata& meta, const std::vector<std::string_view>& records, const std::string& key,
                  const std::optional<at::Device>& device) {
  LeafMetadata part = meta;
  part.shape[0] = static_cast<int64_t>(records.size());
  const size_t offset = static_cast<size_t>(meta.row_offset), row = static_cast<size_t>(row_bytes_of(meta, key));
  std::vector<std::string_view> rows;
  rows.reserve(records.size());
  for (std::string_view record : records) rows.push_back(record.substr(offset, row));
  return decode_tensor(part, rows, key, device);
}

void add_leaf_row_writes(std::vector<Command>& out, const StoreKeys& keys, const std::vector<int64_t>& rows,
                         const RecordPiece& piece) {
  const size_t row = static_cast<size_t>(piece.row_bytes);
  if (row == 0) return;
  const std::string offset = std::to_string(piece.offset);
  for (size_t i = 0; i < rows.size(); ++i)
    out.push_back({"SETRANGE", keys.record(rows[i]), offset, piece.bytes.substr(i * row, row)});
}

void add_record_writes(std::vector<Command>& out, const StoreKeys& keys, const std::vector<int64_t>& rows,
                       const std::vector<RecordPiece>& pieces, int64_t row_bytes) {
  for (size_t first = 0; first < rows.size(); first += kRecordsPerCommand) {
    const size_t last = std::min(rows.size(), first + static_cast<size_t>(kRecordsPerCommand));
    Command mset{"MSET"};
    mset.reserve(1 + 2 * (last - first));
    for (size_t i = first; i < last; ++i) {
      std::string record(static_cast<size_t>(row_bytes), '\0');
      for (const RecordPiece& piece : pieces)
        if (piece.row_bytes > 0)
          std::memcpy(&record[static_cast<size_t>(piece.offset)], piece.bytes.data() + i * static_cast<size_t>(piece.row_bytes),
                      static_cast<size_t>(piece.row_bytes));
      mset.push_back(keys.record(rows[i]));
      mset.push_back(std::move(record));
    }
    out.push_back(std::move(mset));
  }
}

void throw_fixed_records(const StoreKeys& keys, const std::string& endpoint, const std::string& what,
                         const std::string& key) {
  TD_THROW(StorageError, "TensorDictStore '", keys.td_id(), "' at ", endpoint,
           " keeps its tensors in per-row records (StoreLayout::per_row), fixed when it was created: cannot ", what,
           " ", key, ". Create the store again with the new leaves, or use StoreLayout::per_leaf");
}

}  // namespace redis
}  // namespace tensordict
