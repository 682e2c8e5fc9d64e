#include <tensordict/backends/memory_mapped_tensor.h>

#include <ATen/ATen.h>

#include <tensordict/errors.h>

#include "core/file_io.h"

namespace tensordict {

using namespace detail;

MemoryMappedTensor MemoryMappedTensor::from_tensor(const at::Tensor& tensor,
                                                   const std::string& filename, bool existsok,
                                                   bool copy_existing) {
  TD_CHECK(tensor.defined(), ValueError, "cannot memory-map an undefined tensor to ", filename);
  const std::string path = absolute_path(filename);
  if (already_maps(tensor, path, copy_existing)) return MemoryMappedTensor(tensor, path, true);
  at::Tensor src = tensor.detach().to(at::kCPU).contiguous();
  // A source that maps the destination file would be overwritten while it is read.
  if (storage_maps(src, path)) src = src.clone();
  write_file(path, src.data_ptr(), static_cast<size_t>(src.numel()) * src.element_size(), existsok);
  bool shared = true;
  at::Tensor mapped = map_file(path, src.scalar_type(), src.sizes(), true, &shared);
  return MemoryMappedTensor(std::move(mapped), path, shared);
}

MemoryMappedTensor MemoryMappedTensor::zeros(c10::IntArrayRef shape, at::ScalarType dtype,
                                             const std::string& filename, bool existsok) {
  const std::string path = absolute_path(filename);
  for (int64_t s : shape) TD_CHECK(s >= 0, ValueError, "negative size in shape ", shape, " for ", path);
  create_zero_file(path, static_cast<size_t>(shape_nbytes(shape, dtype, path)), existsok);
  bool shared = true;
  at::Tensor mapped = map_file(path, dtype, shape, true, &shared);
  return MemoryMappedTensor(std::move(mapped), path, shared);
}

MemoryMappedTensor MemoryMappedTensor::empty(c10::IntArrayRef shape, at::ScalarType dtype,
                                             const std::string& filename, bool existsok) {
  return zeros(shape, dtype, filename, existsok);
}

MemoryMappedTensor MemoryMappedTensor::from_filename(const std::string& filename,
                                                     at::ScalarType dtype, c10::IntArrayRef shape,
                                                     bool writable) {
  const std::string path = absolute_path(filename);
  bool shared = false;
  at::Tensor mapped = map_file(path, dtype, shape, writable, &shared);
  return MemoryMappedTensor(std::move(mapped), path, shared);
}

std::optional<std::string> MemoryMappedTensor::filename_of(const at::Tensor& tensor) {
  return mapped_filename(tensor);
}

}  // namespace tensordict
