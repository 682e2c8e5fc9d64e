#pragma once
// Note [Intact runs]: a result over packed runs (Note [Packed runs], ops/packed_runs.h) nobody
// has read nor written: the next elementwise op runs once over each of its storages, without
// making its leaves, and lays its own result out the same way, as an intact result does over one
// storage (Note [Intact results]). Only trees whose leaves are all unmade qualify (a made leaf
// could have been changed through its handle), and only out of place: an in-place op, or one
// between two tensordicts, makes the leaves and finds the runs again.

#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace in_memory {

/// The storages of `td` when it is an unread result over runs (above): every level in memory,
/// as built, its leaves not made. Each storage of an integer or bool dtype holds leaf elements
/// only; a floating or complex one may also hold the image of padding. Nullopt otherwise.
std::optional<c10::SmallVector<at::Tensor, 4>> intact_runs(const TensorDictBase& td);

/// A result shaped like `like` (intact_runs found its `storages`), its leaves laid out as like's
/// over `results` (one elementwise result per storage, in the same order), made on first access.
/// (Defined in intact_result.cpp, with the frame of every intact result.)
TensorDict intact_runs_like(const TensorDictBase& like, c10::ArrayRef<at::Tensor> storages,
                            c10::ArrayRef<at::Tensor> results, bool filter_empty, bool lock);

}  // namespace in_memory
}  // namespace tensordict
