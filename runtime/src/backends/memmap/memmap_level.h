#pragma once
// MemmapLevel: one level of a memory-mapped tensordict. Its key table is in memory (a
// TableBackend); its tensor leaves map `.memmap` files in its directory, and its non-tensor
// entries are NonTensorData / NonTensorStack directories there, rewritten when they change.

#include <string>
#include <utility>

#include <tensordict/json.h>

#include "backends/table_backend.h"

namespace tensordict {

class MemmapLevel final : public TableBackend {
 public:
  /// `writable`: the leaves map their files shared, so writes persist; a level mapped
  /// copy-on-write keeps every change, non-tensor ones included, in memory.
  MemmapLevel(c10::IntArrayRef batch_size, std::optional<at::Device> device, std::string path, size_t capacity = 0,
              bool writable = true)
      : TableBackend(batch_size, device, capacity), path_(std::move(path)), writable_(writable) {}

  const char* type_name() const override { return "TensorDict"; }
  const char* leaf_class_name() const override { return "MemoryMappedTensor"; }
  bool is_memmap() const override { return true; }
  /// Rewrites the entry's directory (and the marker in this level's meta.json when the value
  /// turns from uniform into a stack), in Python v0.14's layout, then updates the table.
  void write_non_tensor_(std::string_view key, const NonTensorData& value) override;
  /// The directory of this level.
  const std::string& path() const { return path_; }
  /// make_memmap: records the mapped leaf `key` (its file already written) in meta.json, then in
  /// the table; the lock does not apply (Python sets it with ignore_lock).
  void add_leaf(const std::string& key, const at::Tensor& mapped);
  /// make_memmap's missing levels: a new directory with its meta.json, marked in this one.
  MemmapLevel& add_child(const std::string& key);

 private:
  /// Sets the "type" marker of `key` in this level's meta.json.
  void rewrite_marker(const std::string& key, const char* marker_class);
  /// Sets `key` to `value` in this level's meta.json (new keys before the reserved fields).
  void rewrite_meta_entry(const std::string& key, json::Value value);

  std::string path_;
  bool writable_;
};

}  // namespace tensordict
