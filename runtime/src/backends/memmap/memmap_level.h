#pragma once
// MemmapLevel: one level of a memory-mapped tensordict. Its key table is in memory (a
// TableBackend); its tensor leaves map `.memmap` files in its directory.

#include <string>
#include <utility>

#include "backends/table_backend.h"

namespace tensordict {

class MemmapLevel final : public TableBackend {
 public:
  MemmapLevel(c10::IntArrayRef batch_size, std::optional<at::Device> device, std::string path, size_t capacity = 0)
      : TableBackend(batch_size, device, capacity), path_(std::move(path)) {}

  const char* type_name() const override { return "TensorDict"; }
  const char* leaf_class_name() const override { return "MemoryMappedTensor"; }
  bool is_memmap() const override { return true; }
  /// The directory of this level.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tensordict
