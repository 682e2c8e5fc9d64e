#pragma once
// consolidate(): every tensor leaf packed into one contiguous uint8 storage, leaves becoming
// views of it, plus the metadata that rebuilds the views (Python tensordict's layout, see
// docs/compatibility.md). Moving a consolidated tensordict to a device is one copy; it
// round-trips through bytes in Python's file layout [storage][metadata JSON][M as int64 LE].

#include <optional>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <tensordict/json.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

struct ConsolidateOptions {
  /// Where the storage lives; the tensordict's device (or the CPU) when absent.
  std::optional<at::Device> device;
  /// When set, written to this file (a temporary renamed over it: a killed or failed write
  /// leaves the old file whole); the result maps it copy-on-write, as Python's filename=.
  std::string filename;
  /// A CPU storage in pinned (page-locked) memory, so that `to(cuda, non_blocking=true)` is one
  /// asynchronous copy (Python's pin_memory=). Without CUDA, as pin_memory(): ordinary memory.
  bool pin_memory = false;
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
