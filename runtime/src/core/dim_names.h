#pragma once
// Batch-dim names (Python's `names`) as operations carry them: the rules Python v0.14 applies
// after indexing, shape operations, stack and cat, in one place.

#include <cstdint>

#include <c10/util/ArrayRef.h>

#include <tensordict/tensor_dict_base.h>

namespace tensordict {
class BatchIndex;
class TensorDict;
namespace detail {

/// True when `names` names at least one dim.
bool any_named(const DimNames& names);
/// Sets `names` on `level` (empty when none is named) and, below it, on every nested level as
/// its leading names, keeping a nested level's own names for its extra dims. With `erase`, nested
/// levels lose all their names (Python's _erase_names).
void assign_names(TensorDictBase& level, const DimNames& names, bool erase = false);
/// `level.snapshot()` with `level`'s names at every level that has some (a backend's snapshot
/// builds new levels, which know nothing of the names the handle set on the backend's).
TensorDict named_snapshot(const TensorDictBase& level);
/// `level`'s names padded to its batch dims (nullopt for each dim when none is set).
DimNames names_of(const TensorDictBase& level);
/// Names after `td[index]` (Python's _get_names_idx): an integer drops its dim's name, a slice
/// keeps it, None and a scalar bool add an unnamed dim, the first index tensor repeats its dim's
/// name over its dims (later ones drop theirs), a mask alone leaves one unnamed dim.
DimNames names_after_index(const DimNames& names, const BatchIndex& index);
/// Names after a rearrangement (permute, transpose, squeeze, unsqueeze): dim j takes the name of
/// old dim source[j]; -1 is a new, unnamed dim.
DimNames names_after_rearrange(const DimNames& names, c10::IntArrayRef source);

}  // namespace detail
}  // namespace tensordict
