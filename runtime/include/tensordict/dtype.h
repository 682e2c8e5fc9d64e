#pragma once
// Names of dtypes: repr ("torch.float32"), the stored formats (meta.json, consolidated
// metadata) and typed-field messages ("float32") all read the one table of dtype_list.h.

#include <optional>
#include <string>
#include <string_view>

#include <c10/core/ScalarType.h>

#include <tensordict/dtype_list.h>

namespace tensordict {

/// Python's spelling of `dtype`: "torch.float32". Dtypes outside the table get
/// "torch.<c10 name>".
std::string torch_dtype_name(c10::ScalarType dtype);
/// "float32": the name without "torch.", as schemas and typed-field messages spell it.
std::string short_dtype_name(c10::ScalarType dtype);
/// The dtype of "torch.float32" (only the canonical names Python writes), or nullopt.
std::optional<c10::ScalarType> dtype_from_torch_name(std::string_view name);
/// True when Python tensordict stores and loads `dtype` back (memmap, consolidated, HDF5...).
bool is_storable_dtype(c10::ScalarType dtype);

}  // namespace tensordict
