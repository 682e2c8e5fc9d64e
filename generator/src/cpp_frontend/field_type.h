#pragma once
// What a schema struct's field type means: a td::schema::Tensor<T, Dims...> (dtype and event
// shape), a nested schema struct, a non-tensor value (std::string, int64_t, double, bool), a plain
// member (a number, bool or fixed-size array of them: a tensor field of a plain-data struct), or
// nothing tdgen supports. Works on canonical types, so aliases and constexpr dims resolve as the
// compiler resolves them.

#include <optional>
#include <string>
#include <vector>

#include <clang/AST/Decl.h>
#include <clang/AST/DeclCXX.h>

#include <tdgen/ir.h>

namespace tdgen::cpp {

/// The schema kind a struct's markers give it; nullopt for an unmarked struct.
std::optional<ClassKind> marked_kind(const clang::Decl& decl);

/// The tdgen.* annotations on `decl` ("tdgen.optional", "tdgen.kind=tensorclass", ...).
std::vector<std::string> tdgen_annotations(const clang::Decl& decl);

/// What a field is as a plain member (a number, a bool, or a fixed-size array of them): only the
/// fields of a plain-data struct are read that way (schema_collector.cpp decides which structs
/// are plain data).
enum class Plain {
  No,   // not a number or array: a marker Tensor, std::string, a struct, a pointer, ...
  Yes,  // a plain member: `plain_dtype`, `plain_shape`
  Bad,  // a number or array that cannot be a plain member: `plain_error`
};

struct FieldType {
  FieldKind kind = FieldKind::Tensor;
  std::optional<Dtype> dtype;
  std::optional<std::vector<int64_t>> shape;
  /// Per dim of `shape`, the name of the TD_DIM it is written as, or ""; empty when none is.
  std::vector<std::string> dim_names;
  /// Nested fields: the schema struct.
  const clang::CXXRecordDecl* nested = nullptr;
  /// Empty when the type is supported; else the error and where it points.
  std::string error;
  clang::SourceLocation error_location;
  /// The field as a plain member (`float pos[3]`: float32, [3]). A bool, int64_t or double
  /// scalar is also a non-tensor field above (`kind`), which a struct that is not plain data
  /// reads it as; any other plain member has no meaning there (`needs_plain_struct`).
  Plain plain = Plain::No;
  Dtype plain_dtype = Dtype::kFloat;
  std::vector<int64_t> plain_shape;
  bool needs_plain_struct = false;
  std::string plain_error;
  clang::SourceLocation plain_error_location;
};

/// `td::schema::Tensor<float, 3>`: how a plain member of `dtype` and `shape` is written as a
/// tensor field (for messages).
std::string tensor_spelling(Dtype dtype, const std::vector<int64_t>& shape);

/// Classifies `field`'s type.
FieldType classify_field(const clang::FieldDecl& field, const clang::ASTContext& context);

/// A field's default: its in-class initializer (`Tensor<float, 3> x = 0.5;`, `std::string s =
/// "a";`), read through the conversion to the field's type so it keeps the kind it is written
/// with. nullopt without an initializer; `error` set when it is not a constant tdgen can store.
struct FieldInit {
  std::optional<DefaultValue> value;
  clang::SourceLocation location;
  std::string error;
};
FieldInit field_default(const clang::FieldDecl& field, const clang::ASTContext& context);

}  // namespace tdgen::cpp
