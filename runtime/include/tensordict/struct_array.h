#pragma once
// Python's from_struct_array / to_struct_array, for C++: an array of plain structs (a
// std::vector<Row> or any contiguous run of rows) seen as a tensordict of batch size [rows]
// whose leaves are strided views of the rows' fields (no copy), and back. A StructLayout names
// the fields: scalars, and fixed-size arrays (std::array or C arrays) as feature dims. Generated
// classes of plain-data schemas have T::from_struct_array (docs/typed-api.md).

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace detail {

/// Where one field of a row is and what it holds.
struct StructField {
  NestedKey key;
  size_t offset = 0;  // bytes from the start of the row
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;  // feature dims: [] for a scalar, [N, ...] for fixed-size arrays
  size_t item_size = 0;
};

template <class T, class = void>
struct FieldType {
  static_assert(sizeof(T) == 0, "from_struct_array: a field must be a number, a bool or a fixed-size array of them");
};
template <class T>
struct FieldType<T, std::enable_if_t<std::is_arithmetic_v<T>>> {
  using Scalar = T;
  static void shape(std::vector<int64_t>&) {}
};
template <class T, size_t N>
struct FieldType<std::array<T, N>> {
  using Scalar = typename FieldType<T>::Scalar;
  static void shape(std::vector<int64_t>& s) {
    s.push_back(static_cast<int64_t>(N));
    FieldType<T>::shape(s);
  }
};
template <class T, size_t N>
struct FieldType<T[N]> {
  using Scalar = typename FieldType<T>::Scalar;
  static void shape(std::vector<int64_t>& s) {
    s.push_back(static_cast<int64_t>(N));
    FieldType<T>::shape(s);
  }
};

/// The leaves as views of `rows` rows of `row_size` bytes at `base`; `owner` (may be null) is
/// kept alive by every leaf. ValueError when a field cannot be viewed with strides.
TensorDict struct_view(void* base, int64_t rows, size_t row_size, const std::vector<StructField>& fields,
                       std::shared_ptr<void> owner);
/// Copies every field's leaf of `td` (batch [rows], cast to the field's dtype) into the rows.
void struct_fill(const TensorDict& td, void* base, int64_t rows, size_t row_size, const std::vector<StructField>& fields);

}  // namespace detail

/// The fields of `Row` a tensordict sees, in key order: `StructLayout<Pose>().field("x",
/// &Pose::x).field({"q", "w"}, &Pose::qw)`.
template <class Row>
class StructLayout {
  static_assert(std::is_trivially_copyable_v<Row> && std::is_standard_layout_v<Row>,
                "from_struct_array needs a plain-data struct (trivially copyable, standard layout)");

 public:
  template <class T>
  StructLayout& field(NestedKey key, T Row::*member) {
    using Traits = detail::FieldType<T>;
    using Scalar = typename Traits::Scalar;
    // The member's offset, measured on uninitialized storage (no Row is constructed).
    alignas(Row) static unsigned char probe[sizeof(Row)];
    const Row* row = reinterpret_cast<const Row*>(probe);
    detail::StructField f;
    f.key = std::move(key);
    f.offset = static_cast<size_t>(reinterpret_cast<const unsigned char*>(&(row->*member)) - probe);
    f.dtype = c10::CppTypeToScalarType<Scalar>::value;
    f.item_size = sizeof(Scalar);
    Traits::shape(f.shape);
    fields_.push_back(std::move(f));
    return *this;
  }
  const std::vector<detail::StructField>& fields() const { return fields_; }

 private:
  std::vector<detail::StructField> fields_;
};

/// Views of `rows`' fields, which write through to the rows; the rows must outlive them.
template <class Row>
TensorDict from_struct_array(c10::ArrayRef<Row> rows, const StructLayout<Row>& layout) {
  return detail::struct_view(const_cast<Row*>(rows.data()), static_cast<int64_t>(rows.size()), sizeof(Row),
                             layout.fields(), nullptr);
}
template <class Row>
TensorDict from_struct_array(const std::vector<Row>& rows, const StructLayout<Row>& layout) {
  return from_struct_array(c10::ArrayRef<Row>(rows), layout);
}
/// Views that keep `rows` alive as long as any leaf lives.
template <class Row>
TensorDict from_struct_array(std::shared_ptr<std::vector<Row>> rows, const StructLayout<Row>& layout) {
  return detail::struct_view(rows->data(), static_cast<int64_t>(rows->size()), sizeof(Row), layout.fields(),
                             std::shared_ptr<void>(rows, rows.get()));
}
/// A copy as rows (fields not in the layout are value-initialized).
template <class Row>
std::vector<Row> to_struct_array(const TensorDict& td, const StructLayout<Row>& layout) {
  TD_CHECK(td.batch_dims() == 1, ShapeError, "to_struct_array: the tensordict must have one batch dim, got ",
           td.batch_dims());
  std::vector<Row> rows(static_cast<size_t>(td.batch_size()[0]));
  detail::struct_fill(td, rows.data(), td.batch_size()[0], sizeof(Row), layout.fields());
  return rows;
}

}  // namespace tensordict
