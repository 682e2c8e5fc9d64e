#pragma once
// An index over the batch dimensions of a tensordict, parsed once and applied to every leaf.
// Accepts everything at::Tensor::index accepts (integers, slices with steps, None, Ellipsis,
// bools, bool masks, long index tensors), validated against the batch size so that errors name
// the tensordict's batch rather than some leaf's shape. An Ellipsis is expanded to full slices
// over the batch dims only, so leaves' trailing (event) dimensions are never indexed.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

namespace at {
namespace indexing {
struct TensorIndex;
}
}  // namespace at

namespace tensordict {

class BatchIndex {
 public:
  struct Item {
    enum class Kind : uint8_t { None, Integer, Boolean, Slice, Tensor };
    Kind kind = Kind::None;
    int64_t integer = 0;  // Integer (normalized to >= 0), Boolean (0/1)
    int64_t start = 0, stop = 0, step = 1;  // Slice, normalized against the dim size
    bool full = false;    // Slice covering the whole dim
    at::Tensor tensor;    // Tensor: long indices or a bool mask
  };

  /// Parses `indices` against `batch_size`. Throws IndexError for more indices than batch dims,
  /// integers out of range or a mask whose shape differs from the dims it covers, and
  /// RuntimeError (as Python does) for two ellipses or indexing a tensordict without batch dims.
  BatchIndex(c10::ArrayRef<at::indexing::TensorIndex> indices, c10::IntArrayRef batch_size);

  /// The batch size of the indexed tensordict.
  c10::IntArrayRef result_batch_size() const { return result_batch_size_; }
  /// Number of leading batch dims the index consumes in the source.
  int64_t source_dims() const { return source_dims_; }
  /// Number of batch dims of the tensordict the index was parsed against. A nested tensordict
  /// with more batch dims keeps its extra ones after result_batch_size().
  int64_t source_batch_dims() const { return source_batch_dims_; }
  /// Only integers, slices, None and bools: the result is a view of the source.
  bool is_basic() const { return is_basic_; }
  /// The index selects everything unchanged (`()`, `...`, `:`): the result is the source.
  bool is_identity() const { return is_identity_; }
  const std::vector<Item>& items() const { return items_; }

  /// `leaf[index]` applied to the leading batch dims of `leaf`.
  at::Tensor apply(const at::Tensor& leaf) const;
  /// `leaf[index] = value`, `value` cast to the leaf's dtype and broadcast.
  void assign(const at::Tensor& leaf, const at::Tensor& value) const;
  void assign(const at::Tensor& leaf, const c10::Scalar& value) const;

  /// Python-like text of the index, for error messages: (0, slice(None, 2, None), tensor(...)).
  std::string repr() const;

 private:
  std::vector<Item> items_;
  c10::SmallVector<int64_t, 6> result_batch_size_;
  int64_t source_dims_ = 0;
  int64_t source_batch_dims_ = 0;
  bool is_basic_ = true;
  bool is_identity_ = false;
};

}  // namespace tensordict
