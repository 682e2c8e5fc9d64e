#pragma once
// Non-tensor values in an HDF5 file, as h5py stores them: strings as variable-length UTF-8
// (scalars, or arrays shaped like the batch for one value per element), numbers and bools as
// numpy scalars in opaque types, other JSON values as their text marked "json".

#include <string>
#include <vector>

#include <c10/util/ArrayRef.h>

#include <tensordict/non_tensor.h>

#include "backends/hdf5/h5_objects.h"

namespace tensordict {
namespace h5 {

std::vector<std::string> read_strings(const H5File& f, const std::string& path, const Dataset& d);
/// The non-tensor entry `path` of a level whose batch size is `batch`.
NonTensorData read_non_tensor(const H5File& f, const std::string& path, const Dataset& d, c10::IntArrayRef batch);
void write_non_tensor_stack(const H5File& f, const std::string& path, const NonTensorData& data,
                            const Dataset* existing);
bool holds_stack_like(const Dataset& d, const NonTensorData& data);
/// Creates the dataset `path` holding `data`.
void write_non_tensor_dataset(const H5File& f, const std::string& path, const NonTensorData& data);

}  // namespace h5
}  // namespace tensordict
