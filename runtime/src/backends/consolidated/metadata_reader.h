#pragma once
// Reading Python's consolidated metadata (docs/compatibility.md, "Consolidated") into levels
// whose leaves view one storage: what from_bytes, from_consolidated and consolidate build, with
// a StorageError naming the source for any entry that does not fit.

#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <tensordict/json.h>
#include <tensordict/tensor_dict.h>

#include "backends/consolidated/metadata_layout.h"

namespace tensordict {

class LevelBuilder;

namespace consolidated {

/// The class of one level of the metadata: TensorDict or LazyStackedTensorDict.
const std::string& level_class(const json::Value& meta, const std::string& source);
/// The batch size of one TensorDict level of the metadata.
std::vector<int64_t> level_batch(const json::Value& meta, const std::string& source);
/// The level's batch-dim names from cls_metadata.names (Python writes one string or null per
/// dim); empty when there are none or the list does not fit the batch.
DimNames level_names(const json::Value& meta, size_t batch_dims);
/// How many entries a level of the metadata (an object) lists: its leaves, non-tensor data and
/// nested levels, what a builder reserves for.
size_t entry_count(const json::Value& meta);
/// Adds one level's entries, whose leaves view `storage`, to `out` (the root's table or a nested
/// level). With `flats` the leaves are made when read (Note [Lazy leaves]).
void fill_level(LevelBuilder& out, const at::Tensor& storage, const LeafFlats* flats, const json::Value& meta,
                std::optional<at::Device> device, const std::string& source);
/// A lazy stack level's members: `meta`'s children "0", "1", ..., "n-1" (n children), found in
/// one pass; nullptr where a number is missing (another key takes its place).
std::vector<const json::Value*> lazy_members(const json::Value& meta);
/// A lazy stack level: its members are the children "0", "1", ..., "n-1" (Python reads them in
/// that order); it holds no leaves of its own.
TensorDict build_lazy_stack(const at::Tensor& storage, const json::Value& meta, std::optional<at::Device> device,
                            const std::string& source);

}  // namespace consolidated
}  // namespace tensordict
