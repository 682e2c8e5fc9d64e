// The repr of a typed class: Python's layout with the class's name, and its nested fields with
// theirs (a tensorclass prints `Observation(` where a plain tensordict prints `TensorDict(`).

#include <tensordict/typed/field.h>

#include <tensordict/tensor_dict.h>

#include "handle/repr_fields.h"

namespace tensordict {
namespace typed {

std::string typed_repr(const TensorDict& td, const Schema& schema) {
  return detail::repr_as(td, schema.class_name, [&schema](const std::string& key, const TensorDict& child) {
    const FieldDescriptor* field = schema.find(key);
    if (field == nullptr || field->kind != FieldKind::Nested || field->nested_schema == nullptr) return child.repr();
    return typed_repr(child, field->nested_schema());
  });
}

}  // namespace typed
}  // namespace tensordict
