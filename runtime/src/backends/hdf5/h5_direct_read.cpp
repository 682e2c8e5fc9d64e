#include "backends/hdf5/h5_direct_read.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <tensordict/errors.h>

namespace tensordict {
namespace h5 {

int direct_read_fd(hid_t file) {
  // The default file driver is sec2 (POSIX read/write on one descriptor) unless the library was
  // configured otherwise; files opened through another driver keep going through HDF5.
  static const bool default_is_sec2 = H5Pget_driver(H5P_FILE_ACCESS_DEFAULT) == H5FD_SEC2;
  if (!default_is_sec2) return -1;
  // The intent is the shared file's: read-write when any handle of this process opened it so.
  unsigned intent = 0;
  if (H5Fget_intent(file, &intent) < 0 || (intent & H5F_ACC_RDWR) != 0) {
    H5Eclear2(H5E_DEFAULT);
    return -1;
  }
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == nullptr) {
    H5Eclear2(H5E_DEFAULT);
    return -1;
  }
  return *static_cast<const int*>(handle);
}

std::optional<ByteRanges> direct_ranges(hid_t dataset, hid_t file_type, hid_t memory_type,
                                        const std::vector<int64_t>& shape, int64_t element_size, const Selection* sel) {
  const size_t rank = shape.size();
  if (sel != nullptr && sel->start.size() != rank) return std::nullopt;
  // Row-major: the selection is whole dims after one partial dim `part` of stride 1 (its runs,
  // an index tensor's, lie back to back in the block as in the file), after dims that select one
  // position each. Offsets are computed without overflow: a corrupt file's shape can claim more
  // bytes than int64 counts.
  size_t part = rank;
  if (sel != nullptr) {
    while (part > 0 && sel->start[part - 1] == 0 && static_cast<int64_t>(sel->count[part - 1]) == shape[part - 1]) --part;
    if (part > 0) {
      --part;
      if (sel->stride[part] != 1 && sel->count[part] > 1) return std::nullopt;
      if (sel->run_starts.size() > 1 && sel->runs_dim != part) return std::nullopt;
      for (size_t i = 0; i < part; ++i) {
        if (sel->count[i] != 1) return std::nullopt;
      }
    }
  }
  int64_t first = 0, step = element_size, part_step = element_size;
  for (size_t i = rank; i-- > 0;) {
    const int64_t start = sel != nullptr && i != part ? static_cast<int64_t>(sel->start[i]) : 0;
    int64_t skipped = 0;
    if (i == part) part_step = step;
    if (__builtin_mul_overflow(start, step, &skipped) || __builtin_add_overflow(first, skipped, &first) ||
        __builtin_mul_overflow(step, shape[i], &step))
      return std::nullopt;
  }
  // HADDR_UNDEF unless the dataset is contiguous and its storage allocated in this file.
  const haddr_t base = H5Dget_offset(dataset);
  if (base == HADDR_UNDEF) {
    H5Eclear2(H5E_DEFAULT);
    return std::nullopt;
  }
  if (H5Tequal(file_type, memory_type) <= 0) return std::nullopt;
  if (__builtin_add_overflow(first, static_cast<int64_t>(base), &first)) return std::nullopt;
  ByteRanges out;
  if (part == rank) {
    // The whole dataset (no selection), or a scalar's one element: `step` bytes from its start.
    out.push_back({first, step});
    return out;
  }
  const bool runs = sel->run_starts.size() > 1;
  const size_t n = runs ? sel->run_starts.size() : 1;
  for (size_t r = 0; r < n; ++r) {
    const auto start = static_cast<int64_t>(runs ? sel->run_starts[r] : sel->start[part]);
    const auto count = static_cast<int64_t>(runs ? sel->run_counts[r] : sel->count[part]);
    ByteRange range;
    if (__builtin_mul_overflow(start, part_step, &range.offset) ||
        __builtin_add_overflow(range.offset, first, &range.offset) ||
        __builtin_mul_overflow(count, part_step, &range.size))
      return std::nullopt;
    out.push_back(range);
  }
  return out;
}

void read_ranges(int fd, const ByteRanges& ranges, void* out, const std::string& where) {
  auto* dst = static_cast<char*>(out);
  for (const ByteRange& range : ranges) {
    int64_t done = 0;
    while (done < range.size) {
      const ssize_t got = ::pread(fd, dst + done, static_cast<size_t>(range.size - done), range.offset + done);
      if (got < 0 && errno == EINTR) continue;
      TD_CHECK(got >= 0, StorageError, where, ": reading ", range.size, " bytes at offset ", range.offset,
               " failed: ", strerror(errno));
      TD_CHECK(got > 0, StorageError, where, ": the file ends before the dataset's data (", range.size,
               " bytes at offset ", range.offset, "): it was truncated");
      done += got;
    }
    dst += range.size;
  }
}

}  // namespace h5
}  // namespace tensordict
