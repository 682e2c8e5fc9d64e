#pragma once
// The unary leaf-by-leaf drivers, shared by the pointwise math, the comparisons' elementwise
// tests and the operators.

#include <ATen/core/Tensor.h>

#include <tensordict/function_ref.h>
#include <tensordict/tensor_dict.h>

#include "ops/leafwise.h"

namespace tensordict {
namespace ops {

/// Out of place: `foreach(leaves)` when it applies (it returns an empty list when it does not),
/// else `loop(leaf)` per leaf, which names a failing key. Keeps the lock; drops nested levels
/// left empty.
TensorDict map_unary(const TensorDict& td, const char* op, FunctionRef<at::Tensor(const at::Tensor&)> loop,
                     FunctionRef<LeafList(const LeafList&)> foreach);
/// In place: `foreach(leaves)` for floating leaves (false when it does not apply), else
/// `loop(leaf)`; copies are written back through the backend.
void map_unary_(const TensorDict& td, const char* op, FunctionRef<void(const at::Tensor&)> loop,
                FunctionRef<bool(const LeafList&)> foreach);
LeafList no_foreach(const LeafList&);
bool no_foreach_(const LeafList&);

}  // namespace ops
}  // namespace tensordict
