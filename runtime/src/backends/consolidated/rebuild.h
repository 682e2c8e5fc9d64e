#pragma once
// The consolidated tensordict whose leaves view `storage` as `meta` (Python's consolidated
// metadata) describes: what from_bytes builds after splitting its buffer, for readers that
// receive the storage and the metadata apart (distributed's from_remote_init).

#include <string>

#include <ATen/core/Tensor.h>

#include <tensordict/json.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace detail {

/// The in-memory table of a consolidated root (its entries), or nullptr when `td` is not one.
const TensorDictBase* consolidated_table(const TensorDictBase& td);
/// StorageError naming `source` when the metadata does not fit the storage.
TensorDict rebuild_consolidated(const at::Tensor& storage, const json::Value& meta, const std::string& source);

}  // namespace detail
}  // namespace tensordict
