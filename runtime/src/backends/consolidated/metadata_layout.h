#pragma once
// What Python's consolidated metadata says about the layout of its storage: the names of a
// level's own fields (the rest are nested levels), and whether the leaves tile the storage.

#include <string>

#include <ATen/core/Tensor.h>

#include <tensordict/json.h>

namespace tensordict {
namespace consolidated {

constexpr const char* kLazyClass = "LazyStackedTensorDict";

/// A level's own fields; every other key of a level names a nested level.
inline bool is_metadata_field(const std::string& key) {
  return key == "cls" || key == "leaves" || key == "non_tensors" || key == "cls_metadata" || key == "size";
}

/// The storage (1-D bytes) as one flat tensor of its leaves' dtype when the leaves `meta`
/// describes are all of one dtype and tile it with no padding, and no level is a lazy stack: then
/// the leaves are made when read (Note [Lazy leaves]), and the elementwise ops of a consolidated
/// tensordict nobody has read run over this storage without making them. Undefined otherwise,
/// also for a malformed entry (which the reader then names).
at::Tensor tiling_flat(const at::Tensor& storage, const json::Value& meta);

}  // namespace consolidated
}  // namespace tensordict
