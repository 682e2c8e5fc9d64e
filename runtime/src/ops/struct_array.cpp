// from_struct_array / to_struct_array (tensordict/struct_array.h): each field is a strided view
// of the rows, so a vector of structs is read and written in place.

#include <tensordict/struct_array.h>

#include <ATen/ATen.h>

#include <tensordict/errors.h>

namespace tensordict {
namespace detail {

namespace {
// Strides in elements: the row size over the element size, then the feature dims, row-major.
std::vector<int64_t> strides_of(const StructField& f, size_t row_size) {
  TD_CHECK(row_size % f.item_size == 0 && f.offset % f.item_size == 0, ValueError, "from_struct_array: field ",
           f.key.repr(), " (", f.dtype, " at byte ", f.offset, " of a ", row_size,
           "-byte row) is not aligned to its element size, so it cannot be viewed with strides");
  std::vector<int64_t> strides(f.shape.size() + 1);
  int64_t inner = 1;
  for (size_t d = f.shape.size(); d > 0; --d) {
    strides[d] = inner;
    inner *= f.shape[d - 1];
  }
  strides[0] = static_cast<int64_t>(row_size / f.item_size);
  return strides;
}

std::vector<int64_t> sizes_of(const StructField& f, int64_t rows) {
  std::vector<int64_t> sizes{rows};
  sizes.insert(sizes.end(), f.shape.begin(), f.shape.end());
  return sizes;
}
}  // namespace

TensorDict struct_view(void* base, int64_t rows, size_t row_size, const std::vector<StructField>& fields,
                       std::shared_ptr<void> owner) {
  TensorDict td = TensorDict::empty_with({rows});
  for (const StructField& f : fields) {
    const auto options = at::TensorOptions().dtype(f.dtype);
    // An empty array has no rows to point into (its data pointer may be null): an empty tensor
    // of the field's shape.
    at::Tensor leaf = rows == 0 ? at::empty(sizes_of(f, 0), options)
                                : at::from_blob(static_cast<unsigned char*>(base) + f.offset, sizes_of(f, rows),
                                                strides_of(f, row_size), [owner](void*) {}, options);
    td.set(f.key, leaf);
  }
  return td;
}

void struct_fill(const TensorDict& td, void* base, int64_t rows, size_t row_size, const std::vector<StructField>& fields) {
  for (const StructField& f : fields) {
    const at::Tensor src = td.get(f.key);
    TD_CHECK(src.sizes() == c10::IntArrayRef(sizes_of(f, rows)), ShapeError, "to_struct_array: leaf ", f.key.repr(),
             " has shape ", src.sizes(), " but the field holds ", c10::IntArrayRef(sizes_of(f, rows)));
    if (rows == 0) continue;
    auto* data = static_cast<unsigned char*>(base) + f.offset;
    at::from_blob(data, sizes_of(f, rows), strides_of(f, row_size), at::TensorOptions().dtype(f.dtype))
        .copy_(src);
  }
}

}  // namespace detail
}  // namespace tensordict
