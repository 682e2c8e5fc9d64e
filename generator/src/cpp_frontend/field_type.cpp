#include "field_type.h"

#include <cstdint>
#include <limits>

#include <clang/AST/ASTContext.h>
#include <clang/AST/Attr.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/TypeLoc.h>
#include <clang/Basic/TargetInfo.h>

namespace tdgen::cpp {

namespace {

constexpr int64_t kAnyShape = std::numeric_limits<int64_t>::min();  // td::schema::any_shape

const char* const kDtypeHint =
    " (expected bool, float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, std::complex<float>, "
    "std::complex<double>, or td::schema::float16, bfloat16, complex64, complex128, any_dtype)";

bool is_schema_record(const clang::CXXRecordDecl* rec, const char* name) {
  return rec && rec->getQualifiedNameAsString() == std::string("tensordict::schema::") + name;
}

bool is_std_record(const clang::CXXRecordDecl* rec, const char* name) {
  return rec && rec->isInStdNamespace() && rec->getName() == name;
}

// The first template argument of a std:: specialization (complex<T>, basic_string<C>).
clang::QualType first_argument(const clang::CXXRecordDecl* rec) {
  const auto* spec = llvm::dyn_cast<clang::ClassTemplateSpecializationDecl>(rec);
  if (!spec || spec->getTemplateArgs().size() == 0 || spec->getTemplateArgs()[0].getKind() != clang::TemplateArgument::Type)
    return {};
  return spec->getTemplateArgs()[0].getAsType().getCanonicalType();
}

// Where the `index`-th template argument of the field's type is written (the type's start when
// the type is spelled through an alias).
clang::SourceLocation argument_location(const clang::FieldDecl& field, unsigned index) {
  const clang::TypeSourceInfo* info = field.getTypeSourceInfo();
  if (!info) return field.getLocation();
  clang::TypeLoc loc = info->getTypeLoc().getUnqualifiedLoc();
  if (auto elaborated = loc.getAs<clang::ElaboratedTypeLoc>()) loc = elaborated.getNamedTypeLoc();
  if (auto spec = loc.getAs<clang::TemplateSpecializationTypeLoc>()) {
    if (index < spec.getNumArgs()) return spec.getArgLoc(index).getLocation();
  }
  return info->getTypeLoc().getBeginLoc();
}

// The name of the TD_DIM the `index`-th template argument of the field's type is written as
// (`Tensor<float, N, 3>`), or "". Only the spelling shows it: through an alias, a named dim is a
// dim of any size.
std::string named_dim(const clang::FieldDecl& field, unsigned index) {
  const clang::TypeSourceInfo* info = field.getTypeSourceInfo();
  if (!info) return "";
  clang::TypeLoc loc = info->getTypeLoc().getUnqualifiedLoc();
  if (auto elaborated = loc.getAs<clang::ElaboratedTypeLoc>()) loc = elaborated.getNamedTypeLoc();
  auto spec = loc.getAs<clang::TemplateSpecializationTypeLoc>();
  if (!spec || index >= spec.getNumArgs()) return "";
  const clang::TemplateArgumentLoc written = spec.getArgLoc(index);
  const clang::TemplateArgument& arg = written.getArgument();
  if (arg.getKind() != clang::TemplateArgument::Expression) return "";
  const auto* ref = llvm::dyn_cast<clang::DeclRefExpr>(arg.getAsExpr()->IgnoreParenImpCasts());
  const auto* var = ref ? llvm::dyn_cast<clang::VarDecl>(ref->getDecl()) : nullptr;
  if (!var) return "";
  for (const std::string& a : tdgen_annotations(*var))
    if (a == "tdgen.dim") return var->getNameAsString();
  return "";
}

// The dtype named by a Tensor's element type; `any` for td::schema::any_dtype.
// The dtype of a builtin number type: sizes checked (an `int` of 32 bits...). A 64-bit `long` or
// `long long` is int64 when `any_64_bit_long`; otherwise only the one int64_t names.
std::optional<Dtype> builtin_dtype(const clang::BuiltinType& builtin, uint64_t bits, bool any_64_bit_long,
                                   const clang::ASTContext& context) {
  switch (builtin.getKind()) {
    case clang::BuiltinType::Bool: return Dtype::kBool;
    case clang::BuiltinType::Float: return Dtype::kFloat;
    case clang::BuiltinType::Double: return Dtype::kDouble;
    case clang::BuiltinType::SChar: return Dtype::kChar;
    case clang::BuiltinType::UChar: return Dtype::kByte;
    case clang::BuiltinType::Short: return bits == 16 ? std::optional<Dtype>(Dtype::kShort) : std::nullopt;
    case clang::BuiltinType::Int: return bits == 32 ? std::optional<Dtype>(Dtype::kInt) : std::nullopt;
    case clang::BuiltinType::Long:
    case clang::BuiltinType::LongLong: {
      if (bits != 64) return std::nullopt;
      if (any_64_bit_long) return Dtype::kLong;
      const clang::TargetInfo::IntType int64 = context.getTargetInfo().getInt64Type();
      const bool is_int64 = builtin.getKind() == clang::BuiltinType::Long ? int64 == clang::TargetInfo::SignedLong
                                                                          : int64 == clang::TargetInfo::SignedLongLong;
      return is_int64 ? std::optional<Dtype>(Dtype::kLong) : std::nullopt;
    }
    default: return std::nullopt;
  }
}

std::optional<Dtype> element_dtype(clang::QualType t, const clang::ASTContext& context, bool& any, bool& known) {
  known = true;
  any = false;
  t = t.getCanonicalType().getUnqualifiedType();
  if (const auto* builtin = t->getAs<clang::BuiltinType>()) {
    std::optional<Dtype> d = builtin_dtype(*builtin, context.getTypeSize(t), /*any_64_bit_long=*/true, context);
    known = d.has_value();
    return d;
  }
  const clang::CXXRecordDecl* rec = t->getAsCXXRecordDecl();
  if (is_schema_record(rec, "float16")) return Dtype::kHalf;
  if (is_schema_record(rec, "bfloat16")) return Dtype::kBFloat16;
  if (is_schema_record(rec, "complex64")) return Dtype::kComplexFloat;
  if (is_schema_record(rec, "complex128")) return Dtype::kComplexDouble;
  if (is_schema_record(rec, "any_dtype")) {
    any = true;
    return std::nullopt;
  }
  if (is_std_record(rec, "complex")) {
    const clang::QualType part = first_argument(rec);
    if (!part.isNull() && part->isSpecificBuiltinType(clang::BuiltinType::Float)) return Dtype::kComplexFloat;
    if (!part.isNull() && part->isSpecificBuiltinType(clang::BuiltinType::Double)) return Dtype::kComplexDouble;
  }
  known = false;
  return std::nullopt;
}

// A plain member's element dtype: the numbers and bool whose C++ type LibTorch maps to a dtype
// (c10::CppTypeToScalarType, which tensordict::StructLayout uses): no `char`, no unsigned type
// but uint8_t, and for 64 bits only the type int64_t names.
std::optional<Dtype> plain_element_dtype(clang::QualType t, const clang::ASTContext& context) {
  t = t.getCanonicalType().getUnqualifiedType();
  const auto* builtin = t->getAs<clang::BuiltinType>();
  if (builtin == nullptr) return std::nullopt;
  return builtin_dtype(*builtin, context.getTypeSize(t), /*any_64_bit_long=*/false, context);
}

const char* const kPlainHint =
    " (a plain member is a bool, int8_t, uint8_t, int16_t, int32_t, int64_t, float or double, or a fixed-size "
    "array of them: a C array or std::array)";

// The field as a plain member: arrays (C arrays and std::array, nested) give the event shape,
// their element the dtype. Fills `out.plain*`.
void plain_member(const clang::FieldDecl& field, const clang::ASTContext& context, const std::string& written,
                  FieldType& out) {
  clang::QualType t = field.getType().getCanonicalType();
  std::vector<int64_t> dims;
  bool is_const = t.isConstQualified() || t.isVolatileQualified();
  while (true) {
    if (const clang::ConstantArrayType* array = context.getAsConstantArrayType(t)) {
      dims.push_back(static_cast<int64_t>(array->getSize().getZExtValue()));
      t = array->getElementType().getCanonicalType();
    } else if (const clang::CXXRecordDecl* rec = t->getAsCXXRecordDecl(); is_std_record(rec, "array")) {
      const auto* spec = llvm::dyn_cast<clang::ClassTemplateSpecializationDecl>(rec);
      if (!spec || spec->getTemplateArgs().size() != 2 ||
          spec->getTemplateArgs()[0].getKind() != clang::TemplateArgument::Type ||
          spec->getTemplateArgs()[1].getKind() != clang::TemplateArgument::Integral)
        break;
      dims.push_back(spec->getTemplateArgs()[1].getAsIntegral().getExtValue());
      t = spec->getTemplateArgs()[0].getAsType().getCanonicalType();
    } else {
      break;
    }
    is_const = is_const || t.isConstQualified() || t.isVolatileQualified();
  }
  if (dims.empty() && !t->isBuiltinType()) return;  // Plain::No
  out.plain_error_location = field.getTypeSpecStartLoc().isValid() ? field.getTypeSpecStartLoc() : field.getLocation();
  const std::optional<Dtype> dtype = plain_element_dtype(t, context);
  out.plain = Plain::Bad;
  if (!dtype) {
    out.plain_error = "field '" + field.getNameAsString() + "' has the unsupported type '" + written + "'" + kPlainHint;
    return;
  }
  for (int64_t d : dims) {
    if (d == 0) {
      out.plain_error = "field '" + field.getNameAsString() + "' is an array of no element: a plain member's arrays "
                        "need at least one";
      return;
    }
  }
  if (is_const) {
    out.plain_error = "field '" + field.getNameAsString() + "' is const or volatile: to_struct_array writes every "
                      "member of a plain-data struct";
    return;
  }
  out.plain = Plain::Yes;
  out.plain_dtype = *dtype;
  out.plain_shape = std::move(dims);
}

void tensor_field(const clang::FieldDecl& field, const clang::ClassTemplateSpecializationDecl& spec,
                  const clang::ASTContext& context, FieldType& out) {
  const clang::TemplateArgumentList& args = spec.getTemplateArgs();
  bool any = false, known = false;
  out.dtype = element_dtype(args[0].getAsType(), context, any, known);
  if (!known) {
    out.error = "unknown dtype '" + args[0].getAsType().getCanonicalType().getAsString() + "'" + kDtypeHint;
    out.error_location = argument_location(field, 0);
    return;
  }
  std::vector<int64_t> dims;
  if (args.size() > 1) {
    for (const clang::TemplateArgument& dim : args[1].pack_elements()) dims.push_back(dim.getAsIntegral().getExtValue());
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::string name = named_dim(field, static_cast<unsigned>(i + 1));
    if (name.empty()) continue;
    out.dim_names.resize(dims.size());
    out.dim_names[i] = name;
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == kAnyShape && dims.size() > 1) {
      out.error = "td::schema::any_shape stands for the whole event shape: it cannot be one dim among others";
      out.error_location = argument_location(field, static_cast<unsigned>(i + 1));
      return;
    }
    if (dims[i] < -1 && dims[i] != kAnyShape) {
      out.error = "event shape sizes must be >= 0, or td::schema::any_size; got " + std::to_string(dims[i]);
      out.error_location = argument_location(field, static_cast<unsigned>(i + 1));
      return;
    }
  }
  if (dims.size() == 1 && dims[0] == kAnyShape) return;  // any shape
  out.shape = std::move(dims);
}

}  // namespace

std::string tensor_spelling(Dtype dtype, const std::vector<int64_t>& shape) {
  const char* element = "float";
  switch (dtype) {
    case Dtype::kBool: element = "bool"; break;
    case Dtype::kDouble: element = "double"; break;
    case Dtype::kChar: element = "int8_t"; break;
    case Dtype::kByte: element = "uint8_t"; break;
    case Dtype::kShort: element = "int16_t"; break;
    case Dtype::kInt: element = "int32_t"; break;
    case Dtype::kLong: element = "int64_t"; break;
    default: break;
  }
  std::string out = std::string("td::schema::Tensor<") + element;
  for (int64_t d : shape) out += ", " + std::to_string(d);
  return out + ">";
}

std::vector<std::string> tdgen_annotations(const clang::Decl& decl) {
  std::vector<std::string> out;
  for (const auto* attr : decl.specific_attrs<clang::AnnotateAttr>()) {
    const llvm::StringRef text = attr->getAnnotation();
    if (text.startswith("tdgen.")) out.push_back(text.str());
  }
  return out;
}

std::optional<ClassKind> marked_kind(const clang::Decl& decl) {
  for (const std::string& a : tdgen_annotations(decl)) {
    if (a == "tdgen.kind=tensorclass") return ClassKind::TensorClass;
    if (a == "tdgen.kind=typed_tensordict") return ClassKind::TypedTensorDict;
  }
  return std::nullopt;
}

FieldType classify_field(const clang::FieldDecl& field, const clang::ASTContext& context) {
  FieldType out;
  clang::PrintingPolicy policy = context.getPrintingPolicy();
  policy.SuppressTagKeyword = true;
  const std::string written = field.getType().getAsString(policy);
  auto unsupported = [&](const std::string& why) {
    out.error = "field '" + field.getNameAsString() + "' has the unsupported type '" +
                written + "'" + why;
    out.error_location = field.getTypeSpecStartLoc().isValid() ? field.getTypeSpecStartLoc() : field.getLocation();
    return out;
  };
  if (field.isBitField()) return unsupported(": a bit-field");
  plain_member(field, context, written, out);
  const clang::QualType type = field.getType().getCanonicalType().getUnqualifiedType();
  const char* hint =
      " (a field is a td::schema::Tensor<T, dims...>, a schema struct, in a tensorclass std::string, int64_t, "
      "double or bool, or in a plain-data struct a number, a bool or a fixed-size array of them)";
  // A plain member, which only a plain-data struct reads (the collector decides).
  auto plain_only = [&]() {
    if (out.plain != Plain::Yes) return unsupported(hint);
    out.needs_plain_struct = true;
    return out;
  };
  if (const auto* builtin = type->getAs<clang::BuiltinType>()) {
    if (builtin->getKind() == clang::BuiltinType::Bool) {
      out.kind = FieldKind::Bool;
      return out;
    }
    if (builtin->getKind() == clang::BuiltinType::Double) {
      out.kind = FieldKind::Float;
      return out;
    }
    if (builtin->isSignedInteger() && context.getTypeSize(type) == 64) {
      out.kind = FieldKind::Int;
      return out;
    }
    return plain_only();
  }
  const clang::CXXRecordDecl* rec = type->getAsCXXRecordDecl();
  if (rec == nullptr) return plain_only();
  if (const auto* spec = llvm::dyn_cast<clang::ClassTemplateSpecializationDecl>(rec)) {
    if (spec->getSpecializedTemplate()->getQualifiedNameAsString() == "tensordict::schema::Tensor") {
      tensor_field(field, *spec, context, out);
      return out;
    }
  }
  if (is_std_record(rec, "basic_string")) {
    const clang::QualType ch = first_argument(rec);
    if (!ch.isNull() && ch->isCharType()) {
      out.kind = FieldKind::String;
      return out;
    }
  }
  if (rec->hasDefinition() && marked_kind(*rec->getDefinition())) {
    out.kind = FieldKind::Nested;
    out.nested = rec->getDefinition();
    return out;
  }
  if (!rec->isInStdNamespace() && rec->getQualifiedNameAsString().rfind("tensordict::", 0) != 0) {
    out.error = "field '" + field.getNameAsString() + "' has the type '" + written +
                "', which is not a schema struct: mark its declaration TD_TENSORCLASS or TD_TYPED_TENSORDICT";
    out.error_location = field.getTypeSpecStartLoc().isValid() ? field.getTypeSpecStartLoc() : field.getLocation();
    return out;
  }
  return plain_only();
}

FieldInit field_default(const clang::FieldDecl& field, const clang::ASTContext& context) {
  FieldInit out;
  const clang::Expr* init = field.getInClassInitializer();
  if (init == nullptr) return out;
  out.location = init->getBeginLoc();
  // Through the conversion to the field's type: the marker Tensor's or std::string's
  // constructor, whose first argument is the value as written.
  const clang::Expr* e = init->IgnoreImplicit();
  while (true) {
    if (const auto* construct = llvm::dyn_cast<clang::CXXConstructExpr>(e)) {
      if (construct->getNumArgs() == 0) break;
      e = construct->getArg(0)->IgnoreImplicit();
    } else if (const auto* cast = llvm::dyn_cast<clang::CXXFunctionalCastExpr>(e)) {
      e = cast->getSubExpr()->IgnoreImplicit();
    } else if (const auto* list = llvm::dyn_cast<clang::InitListExpr>(e)) {
      if (list->getNumInits() != 1) break;
      e = list->getInit(0)->IgnoreImplicit();
    } else {
      break;
    }
  }
  DefaultValue d;
  if (const auto* text = llvm::dyn_cast<clang::StringLiteral>(e->IgnoreParens())) {
    if (text->getCharByteWidth() != 1) {
      out.error = "the default of field '" + field.getNameAsString() + "' must be a narrow string literal";
      return out;
    }
    d.kind = DefaultValue::Kind::String;
    d.text = text->getString().str();
    out.value = d;
    return out;
  }
  const clang::QualType type = e->getType().getCanonicalType();
  clang::Expr::EvalResult result;
  if (e->isValueDependent() || !e->EvaluateAsRValue(result, context) ||
      !(type->isBooleanType() || type->isIntegerType() || type->isRealFloatingType())) {
    out.error = "the default of field '" + field.getNameAsString() +
                "' must be a constant number, true/false or a string literal";
    return out;
  }
  if (type->isBooleanType()) {
    d.kind = DefaultValue::Kind::Bool;
    d.boolean = result.Val.getInt().getBoolValue();
  } else if (type->isIntegerType()) {
    const llvm::APSInt& value = result.Val.getInt();
    if (value.isUnsigned() ? value.getActiveBits() > 63 : value.getMinSignedBits() > 64) {
      out.error = "the default of field '" + field.getNameAsString() + "' does not fit in int64_t";
      return out;
    }
    d.kind = DefaultValue::Kind::Int;
    d.integer = value.getExtValue();
  } else {
    llvm::APFloat value = result.Val.getFloat();
    bool lost = false;
    value.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
    d.kind = DefaultValue::Kind::Float;
    d.number = value.convertToDouble();
  }
  out.value = d;
  return out;
}

}  // namespace tdgen::cpp
