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
/// After `struct`, with the kind: objects are locked after construction (YAML `frozen: true`).
#define TD_FROZEN TDGEN_ANNOTATE("tdgen.frozen")
/// Before a field: the name of its generated accessors when the stored key (the member's name)
/// would hide a TensorDict member, as `index` or `keys` would (YAML `cpp_name:`).
#define TD_CPP_NAME(name) TDGEN_ANNOTATE("tdgen.cpp_name=" name)
/// Inside a schema struct: declares the named dim `name`, written as a dim of its fields
/// (`Tensor<float, N, 3> points;`); every field naming it has the same size (YAML `dims:`).
#define TD_DIM(name) static constexpr ::std::int64_t name TDGEN_ANNOTATE("tdgen.dim") = ::tensordict::schema::any_size

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
/// An optional field's default is its initializer, a fill value: `Tensor<float, 3> x = 0.5;`.
template <class T, int64_t... Dims>
struct Tensor {
  constexpr Tensor() = default;
  template <class Fill>
  constexpr Tensor(Fill) {}  // NOLINT: implicit, so a default reads `= 0.5`
};

/// A tensor of any dtype and shape.
using AnyTensor = Tensor<any_dtype, any_shape>;

}  // namespace schema
}  // namespace tensordict

/// `td::schema::Tensor<float, 4>` reads better in a schema than the full namespace.
namespace td {
namespace schema = ::tensordict::schema;
}  // namespace td
