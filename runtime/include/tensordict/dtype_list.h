#pragma once
// The dtypes tensordict names and stores, as an X-macro with no dependency, so that the runtime
// (tensordict/dtype.h) and tdgen's schema dtypes share one table.

/// _(c10 enumerator, Python name): every dtype Python tensordict stores and loads back.
#define TENSORDICT_FORALL_DTYPES(_)                                                               \
  _(kBool, "bool") _(kByte, "uint8") _(kChar, "int8") _(kShort, "int16") _(kInt, "int32")          \
  _(kLong, "int64") _(kHalf, "float16") _(kFloat, "float32") _(kDouble, "float64")                \
  _(kBFloat16, "bfloat16") _(kComplexHalf, "complex32") _(kComplexFloat, "complex64")              \
  _(kComplexDouble, "complex128")
