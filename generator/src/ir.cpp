#include <tdgen/ir.h>

namespace tdgen {

namespace {
struct DtypeInfo {
  Dtype dtype;
  const char* name;
  const char* cpp;
};
constexpr DtypeInfo kDtypes[] = {
#define TDGEN_DTYPE_ROW(enumerator, name) {Dtype::enumerator, name, "::at::" #enumerator},
    TENSORDICT_FORALL_DTYPES(TDGEN_DTYPE_ROW)
#undef TDGEN_DTYPE_ROW
};
}  // namespace

std::string SourceLocation::str() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::optional<Dtype> parse_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

const char* dtype_name(Dtype dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  return "?";
}

bool is_floating_dtype(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat:
    case Dtype::kDouble:
    case Dtype::kHalf:
    case Dtype::kBFloat16:
    case Dtype::kComplexFloat:
    case Dtype::kComplexDouble: return true;
    default: return false;
  }
}

const char* dtype_cpp(Dtype dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.cpp;
  return "?";
}

const char* class_kind_name(ClassKind kind) {
  return kind == ClassKind::TensorClass ? "tensorclass" : "typed_tensordict";
}

}  // namespace tdgen
