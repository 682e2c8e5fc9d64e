#pragma once
// Views that hold each element of a tree's leaves once and no other byte, for ops that do not
// care where an element lies (a reduction over every leaf, issue 34): one view a run of leaves
// back to back (Note [Packed runs]), and where Python's padding splits a run into one a leaf,
// evenly spaced runs of one size joined again into one 2-D view ([count, run elements],
// strides [spacing, 1]) that steps over the padding without reading it.

#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include "ops/leafwise.h"

namespace tensordict {

namespace in_memory {
struct IntactRuns;
}

namespace ops {

using ElementViews = c10::SmallVector<at::Tensor, 4>;

/// The views over `leaves`. Nullopt where they would be more than half as many as the leaves,
/// a leaf is not runnable (packed_runs.h), or two leaves overlap (the per-leaf path counts their
/// shared elements twice).
std::optional<ElementViews> element_views(const LeafList& leaves);
/// The views over an intact tree's runs (in_memory::intact_runs() gave `runs`), found from its
/// records (a deferred level's from its shape) without making its leaves: the runs themselves
/// when they hold no padding. Nullopt as above.
std::optional<ElementViews> element_views(const in_memory::IntactRuns& runs);

}  // namespace ops
}  // namespace tensordict
