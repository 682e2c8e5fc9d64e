#include <tdgen/ir.h>

namespace tdgen {

namespace {
struct DtypeInfo {
  Dtype dtype;
  const char* name;
  const char* cpp;
};
constexpr DtypeInfo kDtypes[] = {
    {Dtype::Float32, "float32", "::at::kFloat"},        {Dtype::Float64, "float64", "::at::kDouble"},
    {Dtype::Float16, "float16", "::at::kHalf"},         {Dtype::BFloat16, "bfloat16", "::at::kBFloat16"},
    {Dtype::Int8, "int8", "::at::kChar"},               {Dtype::Int16, "int16", "::at::kShort"},
    {Dtype::Int32, "int32", "::at::kInt"},              {Dtype::Int64, "int64", "::at::kLong"},
    {Dtype::UInt8, "uint8", "::at::kByte"},             {Dtype::Bool, "bool", "::at::kBool"},
    {Dtype::Complex64, "complex64", "::at::kComplexFloat"}, {Dtype::Complex128, "complex128", "::at::kComplexDouble"},
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

const char* dtype_cpp(Dtype dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.cpp;
  return "?";
}

const char* class_kind_name(ClassKind kind) {
  return kind == ClassKind::TensorClass ? "tensorclass" : "typed_tensordict";
}

}  // namespace tdgen
