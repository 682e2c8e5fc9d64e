#pragma once
// Forward-mode AD and the one-kernel paths (ops/packed.h, Note [Intact results]): a tangent set
// on a leaf is carried by the per-leaf op only, and a kernel over the leaves' storage would drop
// it. Tangents exist only while a dual level is open, so the packed paths step aside then; the
// check is one uncontended lock per op.

#include <torch/csrc/autograd/forward_grad.h>

namespace tensordict {
namespace detail {

/// True while a forward-mode AD dual level is open (any leaf may carry a tangent).
inline bool forward_ad_open() { return torch::autograd::ForwardADLevel::try_get_by_idx(0) != nullptr; }

}  // namespace detail
}  // namespace tensordict
