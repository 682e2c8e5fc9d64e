#include "backends/consolidated/metadata_layout.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>

#include "core/padding.h"

namespace tensordict {
namespace consolidated {

namespace {

// Runs are worth it up to this many (the ops walk them per call, as they do a tree's storages).
constexpr size_t kMostFlats = 8;

}  // namespace

// Where the leaves of `meta` (and of its nested levels) lie in the storage; false when a level is
// a lazy stack or an entry is malformed (fill_level then names it).
bool LeafFlats::collect(const json::Value& meta, std::vector<Leaf>& leaves) {
  if (!meta.is_object()) return false;
  const json::Value* cls = meta.find("cls");
  if (cls && cls->is_string() && cls->as_string() == kLazyClass) return false;
  if (const json::Value* entries = meta.find("leaves")) {
    if (!entries->is_object()) return false;
    for (const auto& [key, spec] : entries->as_object()) {
      if (!spec.is_array() || spec.as_array().size() < 5) return false;
      const auto& a = spec.as_array();
      if (!a[0].is_string() || !a[1].is_array() || !a[2].is_int()) return false;
      const auto dtype = dtype_from_torch_name(a[0].as_string());
      if (!dtype) return false;
      int64_t numel = 1;
      for (const json::Value& size : a[1].as_array()) {
        if (!size.is_int() || size.as_int() < 0) return false;
        numel *= size.as_int();
      }
      leaves.push_back(Leaf{a[2].as_int(), numel * static_cast<int64_t>(c10::elementSize(*dtype)), *dtype, 0});
    }
  }
  for (const auto& [key, value] : meta.as_object()) {
    if (!is_metadata_field(key) && !collect(value, leaves)) return false;
  }
  return true;
}

LeafFlats::LeafFlats(const at::Tensor& storage, const json::Value& meta) {
  std::vector<Leaf> leaves;
  if (collect(meta, leaves)) lay_out(storage, std::move(leaves));
}

LeafFlats::LeafFlats(const at::Tensor& storage, std::vector<Leaf> leaves) { lay_out(storage, std::move(leaves)); }

void LeafFlats::lay_out(const at::Tensor& storage, std::vector<Leaf> leaves) {
  if (leaves.size() < 2) return;
  const int64_t total = storage.numel();
  if (storage.dim() != 1 || storage.storage_offset() != 0 || !storage.is_contiguous() ||
      storage.scalar_type() != at::kByte)
    return;
  std::sort(leaves.begin(), leaves.end(), [](const Leaf& x, const Leaf& y) {
    return std::tie(x.start, x.bytes, x.dtype) < std::tie(y.start, y.bytes, y.dtype);
  });
  // The runs as packed_runs finds them over made leaves: [begin, end) bytes of one dtype.
  struct Run {
    int64_t begin, end;
    at::ScalarType dtype;
  };
  std::vector<Run> runs;
  int64_t covered = 0;  // the end of the last byte any leaf so far holds
  int64_t held = 0;     // bytes the leaves hold
  for (Leaf& leaf : leaves) {
    const auto item = static_cast<int64_t>(c10::elementSize(leaf.dtype));
    if (leaf.start < 0 || leaf.start % item != 0 || leaf.start + leaf.bytes > total) return;
    const bool empty = leaf.bytes == 0;
    if (leaf.start < covered && !empty) return;  // overlapping leaves: made at once, as they lie
    bool joins = false;
    if (!runs.empty() && runs.back().dtype == leaf.dtype) {
      const Run& run = runs.back();
      // Across Python's padding only where no other leaf holds those bytes (an empty leaf may
      // open a run inside another).
      joins = leaf.start <= run.end || (!empty && detail::may_read_padding(leaf.dtype) && covered <= run.end &&
                                        leaf.start - run.end < 8);
    }
    if (!joins) {
      if (runs.size() == kMostFlats || 2 * (runs.size() + 1) > leaves.size()) return;
      runs.push_back(Run{leaf.start, leaf.start, leaf.dtype});
    }
    leaf.flat = static_cast<uint32_t>(runs.size() - 1);
    runs.back().end = std::max(runs.back().end, leaf.start + leaf.bytes);
    covered = std::max(covered, leaf.start + leaf.bytes);
    held += leaf.bytes;
  }
  // (Padding after the last leaf lies outside the flat: the leaves still tile it.)
  tiles_ = runs.size() == 1 && runs[0].begin == 0 && held == runs[0].end;
  for (const Run& run : runs) {
    // One dtype tiling the storage: the whole storage, which the one-storage path takes.
    flats_.push_back(runs.size() == 1 && run.begin == 0 && run.end == total
                         ? storage.view(run.dtype)
                         : storage.narrow(0, run.begin, run.end - run.begin).view(run.dtype));
  }
  leaves_ = std::move(leaves);
}

const at::Tensor* LeafFlats::find(at::ScalarType dtype, int64_t start, int64_t bytes) const {
  const auto it = std::lower_bound(leaves_.begin(), leaves_.end(), Leaf{start, bytes, dtype, 0},
                                   [](const Leaf& x, const Leaf& y) {
                                     return std::tie(x.start, x.bytes, x.dtype) < std::tie(y.start, y.bytes, y.dtype);
                                   });
  if (it == leaves_.end() || it->start != start || it->bytes != bytes || it->dtype != dtype) return nullptr;
  return &flats_[it->flat];
}

}  // namespace consolidated
}  // namespace tensordict
