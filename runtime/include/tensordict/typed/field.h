#pragma once
// Compile-time field descriptors of typed classes (TensorClass, TypedTensorDict). A generated
// class lists its fields, inherited ones first, as a constexpr array of FieldDescriptor in its
// `Traits` struct; the runtime checks values against them and builds error messages from them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <tensordict/errors.h>

namespace tensordict {

class Entry;
class TensorDict;

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
};

/// A class's fields: its name and its descriptors, inherited ones first.
struct Schema {
  const char* class_name;
  const FieldDescriptor* fields;
  size_t num_fields;

  /// The descriptor named `name`, or nullptr.
  const FieldDescriptor* find(const std::string& name) const;
};

template <size_t N>
constexpr Schema make_schema(const char* class_name, const std::array<FieldDescriptor, N>& fields) {
  return Schema{class_name, fields.data(), N};
}

/// "[84, 84, 3]", "[-1]" or "any" (rank < 0).
std::string event_shape_string(const FieldDescriptor& field);

/// Checks a tensor about to be stored in `field` of `class_name`, whose batch size is
/// `batch_size`: ShapeError for the batch dims or the event shape, TypeError for the dtype.
/// Every message names the class, the field, what was expected and what was given.
void check_tensor(const char* class_name, const FieldDescriptor& field, c10::IntArrayRef batch_size,
                  const at::Tensor& value);
/// Checks a nested tensordict about to be stored in `field`: its leading batch dims must be
/// `batch_size` (ShapeError naming class and field).
void check_nested(const char* class_name, const FieldDescriptor& field, c10::IntArrayRef batch_size,
                  const TensorDict& value);
/// Checks whatever entry a backend holds for `field` (used by from_tensordict with check).
void check_entry(const char* class_name, const FieldDescriptor& field, c10::IntArrayRef batch_size,
                 const Entry& entry);

/// Throws the error for reading `field` when `entry` is missing (AttributeError "declared but
/// not set") or of the wrong kind (TypeError).
[[noreturn]] void throw_bad_read(const char* class_name, const FieldDescriptor& field, const Entry* entry);

/// `repr` with the leading type name ("TensorDict(") replaced by `class_name`.
std::string rename_repr(const std::string& repr, const char* class_name);

/// Non-tensor field values, stored as NonTensorData.
std::string read_string(const char* class_name, const FieldDescriptor& field, const Entry* entry);
int64_t read_int(const char* class_name, const FieldDescriptor& field, const Entry* entry);
double read_float(const char* class_name, const FieldDescriptor& field, const Entry* entry);
bool read_bool(const char* class_name, const FieldDescriptor& field, const Entry* entry);

}  // namespace typed
}  // namespace tensordict
