#pragma once
// The key layout of a TensorDictStore, byte for byte Python tensordict v0.14's
// (docs/storage-formats.md, "Redis stores"):
//
//   {prefix}:{<td_id>}:__batch_size__   string, JSON list "[10, 3]"
//   {prefix}:{<td_id>}:__device__       string, "" or "cpu", "cuda:0"
//   {prefix}:{<td_id>}:__keys__         set of leaf paths ("obs", "next.obs")
//   {prefix}:{<td_id>}:d:<path>         a tensor's C-order bytes, or a non-tensor's JSON
//   {prefix}:{<td_id>}:m:<path>         hash: shape, dtype | is_non_tensor, encoding
//
// and, in this port's per-row layout (StoreLayout::per_row), instead of a tensor leaf's d: key:
//
//   {prefix}:{<td_id>}:__rows__         hash: rows, row_bytes (the records' count and size)
//   {prefix}:{<td_id>}:r:<row>          row <row> of every such leaf, each at its m: row_offset
//
// Everything read from the server is untrusted: every parser here checks what it reads and
// names the key it came from.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <tensordict/key.h>

namespace tensordict {
namespace redis {

class StoreKeys {
 public:
  StoreKeys(std::string prefix, std::string td_id);

  const std::string& td_id() const { return td_id_; }
  /// "{prefix}:{<td_id>}:", what every key of the store starts with.
  const std::string& base() const { return base_; }
  std::string batch_size() const { return base_ + "__batch_size__"; }
  std::string device() const { return base_ + "__device__"; }
  std::string keys() const { return base_ + "__keys__"; }
  /// This port's addition, which Python ignores: nested levels (empty ones too) and their
  /// batch sizes, a hash from level path to JSON batch size.
  std::string nested() const { return base_ + "__nested__"; }
  /// This port's addition too: a sorted set of leaf and level paths scored by when they were
  /// first written, so keys keep their insertion order (Python lists them in set order).
  std::string order() const { return base_ + "__order__"; }
  std::string data(std::string_view path) const { return base_ + "d:" + std::string(path); }
  std::string meta(std::string_view path) const { return base_ + "m:" + std::string(path); }
  /// The per-row layout's header and records (StoreLayout::per_row).
  std::string rows() const { return base_ + "__rows__"; }
  std::string record(int64_t row) const { return base_ + "r:" + std::to_string(row); }

 private:
  std::string td_id_;
  std::string base_;  // "{prefix}:{<td_id>}:"
};

/// A new store id: a random (version 4) UUID, as Python's uuid.uuid4().
std::string new_td_id();

/// ("next", "obs") -> "next.obs", as Python joins nested keys. A part holding '.' or '%', or an
/// empty part, is escaped ('.' -> "%2E", '%' -> "%25", "" -> "%") so every key reads back as
/// written; other keys are Python's byte for byte.
std::string leaf_path(KeyRef key);
/// One key part as it appears in a path.
std::string key_part(std::string_view part);
/// "next.obs" -> ("next", "obs"), escapes undone.
NestedKey split_path(std::string_view path);
/// One path part as the key it stands for.
std::string key_name(std::string_view part);

/// "[10, 3]", as Python's json.dumps writes a list.
std::string shape_json(c10::IntArrayRef shape);
/// The shape a JSON list holds: StorageError naming `where` for anything but a list of
/// integers >= 0.
std::vector<int64_t> parse_shape(std::string_view text, const std::string& where);

/// What an m:<path> hash says about a leaf.
struct LeafMetadata {
  bool is_non_tensor = false;
  /// Tensors.
  std::vector<int64_t> shape;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  /// Non-tensor data: "json" or "json_array" ("pickle" is refused when the value is read).
  std::string encoding;
  /// A json_array holding the value of every batch element as a nested list shaped like the
  /// whole batch (this port's `elements` field, for batches of several dims), rather than
  /// Python's one value per row of the first dim.
  bool per_element = false;
  /// Per-row layout: where the leaf's row starts in each record; -1 for a leaf kept whole (d:).
  int64_t row_offset = -1;
};

/// Parses the field/value pairs of an m: hash (HGETALL). StorageError naming `key` and the
/// missing or malformed field: a hash without `shape` or `dtype` (and not non-tensor), an
/// unknown dtype, a shape that is not a list of sizes.
LeafMetadata parse_metadata(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& key);

/// The byte count of a tensor of `shape` and `dtype`; StorageError naming `key` when it
/// overflows int64.
int64_t leaf_bytes(c10::IntArrayRef shape, c10::ScalarType dtype, const std::string& key);

}  // namespace redis
}  // namespace tensordict
