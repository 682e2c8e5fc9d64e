#pragma once
// The dtypes tensordict names and stores: one table for repr ("torch.float32"), the stored
// formats (meta.json, consolidated metadata), typed-field messages ("float32") and tdgen's
// schema dtypes. The X-macro is dependency-free, so the generator shares it without LibTorch.

#include <optional>
#include <string>
#include <string_view>

/// _(c10 enumerator, Python name): every dtype Python tensordict stores and loads back.
#define TENSORDICT_FORALL_DTYPES(_)                                                               \
  _(kBool, "bool") _(kByte, "uint8") _(kChar, "int8") _(kShort, "int16") _(kInt, "int32")          \
  _(kLong, "int64") _(kHalf, "float16") _(kFloat, "float32") _(kDouble, "float64")                \
  _(kBFloat16, "bfloat16") _(kComplexHalf, "complex32") _(kComplexFloat, "complex64")              \
  _(kComplexDouble, "complex128")

#ifndef TENSORDICT_DTYPE_NAMES_ONLY
#include <c10/core/ScalarType.h>

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
#endif
