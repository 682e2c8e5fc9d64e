#pragma once
// The HDF5 objects a PersistentTensorDict level is made of: string attributes, datasets
// (described, then read or written whole or by selection), groups, and the kind of entry an
// object is. `where` (location()) names the file and object in every error.

#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <hdf5.h>

#include <tensordict/entry.h>
#include <tensordict/function_ref.h>

#include "backends/hdf5/h5_id.h"
#include "backends/hdf5/h5_selection.h"
#include "backends/hdf5/h5_types.h"
#include "backends/hdf5/persistent_impl.h"

namespace tensordict {
namespace h5 {

struct Dataset {
  H5Id id;
  H5Id type;
  H5Id space;
  StoredType stored;
  std::vector<int64_t> shape;
};

// The object at `path`, opened once: what entry it is and, for a dataset, its description.
// Datasets of unsupported types count as tensors, so reading them raises the TypeError.
struct Object {
  EntryKind kind = EntryKind::Undefined;
  Dataset dataset;
};

/// The string attribute `name` of `obj`; nullopt when absent or not a string.
std::optional<std::string> read_string_attribute(hid_t obj, const char* name, const std::string& where);
/// Sets the string attribute `name` of `obj`, replacing any.
void write_string_attribute(hid_t obj, const char* name, const std::string& value, const std::string& where);
/// A group's batch size and device attributes.
void write_level_attributes(hid_t group, c10::IntArrayRef batch, const std::optional<at::Device>& device,
                            const std::string& where);

/// The dims of a simple dataspace.
std::vector<int64_t> space_shape(hid_t space, const std::string& where);
Dataset describe(const std::string& where, H5Id id);
const Dataset& require_readable(const H5File& f, const std::string& path, const Dataset& d);
/// The dataset `path`, described and readable (TypeError otherwise).
Dataset open_dataset(const H5File& f, const std::string& path);
/// The whole dataset; `fd` is the file's direct_fd (-1: through HDF5).
at::Tensor read_block(const std::string& where, const Dataset& d, int fd = -1);
void write_block(const std::string& where, const Dataset& d, const at::Tensor& block);
/// The elements `sel` selects; `fd` as for read_block.
at::Tensor read_selection(const std::string& where, const Dataset& d, const Selection& sel, int fd = -1);
void write_selection(const std::string& where, const Dataset& d, const Selection& sel, const at::Tensor& block);
Dataset create_dataset(const H5File& f, const std::string& path, const std::vector<int64_t>& shape,
                       at::ScalarType dtype);
/// Creates the dataset `path` holding `value` (detached, on the CPU, contiguous).
void write_tensor_dataset(const H5File& f, const std::string& path, const at::Tensor& value);
Dataset writable_tensor(const H5File& f, const std::string& path);

/// Creates the group `path` with its attributes and records its batch size.
H5Id create_group(H5File& f, const std::string& path, c10::IntArrayRef batch, const std::optional<at::Device>& device);
/// Drops the recorded batch sizes of `path` and every group below it.
void forget_batches(H5File& f, const std::string& path);

/// After a failed HDF5 call `what` on the object `path`: returns when its link is absent (no
/// entry there), else raises StorageError naming it, with HDF5's error stack.
void raise_unless_absent(const H5File& f, const std::string& path, const char* what);
H5Id open_target(const H5File& f, const std::string& path);
EntryKind dataset_kind(hid_t type);
Object open_object(const H5File& f, const std::string& path, const std::string& where);
EntryKind object_kind(const H5File& f, const std::string& path);
/// object_kind of the object `name` relative to `loc` (a group already open); `path()`, its path
/// in the file, is made only for an error.
EntryKind object_kind_at(const H5File& f, hid_t loc, const char* name, FunctionRef<std::string()> path);

}  // namespace h5
}  // namespace tensordict
