// MemmapLevel's write of non-tensor values: the directory on disk changes with the table, so an
// indexed write of per-element strings survives load_memmap (and Python reads it).

#include "backends/memmap/memmap_level.h"

#include <algorithm>

#include <tensordict/backends/memmap.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/json.h>

#include "backends/memmap/format.h"
#include "core/file_io.h"

namespace tensordict {

using namespace detail;
using namespace memmap_detail;

void MemmapLevel::write_non_tensor_(std::string_view key, const NonTensorData& value) {
  if (writable_) {
    const std::string k(key);
    // The directory the entry was loaded from: the encoded name, or a legacy raw one.
    std::string dir = join_path(path_, encode_key_for_filesystem(k));
    if (!path_exists(dir) && is_safe_legacy_key(k, /*collection=*/true) && path_exists(join_path(path_, k))) {
      dir = join_path(path_, k);
    }
    ensure_directory(dir);
    NonTensorMeta stored = non_tensor_meta(value);
    write_text_file(join_path(dir, "meta.json"), stored.text);
    remove_if_present(join_path(dir, stored.stale_sidecar));
    // The parent's marker names the stored class; it only changes when a uniform value becomes
    // a stack or back (row-by-row writes leave this level's meta.json alone).
    const Entry* current = peek(key);
    const bool same_class = current != nullptr && current->is_non_tensor() &&
                            current->non_tensor().is_stack() == value.is_stack();
    if (!same_class) rewrite_marker(k, stored.marker);
  }
  TableBackend::insert_or_assign(key, Entry(value));
}

void MemmapLevel::rewrite_marker(const std::string& key, const char* marker_class) {
  rewrite_meta_entry(key, json::Value(json::Object{{"type", marker_class}}));
}

void MemmapLevel::rewrite_meta_entry(const std::string& key, json::Value value) {
  // Every other field of this level's meta.json is kept as it was written.
  const std::string meta_path = join_path(path_, "meta.json");
  json::Value meta;
  try {
    meta = json::parse(read_text_file(meta_path), meta_path);
  } catch (const ValueError& e) {
    TD_THROW(StorageError, "malformed meta.json: ", e.message());
  }
  TD_CHECK(meta.is_object(), StorageError, meta_path, ": malformed meta.json: expected an object");
  const json::Value* current = meta.find(key);
  if (current != nullptr && *current == value) return;
  json::Object& fields = meta.mutable_object();
  bool replaced = false;
  for (auto& [name, field] : fields) {
    if (name == key) {
      field = value;
      replaced = true;
    }
  }
  if (!replaced) {
    // Entries come before the reserved fields, as Python's writer orders them.
    auto at = std::find_if(fields.begin(), fields.end(), [](const auto& f) {
      return is_reserved_meta_key(f.first) || (f.first == "names" && f.second.is_array());
    });
    fields.insert(at, {key, std::move(value)});
  }
  write_text_file(meta_path, meta.dump_stdlib());
}

}  // namespace tensordict
