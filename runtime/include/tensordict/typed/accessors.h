#pragma once
// The functions generated accessors call. Reads of tensor fields are inline and take the
// FieldCache fast path; everything else (checks, errors, non-tensor values) lives in
// runtime/src/typed/field.cpp.

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/typed/field.h>
#include <tensordict/typed/field_cache.h>

namespace tensordict {
namespace typed {

/// The tensor stored in `field`; AttributeError when it is not set, TypeError when the entry
/// is not a tensor.
inline const at::Tensor& read_tensor(const TensorDict& td, const char* class_name,
                                     const FieldDescriptor& field, const FieldCache& cache) {
  const Entry* entry = cache.lookup(td.impl(), field.name);
  if (C10_LIKELY(entry != nullptr && entry->is_tensor())) return entry->tensor_unchecked();
  throw_bad_read(class_name, field, entry, td.impl());
}

/// The nested tensordict stored in `field` (wrapped into the nested class by the caller).
inline const TensorDict& read_nested(const TensorDict& td, const char* class_name,
                                     const FieldDescriptor& field, const FieldCache& cache) {
  const Entry* entry = cache.lookup(td.impl(), field.name);
  if (C10_LIKELY(entry != nullptr && entry->is_tensordict())) return entry->tensordict_unchecked();
  throw_bad_read(class_name, field, entry, td.impl());
}

/// The entry of a non-tensor field, or nullptr.
inline const Entry* read_entry(const TensorDict& td, const FieldDescriptor& field, const FieldCache& cache) {
  return cache.lookup(td.impl(), field.name);
}

/// Checks `value` against `field` (and its named dims against the other fields of `schema`)
/// and stores it (no copy).
inline void write_tensor(TensorDict& td, const Schema& schema, const FieldDescriptor& field, at::Tensor value) {
  check_tensor(schema.class_name, field, td.batch_size(), value);
  if (field.dim_names != nullptr) check_named_dims(schema, field, td, value);
  td.set(field.name, std::move(value));
}

/// Checks `value` against `field` and copies it into the stored tensor through the backend
/// (TensorDict::set_: allowed when locked).
inline void write_tensor_(TensorDict& td, const char* class_name, const FieldDescriptor& field,
                          const at::Tensor& value) {
  check_tensor(class_name, field, td.batch_size(), value);
  td.set_(field.name, value);
}

/// Checks the nested tensordict's batch dims and stores it (no copy: it stays shared).
inline void write_nested(TensorDict& td, const char* class_name, const FieldDescriptor& field,
                         const TensorDict& value) {
  check_nested(class_name, field, td.batch_size(), value);
  td.set(field.name, EntryInit(value));
}

/// Stores a non-tensor value (string, int, float or bool) as NonTensorData.
void write_scalar(TensorDict& td, const FieldDescriptor& field, json::Value value);
/// Replaces the stored value of the field in place, through the backend (allowed when locked).
void write_scalar_(TensorDict& td, const FieldDescriptor& field, json::Value value);

/// Per-row values of a non-tensor field as C++ values (T: std::string, int64_t, double, bool;
/// std::optional<T> for optional fields, whose null rows are std::nullopt).
template <class T>
struct RowValue {
  static T from(const json::Value& v) {
    if constexpr (std::is_same_v<T, std::string>) return v.as_string();
    else if constexpr (std::is_same_v<T, bool>) return v.as_bool();
    else if constexpr (std::is_same_v<T, double>) return v.as_double();
    else return v.as_int();
  }
};
template <class T>
struct RowValue<std::optional<T>> {
  static std::optional<T> from(const json::Value& v) {
    if (v.is_null()) return std::nullopt;
    return RowValue<T>::from(v);
  }
};
template <class T>
std::vector<T> read_list(const TensorDict& td, const char* class_name, const FieldDescriptor& field,
                         const FieldCache& cache) {
  std::vector<json::Value> rows = read_rows(class_name, field, td, cache.lookup(td.impl(), field.name));
  std::vector<T> out;
  out.reserve(rows.size());
  for (const json::Value& v : rows) out.push_back(RowValue<T>::from(v));
  return out;
}

/// Checks a nested typed value and copies it into the stored nested fields through the backend
/// (update_: allowed when locked).
inline void write_nested_(TensorDict& td, const char* class_name, const FieldDescriptor& field,
                          const TensorDict& value) {
  check_nested(class_name, field, td.batch_size(), value);
  if (field.nested_schema != nullptr) check_write(field.nested_schema(), value);
  td.get_tensordict(field.name).update_(value);
}

/// True when the backend holds an entry for `field`.
inline bool has_field(const TensorDict& td, const FieldDescriptor& field, const FieldCache& cache) {
  return cache.lookup(td.impl(), field.name) != nullptr;
}

}  // namespace typed
}  // namespace tensordict
