#pragma once
// The HDF5 types tensordict-cpp stores and reads, chosen as h5py does so that h5py and Python
// tensordict read the files: bool is an int8 enum {FALSE=0, TRUE=1}, complex numbers an {r, i}
// compound, float16 h5py's 16-bit IEEE type, strings variable-length UTF-8, and int/float/bool
// non-tensor values numpy scalars in an opaque type tagged "NUMPY:<dtype>". bfloat16, which
// numpy lacks, is its uint16 bits plus the dataset attribute kDtypeAttribute naming the dtype.

#include <string>

#include <c10/core/ScalarType.h>

#include "backends/hdf5/h5_id.h"

namespace tensordict {
namespace h5 {

/// Dataset attribute naming a dtype HDF5 has no type for ("torch.bfloat16").
constexpr const char* kDtypeAttribute = "tensordict_dtype";
/// Dataset attribute of a non-tensor value stored as its JSON text ("json").
constexpr const char* kEncodingAttribute = "tensordict_encoding";
/// Group attributes C++ writes and reads (Python ignores them): the batch size and device.
constexpr const char* kBatchSizeAttribute = "tensordict_batch_size";
constexpr const char* kDeviceAttribute = "tensordict_device";

/// The type a tensor of `dtype` is stored as (and read into: native byte order). NotImplementedError
/// for dtypes HDF5 cannot hold (quantized, complex32).
H5Id tensor_type(at::ScalarType dtype);
/// The same type, borrowed: built once per dtype and kept until the process ends, so reads and
/// writes pass it to HDF5 without taking a reference (two HDF5 calls fewer per transfer).
hid_t memory_type(at::ScalarType dtype);
/// The variable-length UTF-8 string type.
H5Id string_type();

/// What a dataset of some HDF5 type holds.
struct StoredType {
  enum class Kind { Tensor, String, Opaque, Unsupported };
  Kind kind = Kind::Unsupported;
  at::ScalarType dtype = at::kFloat;  // Tensor
  std::string tag;                    // Opaque: the numpy dtype after "NUMPY:" ("<i8")
  std::string description;            // Unsupported: what it is, for the error
};
StoredType classify(hid_t type);

}  // namespace h5
}  // namespace tensordict
