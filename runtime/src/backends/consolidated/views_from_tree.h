#pragma once
// consolidate()'s tree built from the tree it packed, rather than read back from the metadata it
// wrote for it: the same levels, entries, order and views as reading that metadata gives
// (metadata_reader.h), without the metadata's JSON walked a second time.

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace consolidated {

/// A leaf of the packed tree and the bytes [start, start + nbytes) of the storage it was copied to.
struct PackedLeaf {
  at::Tensor leaf;
  int64_t start;
  int64_t nbytes;
};

/// The batch-dim names of `level` as its metadata stores them and the reader gives them back:
/// none unless a dim is named.
DimNames stored_names(const TensorDictBase& level);

/// The root's table (its entries) of `source` consolidated into `storage`, whose leaves
/// `leaves` lists in the order consolidate's walk met them; std::nullopt when `source` holds a
/// lazy stack (which the metadata's reader builds).
std::optional<TensorDict> table_from_tree(const TensorDictBase& source, const at::Tensor& storage,
                                          c10::ArrayRef<PackedLeaf> leaves, std::optional<at::Device> device);

}  // namespace consolidated
}  // namespace tensordict
