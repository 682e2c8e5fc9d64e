#pragma once
// Markers for schemas written as annotated C++ structs (tdgen's C++ frontend,
// docs/schema-format.md). The types only describe fields; nothing here is meant to be
// instantiated at run time, and the header includes nothing heavier than <cstdint>.
//
// The annotation macros expand to `[[clang::annotate(...)]]` only while tdgen parses (it defines
// TDGEN_PARSING); in a normal build they expand to nothing, so GCC and Clang compile schema
// headers warning-free under -Wall -Wextra -Werror (GCC warns on every unknown scoped attribute).

#include <cstdint>

#if defined(TDGEN_PARSING)
#define TDGEN_ANNOTATE(text) [[clang::annotate(text)]]
#else
#define TDGEN_ANNOTATE(text)
#endif

/// After `struct`: the struct is a schema for a tensorclass (has-a TensorDict; may hold
/// non-tensor fields).
#define TD_TENSORCLASS TDGEN_ANNOTATE("tdgen.kind=tensorclass")
/// After `struct`: the struct is a schema for a typed tensordict (is-a TensorDict; tensor and
/// nested fields only).
#define TD_TYPED_TENSORDICT TDGEN_ANNOTATE("tdgen.kind=typed_tensordict")
/// After `struct`, with the kind: the namespace the generated class goes to ("a::b", or "" for
/// the global one). Without it, the struct's namespace minus a trailing `schema`.
#define TD_NAMESPACE(ns) TDGEN_ANNOTATE("tdgen.namespace=" ns)
/// Before a field: the field may be absent.
#define TD_OPTIONAL TDGEN_ANNOTATE("tdgen.optional")

namespace tensordict {
namespace schema {

/// A dim of any size (YAML's -1).
inline constexpr int64_t any_size = -1;
/// As the only dim: any event shape, any number of dims (YAML: no `shape`).
inline constexpr int64_t any_shape = INT64_MIN;

/// Element types without a C++ builtin; the others are spelled as C++ types: bool, float,
/// double, int8_t, int16_t, int32_t, int64_t, uint8_t (or std::complex<float/double>).
struct float16 {};
struct bfloat16 {};
struct complex64 {};
struct complex128 {};
/// Any element type.
struct any_dtype {};

/// A tensor field: element type T, event shape Dims (the dims after the batch dims; none: a
/// scalar per batch element). Defined, not just declared: a field's type must be complete.
template <class T, int64_t... Dims>
struct Tensor {};

/// A tensor of any dtype and shape.
using AnyTensor = Tensor<any_dtype, any_shape>;

}  // namespace schema
}  // namespace tensordict

/// `td::schema::Tensor<float, 4>` reads better in a schema than the full namespace.
namespace td {
namespace schema = ::tensordict::schema;
}  // namespace td
