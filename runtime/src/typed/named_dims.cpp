// Named dims of typed classes: the fields of one object agree on every dim they name alike
// (schema `dims: [N, 3]`), and the entries the checks look at.

#include <cstring>

#include <ATen/ATen.h>

#include <tensordict/errors.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/typed/field.h>

#include "typed/field_internal.h"

namespace tensordict {
namespace typed {

namespace {

bool same_name(const char* a, const char* b) { return a != nullptr && b != nullptr && std::strcmp(a, b) == 0; }

// A tensor field set in `td` (its shape and dtype at least), or an undefined tensor.
at::Tensor stored_tensor(const TensorDict& td, const FieldDescriptor& field) {
  Entry entry = checked_entry(td, field.name);
  return entry.defined() && entry.is_tensor() ? entry.tensor_unchecked() : at::Tensor();
}

}  // namespace

Entry checked_entry(const TensorDict& td, const char* name) {
  const TensorDictBase& impl = *td.impl();
  if (impl.leaves_alias_storage() || impl.kind(name) != EntryKind::Tensor) return td.find(name);
  const LeafMeta meta = impl.leaf_meta(name);
  return Entry(at::empty(meta.shape, at::TensorOptions().dtype(meta.dtype).device(at::kMeta)));
}

int64_t named_dim_size(const Schema& schema, const TensorDict& td, const char* dim) {
  const int64_t batch_dims = td.batch_dims();
  for (size_t i = 0; i < schema.num_fields; ++i) {
    const FieldDescriptor& f = schema.fields[i];
    if (f.dim_names == nullptr || f.kind != FieldKind::Tensor) continue;
    for (int64_t d = 0; d < f.rank; ++d) {
      if (!same_name(f.dim_names[d], dim)) continue;
      const at::Tensor t = stored_tensor(td, f);
      if (t.defined() && t.dim() == batch_dims + f.rank) return t.size(batch_dims + d);
      break;
    }
  }
  return -1;
}

void check_named_dims(const Schema& schema, const FieldDescriptor& field, const TensorDict& td,
                      const at::Tensor& value) {
  const int64_t batch_dims = td.batch_dims();
  for (int64_t d = 0; d < field.rank; ++d) {
    const char* dim = field.dim_names[d];
    if (dim == nullptr) continue;
    const int64_t size = value.size(batch_dims + d);
    // A dim named twice in one field ([N, N]) must agree with itself.
    for (int64_t e = d + 1; e < field.rank; ++e)
      TD_CHECK(!same_name(field.dim_names[e], dim) || value.size(batch_dims + e) == size, ShapeError,
               schema.class_name, ".", field.name, ": the dims named ", dim, " differ (", size, " and ",
               value.size(batch_dims + e), ") in shape ", dims_str(value.sizes()));
    for (size_t i = 0; i < schema.num_fields; ++i) {
      const FieldDescriptor& other = schema.fields[i];
      if (other.dim_names == nullptr || same_name(other.name, field.name)) continue;
      for (int64_t q = 0; q < other.rank; ++q) {
        if (!same_name(other.dim_names[q], dim)) continue;
        const at::Tensor t = stored_tensor(td, other);
        if (!t.defined() || t.dim() != batch_dims + other.rank) break;
        TD_CHECK(t.size(batch_dims + q) == size, ShapeError, schema.class_name, ".", field.name, ": dim ", dim,
                 " is ", size, " here (shape ", dims_str(value.sizes()), ") but ", t.size(batch_dims + q), " in ",
                 schema.class_name, ".", other.name, " (shape ", dims_str(t.sizes()),
                 "): the fields of one object agree on ", dim);
        break;
      }
    }
  }
}

void check_named_dims(const Schema& schema, const TensorDict& td) {
  for (size_t i = 0; i < schema.num_fields; ++i) {
    const FieldDescriptor& f = schema.fields[i];
    if (f.dim_names == nullptr || f.kind != FieldKind::Tensor) continue;
    const at::Tensor t = stored_tensor(td, f);
    if (t.defined() && t.dim() == td.batch_dims() + f.rank) check_named_dims(schema, f, td, t);
  }
}

}  // namespace typed
}  // namespace tensordict
