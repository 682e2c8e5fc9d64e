#pragma once
// consolidate(): every tensor leaf packed into one contiguous uint8 storage, leaves becoming
// views of it, plus the metadata that rebuilds the views (Python tensordict's layout, see
// storage-formats.md §4). Moving a consolidated tensordict to a device is one copy; it
// round-trips through bytes in Python's file layout [storage][metadata JSON][M as int64 LE].

#include <optional>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <tensordict/json.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/tensor_dict_impl.h>

namespace tensordict {

struct ConsolidateOptions {
  /// Where the storage lives; the tensordict's device (or the CPU) when absent.
  std::optional<at::Device> device;
  /// When set, the storage and metadata are written to this file (truncated first) and the
  /// result maps it copy-on-write, as Python's consolidate(filename=...).
  std::string filename;
};

/// The backend of a consolidated tensordict: the root holds the storage and the metadata.
class ConsolidatedTensorDictImpl : public TensorDictImpl {
 public:
  ConsolidatedTensorDictImpl(c10::IntArrayRef batch_size, std::optional<at::Device> device,
                             at::Tensor storage, json::Value metadata)
      : TensorDictImpl(batch_size, device), storage_(std::move(storage)), metadata_(std::move(metadata)) {}

  /// The 1-D uint8 tensor every leaf views.
  const at::Tensor& storage() const { return storage_; }
  /// Python's metadata tree ({"cls", "non_tensors", "leaves", "cls_metadata", children...}).
  const json::Value& metadata() const { return metadata_; }

  /// A move to another device copies the storage once and rebuilds the views on it.
  TensorDict map_leaves(FunctionRef<at::Tensor(const at::Tensor&)> fn,
                        std::optional<at::Device> device) const override;

 private:
  at::Tensor storage_;
  json::Value metadata_;
};

/// Packs `td` (leaves in depth-first key order, each padded to 8 bytes). The result is locked.
/// Non-tensor stacks and sub-collections named cls/leaves/non_tensors/cls_metadata/size are
/// refused (Python cannot read them back from the metadata).
TensorDict consolidate(const TensorDict& td, const ConsolidateOptions& options = {});
/// True when `td` is the root of a consolidated tensordict.
bool is_consolidated(const TensorDict& td);
/// The storage of a consolidated tensordict (ValueError otherwise).
at::Tensor consolidated_storage(const TensorDict& td);
/// The metadata of a consolidated tensordict (ValueError otherwise).
const json::Value& consolidated_metadata(const TensorDict& td);
/// [storage][metadata JSON][M int64 LE]; consolidates first when needed (on the CPU).
std::string to_bytes(const TensorDict& td);
/// Rebuilds a consolidated tensordict from to_bytes output (the bytes are copied).
/// StorageError on a malformed buffer.
TensorDict from_bytes(std::string_view bytes);
/// Maps a file written by consolidate(filename=...) (C++ or Python) copy-on-write.
TensorDict from_consolidated(const std::string& filename);

}  // namespace tensordict
