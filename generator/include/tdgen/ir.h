#pragma once
// The intermediate representation of tdgen: what every frontend (YAML today, Clang LibTooling
// later) produces and every emitter consumes. It knows nothing about YAML or C++ syntax trees:
// a Module is a set of schema files, each declaring classes made of fields, and every entity
// carries the SourceLocation it came from so any later check can point at it.
//
// Frontends fill the structs and hand the Module to `resolve()` (sema.h), which checks it and
// fills the resolution fields; after that the Module is shared as `std::shared_ptr<const
// Module>` and never changes. See docs/generator.md.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <tensordict/dtype_list.h>

namespace tdgen {

/// Where an entity was declared: file (as given on the command line or resolved from an
/// import), 1-based line and column.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  /// "file:line:column"
  std::string str() const;
};

/// Tensor element types: the runtime's dtype table (tensordict/dtype_list.h), by c10 enumerator.
enum class Dtype : uint8_t {
#define TDGEN_DTYPE_ENUMERATOR(enumerator, name) enumerator,
  TENSORDICT_FORALL_DTYPES(TDGEN_DTYPE_ENUMERATOR)
#undef TDGEN_DTYPE_ENUMERATOR
};

/// "float32" -> Dtype::kFloat; nullopt for an unknown name.
std::optional<Dtype> parse_dtype(const std::string& name);
/// Dtype::kFloat -> "float32".
const char* dtype_name(Dtype dtype);
/// Dtype::kFloat -> "::at::kFloat".
const char* dtype_cpp(Dtype dtype);
/// True for the floating and complex dtypes (a default may be any number), false for the
/// integral ones and bool.
bool is_floating_dtype(Dtype dtype);

enum class ClassKind { TensorClass, TypedTensorDict };
const char* class_kind_name(ClassKind kind);

enum class FieldKind { Tensor, Nested, String, Int, Float, Bool };

/// A reference to a class by name, as written ("Observation" or "rl::Observation").
struct ClassRef {
  std::string name;
  SourceLocation location;
  // Filled by resolve(): index of the file in Module::files and of the class in it.
  int file_index = -1;
  int class_index = -1;
};

/// A field's default value, as written: its own kind, checked against the field by sema.
struct DefaultValue {
  enum class Kind { Bool, Int, Float, String };
  Kind kind = Kind::Int;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;
  SourceLocation location;
};

struct FieldDef {
  /// The stored key (and, without `cpp_name`, the accessor name).
  std::string name;
  SourceLocation location;
  /// The name of the generated accessors when it differs from the stored key (a key that would
  /// hide a TensorDict member, or that is no C++ identifier); empty: `name`.
  std::string cpp_name;
  SourceLocation cpp_name_location;
  FieldKind kind = FieldKind::Tensor;
  /// Tensor fields: the declared dtype; none = any dtype.
  std::optional<Dtype> dtype;
  /// Tensor fields: the event shape (dims after the batch dims), -1 = any size (and a named
  /// dim); none = any shape.
  std::optional<std::vector<int64_t>> shape;
  /// Tensor fields with named dims: per dim of `shape`, the dim's name or "" (empty when no dim
  /// is named).
  std::vector<std::string> dim_names;
  /// Nested fields: the nested class.
  ClassRef nested;
  bool optional = false;
  /// Optional fields: what the constructor stores when the field is not given.
  std::optional<DefaultValue> default_value;
  std::string doc;

  /// The name of the generated accessors.
  const std::string& accessor() const { return cpp_name.empty() ? name : cpp_name; }
};

/// A named dim, declared once by a class and usable in the shapes of its fields and of the
/// fields of classes extending it.
struct DimDef {
  std::string name;
  SourceLocation location;
};

/// A class the C++ frontend read from a plain-data struct: every field a number, a bool or a
/// fixed-size array of them (C array or std::array), no base. The generated class includes the
/// struct's header and converts arrays of the struct (rows) to and from objects of the class
/// (from_struct_array / to_struct_array over tensordict::StructLayout). Each field's member is
/// named by the field's stored key.
struct PlainStruct {
  /// The struct's fully qualified C++ name: "::game::schema::Pose".
  std::string qualified_name;
  /// What the generated header writes in `#include "..."`: the header's path relative to the
  /// include directory of the parse that gives the shortest one (as the target's include
  /// directories find it), else its absolute path.
  std::string header;
};

struct ClassDef {
  std::string name;
  SourceLocation location;
  ClassKind kind = ClassKind::TensorClass;
  std::string doc;
  /// The class this one extends, if any.
  std::optional<ClassRef> base;
  /// The fields this class declares (not the inherited ones), in declaration order.
  std::vector<FieldDef> fields;
  /// The named dims this class declares (not the inherited ones).
  std::vector<DimDef> dims;
  /// Objects are locked after construction; inherited by extending classes.
  bool frozen = false;
  /// Set when the class comes from a plain-data C++ struct (C++ frontend only).
  std::optional<PlainStruct> plain_struct;
};

struct ImportDef {
  /// As written in the schema.
  std::string path;
  SourceLocation location;
  /// Filled by the frontend: index of the imported file in Module::files.
  int file_index = -1;
};

struct SchemaFile {
  /// Path of the schema file.
  std::string path;
  /// File name without directory and extension: the generated header is `<stem>.td.h`.
  std::string stem;
  SourceLocation location;
  /// C++ namespace, possibly nested ("a::b"); empty for the global namespace.
  std::string cpp_namespace;
  std::vector<ImportDef> imports;
  std::vector<ClassDef> classes;
};

/// Every file a generation run reads: the schemas given on the command line (roots) and,
/// after them, the files they import, transitively. Each file appears once.
struct Module {
  std::vector<SchemaFile> files;
  /// Indices into `files` of the schemas to generate headers for.
  std::vector<int> roots;
};

}  // namespace tdgen
