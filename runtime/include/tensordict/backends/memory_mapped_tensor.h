#pragma once
// MemoryMappedTensor: a CPU tensor whose storage is a file mapped with mmap(2). Writable files
// are mapped MAP_SHARED (writes land in the file); read-only files are mapped MAP_PRIVATE
// (copy-on-write, writes stay in memory). Mapping is lazy: pages are read when touched.
// The file holds the raw C-order bytes, no header (the `.memmap` files of Python tensordict).

#include <optional>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace tensordict {

class MemoryMappedTensor {
 public:
  /// Writes `tensor`'s bytes to `filename` (created or overwritten; with !existsok an existing
  /// file is a StorageError) and maps it. A tensor already mapped from `filename` is reused
  /// without a copy; one mapped from another file is copied only with `copy_existing`.
  static MemoryMappedTensor from_tensor(const at::Tensor& tensor, const std::string& filename,
                                        bool existsok = true, bool copy_existing = false);
  /// A zero-filled file of `shape` x `dtype`, mapped.
  static MemoryMappedTensor zeros(c10::IntArrayRef shape, at::ScalarType dtype,
                                  const std::string& filename, bool existsok = true);
  /// Same as zeros: a fresh file reads as zeros (sparse until written).
  static MemoryMappedTensor empty(c10::IntArrayRef shape, at::ScalarType dtype,
                                  const std::string& filename, bool existsok = true);
  /// Maps the first numel*itemsize bytes of an existing file (extra bytes are ignored).
  /// StorageError when the file is missing or shorter than that. With `writable` the mapping is
  /// shared when the file can be opened for writing, and private otherwise.
  static MemoryMappedTensor from_filename(const std::string& filename, at::ScalarType dtype,
                                          c10::IntArrayRef shape, bool writable = true);

  /// The file a tensor's storage is mapped from, when the tensor covers a whole mapping made by
  /// this class (a view of part of it is not "file-backed": copying it writes a new file).
  static std::optional<std::string> filename_of(const at::Tensor& tensor);

  const at::Tensor& tensor() const { return tensor_; }
  operator const at::Tensor&() const { return tensor_; }
  /// The absolute path of the backing file.
  const std::string& filename() const { return filename_; }
  /// True when writes to the tensor reach the file (MAP_SHARED).
  bool is_shared() const { return shared_; }

 private:
  MemoryMappedTensor(at::Tensor tensor, std::string filename, bool shared)
      : tensor_(std::move(tensor)), filename_(std::move(filename)), shared_(shared) {}

  at::Tensor tensor_;
  std::string filename_;
  bool shared_ = true;
};

}  // namespace tensordict
