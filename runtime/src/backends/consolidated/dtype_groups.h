#pragma once
// Note [Dtype groups]: consolidate lays each dtype's leaves out together, the groups in the order
// their dtypes first appear and each group's leaves in key order, so that an elementwise op over
// a consolidated tensordict of mixed dtypes is one kernel per dtype (Note [Packed runs],
// ops/packed_runs.h), where Python's key-order layout would interleave them. Each leaf keeps
// Python's padding to 8 bytes, and the metadata gives each leaf's own [start, stop), which is all
// Python's loader reads: a file or a byte string in this layout is read by either side. A
// tensordict of one dtype is laid out as Python lays it out, byte for byte.

#include <array>
#include <cstdint>

#include <c10/core/ScalarType.h>

namespace tensordict {

class TensorDictBase;

namespace consolidated {

/// A leaf of `bytes` bytes with the zero padding after it that Python's layout adds.
inline int64_t padded_bytes(int64_t bytes) { return bytes + (8 - bytes % 8) % 8; }

/// Where each leaf of one tensordict goes in its consolidated storage.
class DtypeGroups {
 public:
  /// Sizes the groups of `td`'s leaves (nested levels and lazy stacks' members included).
  explicit DtypeGroups(const TensorDictBase& td);
  /// The byte offset of the next leaf of `dtype`, which takes `padded` bytes (padded_bytes).
  int64_t place(at::ScalarType dtype, int64_t padded) {
    int64_t& next = next_[static_cast<size_t>(dtype)];
    const int64_t start = next;
    next += padded;
    return start;
  }
  /// The storage's size in bytes.
  int64_t total() const { return total_; }

 private:
  std::array<int64_t, static_cast<size_t>(at::ScalarType::NumOptions)> next_{};
  int64_t total_ = 0;
};

}  // namespace consolidated
}  // namespace tensordict
