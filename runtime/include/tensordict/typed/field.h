#pragma once
// Compile-time field descriptors of typed classes (TensorClass, TypedTensorDict). A generated
// class lists its fields, inherited ones first, as a constexpr array of FieldDescriptor in its
// `Traits` struct; the runtime checks values against them and builds error messages from them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <tensordict/errors.h>
#include <tensordict/json.h>
#include <tensordict/key.h>

namespace tensordict {

class Entry;
class TensorDict;
class TensorDictBase;

/// Reading or setting a declared attribute that cannot be read or set (Python AttributeError):
/// a declared field that is not set, an attribute the class does not declare.
class AttributeError : public Error { using Error::Error; };

namespace typed {

/// What a field holds.
enum class FieldKind : uint8_t {
  Tensor,  ///< a tensor whose leading dims are the batch dims
  Nested,  ///< a nested typed class, stored as a nested tensordict
  String,  ///< non-tensor data (TensorClass only), stored as NonTensorData
  Int,
  Float,
  Bool,
};

/// Tag of the constructors that wrap a tensordict without checking it.
struct Unchecked {};
constexpr Unchecked unchecked{};

struct Schema;

/// The value a constructor stores in an optional field that is not given (schema `default:`): a
/// fill value for a tensor field (its declared dtype and event shape), the value itself for a
/// non-tensor field. Literal, so a generated class can hold it in a constexpr.
struct FieldDefault {
  enum class Kind : uint8_t { Bool, Int, Float, String };
  Kind kind;
  bool boolean;
  int64_t integer;
  double number;
  const char* text;
};

/// One declared field. Everything is a literal so a descriptor can be constexpr.
struct FieldDescriptor {
  const char* name;
  FieldKind kind;
  /// Declared dtype of a tensor field; meaningless when `any_dtype`.
  c10::ScalarType dtype;
  bool any_dtype;
  /// Event shape (the dims after the batch dims); -1 matches any size. `rank` < 0: any shape.
  const int64_t* shape;
  int64_t rank;
  bool optional;
  /// Name of the nested class (Nested fields), for messages.
  const char* class_name;
  /// The nested class's schema (Nested fields; nullptr otherwise): typed writes check the
  /// values below the field too. A function, so the nested class may be declared later.
  const Schema& (*nested_schema)();
  /// Per event dim, the name of a named dim shared with other fields of the class (nullptr for a
  /// dim without a name); nullptr when no dim of the field is named.
  const char* const* dim_names;
  /// What a constructor stores when the field is not given; nullptr: nothing.
  const FieldDefault* default_value;
};

/// A class's fields: its name and its descriptors, inherited ones first.
struct Schema {
  const char* class_name;
  const FieldDescriptor* fields;
  size_t num_fields;
  /// A TensorClass's fields are all it may hold; a TypedTensorDict accepts other keys too.
  bool closed;
  /// Objects are locked after construction (schema `frozen: true`).
  bool frozen;

  /// The descriptor named `name`, or nullptr.
  const FieldDescriptor* find(const std::string& name) const;
};

template <size_t N>
constexpr Schema make_schema(const char* class_name, const std::array<FieldDescriptor, N>& fields, bool closed,
                             bool frozen = false) {
  return Schema{class_name, fields.data(), N, closed, frozen};
}

/// The schema of a generated class (what FieldDescriptor::nested_schema points to).
template <class T>
const Schema& schema_of() {
  return T::Traits::schema;
}

/// "[84, 84, 3]", "[-1]" or "any" (rank < 0).
std::string event_shape_string(const FieldDescriptor& field);

/// Checks a tensor about to be stored in `field` of `class_name`, whose batch size is
/// `batch_size`: ShapeError for the batch dims or the event shape, TypeError for the dtype.
/// Every message names the class, the field, what was expected and what was given.
void check_tensor(const char* class_name, const FieldDescriptor& field, c10::IntArrayRef batch_size,
                  const at::Tensor& value);
/// Checks that `value`, about to be stored in `field` of an object of `schema` held in `td`,
/// agrees with the other fields set in `td` on every named dim (ShapeError naming both fields
/// and the dim). Only fields with named dims pay for it.
void check_named_dims(const Schema& schema, const FieldDescriptor& field, const TensorDict& td,
                      const at::Tensor& value);
/// Checks that the tensor fields set in `td` agree on every named dim of `schema`.
void check_named_dims(const Schema& schema, const TensorDict& td);

/// Checks a nested tensordict about to be stored in `field`: its leading batch dims must be
/// `batch_size` (ShapeError naming class and field).
void check_nested(const char* class_name, const FieldDescriptor& field, c10::IntArrayRef batch_size,
                  const TensorDict& value);
/// Checks whatever entry a backend holds for `field` (used by from_tensordict with check).
void check_entry(const char* class_name, const FieldDescriptor& field, c10::IntArrayRef batch_size,
                 const Entry& entry);

/// Checks a tensordict about to be written into (a part of) a typed object, key by key against
/// `schema`: tensor fields exactly (dtype and event shape, batch dims those of `value`), nested
/// fields recursively against their schema, non-tensor fields by kind. Keys the schema does not
/// declare are refused when it is closed (AttributeError). Every message names class.field.
void check_write(const Schema& schema, const TensorDict& value);
/// Checks a tensor about to be written at `key` (a field path) of an object of `schema`, where
/// the written region's batch size is `batch_size` (set_at_).
void check_write_at(const Schema& schema, KeyRef key, c10::IntArrayRef batch_size,
                    const at::Tensor& value);

/// Stores the default of every field of `schema` that has one and is not set in `td` (the
/// constructors call it after storing the given fields). A tensor default fills the field's
/// event shape, whose named dims take their size from the fields already set (ValueError when
/// none gives it).
void apply_defaults(const Schema& schema, TensorDict& td);

/// A tensordict with every field of `schema` that has a concrete dtype and event shape, as
/// zero tensors expanded from one element (no full-size allocation), nested classes
/// recursively; what memmap_like writes for T::memmap_like. ValueError naming class.field for
/// a required tensor field without a concrete dtype and shape.
TensorDict schema_skeleton(const Schema& schema, c10::IntArrayRef batch_size);

/// Throws the error for reading `field` when `entry` is missing (AttributeError "declared but
/// not set") or of the wrong kind (TypeError).
/// `backend`, when given, explains a missing entry (a lazy stack names the members holding it).
[[noreturn]] void throw_bad_read(const char* class_name, const FieldDescriptor& field, const Entry* entry,
                                 const TensorDictBase* backend = nullptr);

/// `td`'s repr with the schema's class name for its type name, and nested fields printed with
/// their own classes' names (`Observation(` instead of `TensorDict(`).
std::string typed_repr(const TensorDict& td, const Schema& schema);

/// Non-tensor field values, stored as NonTensorData. A value that differs between batch
/// elements raises ValueError naming the per-row accessor `<field>_list()`.
std::string read_string(const char* class_name, const FieldDescriptor& field, const Entry* entry);
int64_t read_int(const char* class_name, const FieldDescriptor& field, const Entry* entry);
double read_float(const char* class_name, const FieldDescriptor& field, const Entry* entry);
bool read_bool(const char* class_name, const FieldDescriptor& field, const Entry* entry);
/// The per-row values of a non-tensor field: one per batch element, row-major (numel of
/// `batch_size` values). An unset optional field gives nulls; null rows are refused (TypeError)
/// unless the field is optional.
std::vector<json::Value> read_rows(const char* class_name, const FieldDescriptor& field, const Entry* entry,
                                   c10::IntArrayRef batch_size);
/// read_rows over the batch of `td` (whose entry for the field is `entry`). A ragged lazy stack
/// (batch dims of -1) gives its members' rows, member after member, each member row-major.
std::vector<json::Value> read_rows(const char* class_name, const FieldDescriptor& field, const TensorDict& td,
                                   const Entry* entry);

}  // namespace typed
}  // namespace tensordict
