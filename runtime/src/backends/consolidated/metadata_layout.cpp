#include "backends/consolidated/metadata_layout.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>

namespace tensordict {
namespace consolidated {

// Where the leaves of `meta` (and of its nested levels) lie in the storage: (start, bytes) each,
// and their dtype; false when a level is a lazy stack, dtypes differ or an entry is malformed
// (fill_level then names it).
namespace {

bool collect_spans(const json::Value& meta, std::vector<std::pair<int64_t, int64_t>>& spans,
                   std::optional<at::ScalarType>& dtype) {
  if (!meta.is_object()) return false;
  const json::Value* cls = meta.find("cls");
  if (cls && cls->is_string() && cls->as_string() == kLazyClass) return false;
  if (const json::Value* leaves = meta.find("leaves")) {
    if (!leaves->is_object()) return false;
    for (const auto& [key, spec] : leaves->as_object()) {
      if (!spec.is_array() || spec.as_array().size() < 5) return false;
      const auto& a = spec.as_array();
      if (!a[0].is_string() || !a[1].is_array() || !a[2].is_int()) return false;
      const auto leaf_dtype = dtype_from_torch_name(a[0].as_string());
      if (!leaf_dtype || (dtype && *dtype != *leaf_dtype)) return false;
      dtype = leaf_dtype;
      int64_t numel = 1;
      for (const json::Value& size : a[1].as_array()) {
        if (!size.is_int() || size.as_int() < 0) return false;
        numel *= size.as_int();
      }
      spans.emplace_back(a[2].as_int(), numel * static_cast<int64_t>(c10::elementSize(*leaf_dtype)));
    }
  }
  for (const auto& [key, value] : meta.as_object()) {
    if (!is_metadata_field(key) && !collect_spans(value, spans, dtype)) return false;
  }
  return true;
}

}  // namespace

at::Tensor tiling_flat(const at::Tensor& storage, const json::Value& meta) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  std::optional<at::ScalarType> dtype;
  if (!collect_spans(meta, spans, dtype) || !dtype || spans.size() < 2) return at::Tensor();
  const auto item = static_cast<int64_t>(c10::elementSize(*dtype));
  const int64_t total = storage.numel();
  if (storage.dim() != 1 || storage.storage_offset() != 0 || !storage.is_contiguous() || total % item != 0)
    return at::Tensor();
  std::sort(spans.begin(), spans.end());
  int64_t end = 0;
  for (const auto& [start, bytes] : spans) {
    if (start != end) return at::Tensor();
    end += bytes;
  }
  if (end != total) return at::Tensor();
  return storage.view(*dtype);
}

}  // namespace consolidated
}  // namespace tensordict
