#pragma once
// Reads of rows that lie in the file as they lie in memory, done with pread() straight into the
// result tensor instead of through H5Dread. HDF5's selection and type-conversion machinery
// costs about 1 us a read (a tenth of a 64-row read), and it reads scattered rows through a
// 64 KiB sieve buffer each; a slice of rows, or an index tensor's runs of rows, of a contiguous
// dataset needs none of it. The bytes are the same: only a dataset HDF5 stores contiguously in
// the file itself (not chunked, compact, external or virtual), in the memory type's exact
// layout, qualifies, and only in a file no handle of this process can write (HDF5 may hold
// written data in a dataset's sieve buffer until it is closed; a read-only file has none).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <c10/util/SmallVector.h>

#include "backends/hdf5/h5_id.h"
#include "backends/hdf5/h5_selection.h"

namespace tensordict {
namespace h5 {

/// The descriptor to pread `file` with, a file opened with the default file access properties:
/// its descriptor when that default is the sec2 driver (a POSIX file) and the file (as HDF5
/// shares it between the handles of this process) is open read-only; -1 otherwise.
int direct_read_fd(hid_t file);

/// Bytes [offset, offset + size) of the file.
struct ByteRange {
  int64_t offset = 0;
  int64_t size = 0;
};
/// Ranges whose bytes, one after the other, are a block as memory lays it out.
using ByteRanges = c10::SmallVector<ByteRange, 1>;

/// Where the elements of dataset `dataset` (of `shape`, `element_size` bytes each, stored in
/// `file_type`) lie in the file when read into `memory_type`: its whole storage, or with `sel`
/// the selected elements, provided their block is ranges of the file back to back (rows of a
/// slice: one range; an index tensor's runs of rows: one each). nullopt when it is not (strided
/// or partial inner dims, a layout other than contiguous, storage never written, a type that
/// needs converting): read through HDF5 then.
std::optional<ByteRanges> direct_ranges(hid_t dataset, hid_t file_type, hid_t memory_type,
                                        const std::vector<int64_t>& shape, int64_t element_size, const Selection* sel);

/// Reads `ranges` of the file behind `fd` one after the other into `out`. StorageError naming
/// `where` when the file ends early (truncated since it was opened) or a read fails.
void read_ranges(int fd, const ByteRanges& ranges, void* out, const std::string& where);

}  // namespace h5
}  // namespace tensordict
