#pragma once
// The batch size of every group of an HDF5 file, found when it is opened: a group's stored
// attribute, the root's given size, or Python's inference from the datasets.

#include <optional>
#include <string>

#include <c10/util/ArrayRef.h>

#include <tensordict/tensor_dict.h>

#include "backends/hdf5/persistent_impl.h"

namespace tensordict {
namespace h5 {

BatchSize resolve_batches(H5File& f, const std::string& path, const std::optional<BatchSize>& root_batch,
                          const BatchSize* parent, bool explicit_batch, int depth);
void check_extends_parent(const H5File& f, const std::string& path, c10::IntArrayRef batch, c10::IntArrayRef parent);
void check_extends_batch(const H5File& f, const std::string& path, c10::IntArrayRef shape, c10::IntArrayRef batch);

}  // namespace h5
}  // namespace tensordict
