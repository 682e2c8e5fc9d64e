#pragma once
// Small argument types of the TensorDict operations: the `default` of binary ops (keys present
// on one side only), the options of `apply`, the `reduce` tag of reductions, and the flat
// state dict. Kept apart from tensor_dict.h so that header only declares the operations.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>

namespace tensordict {

class TensorDict;

/// What a binary operation between two tensordicts does with keys only one side has
/// (Python's `default=` argument): `none()` (the default) raises KeyError, `intersection()`
/// keeps the common keys, a value fills the missing side (the union of the keys).
class BinaryDefault {
 public:
  enum class Kind : uint8_t { None, Intersection, Value };
  BinaryDefault() = default;
  /// A fill value for the missing side.
  BinaryDefault(const c10::Scalar& value) : kind_(Kind::Value), value_(value) {}
  BinaryDefault(double value) : BinaryDefault(c10::Scalar(value)) {}
  BinaryDefault(int value) : BinaryDefault(c10::Scalar(int64_t{value})) {}
  /// "intersection" (the only string Python accepts); anything else is a ValueError.
  BinaryDefault(const char* mode);
  static BinaryDefault none() { return BinaryDefault(); }
  static BinaryDefault intersection() { return BinaryDefault("intersection"); }

  Kind kind() const { return kind_; }
  const c10::Scalar& value() const { return value_; }

 private:
  Kind kind_ = Kind::None;
  c10::Scalar value_;
};

/// Options of `apply` / `named_apply` (Python keyword arguments of the same names).
struct ApplyOptions {
  /// Batch size of the result (and of its nested tensordicts); default: the input's.
  std::optional<std::vector<int64_t>> batch_size;
  /// When another tensordict lacks a key, the callable receives this tensor instead (an
  /// undefined tensor stands for Python's None). Without it a missing key is a KeyError.
  std::optional<at::Tensor> default_value;
  /// Nested results left empty: nullopt (Python None) drops them when the input was not empty,
  /// true drops every empty one, false keeps them.
  std::optional<bool> filter_empty;
  /// The result is locked when the input is.
  bool propagate_lock = false;
  /// Python's `out=`: the results are set into this tensordict (entries replaced, nested
  /// tensordicts updated level by level, like `update`), which is returned. Not owned; it must
  /// be unlocked, and `batch_size`, when given, must equal its batch size.
  TensorDict* out = nullptr;
};

/// Options of new_zeros / new_ones / new_empty / new_full / new_tensor (Python's keywords).
struct NewOptions {
  /// The leaves' dtype; default: each leaf keeps its own.
  std::optional<at::ScalarType> dtype;
  /// The result's device (leaves are made there); default: this tensordict's (new_tensor:
  /// the data's).
  std::optional<at::Device> device;
  bool requires_grad = false;
};

/// Tag selecting apply's Python `call_on_nested=True` form: the callable receives every
/// first-level entry as it is, a nested tensordict included, instead of the tensor leaves.
struct CallOnNested {};
inline constexpr CallOnNested call_on_nested{};

/// Tag selecting the reductions that return one tensor over all leaves (Python `reduce=True`):
/// `td.sum(tensordict::reduce)`.
struct Reduce {};
inline constexpr Reduce reduce{};

/// Tag selecting reductions over every feature (non-batch) dim (Python `dim="feature"`):
/// `td.mean(tensordict::feature)` keeps the batch size; `td.mean(tensordict::reduce,
/// tensordict::feature)` gives one tensor of the batch size. There is no keepdim form (Python
/// raises TypeError for it).
struct FeatureDims {};
inline constexpr FeatureDims feature{};

/// A flat state dict: tensors under keys joined with `separator` ("b.c"), in the tensordict's
/// key order, and the batch size of every level ("" for the root, "b", "b.d").
struct StateDict {
  std::string separator = ".";
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::vector<std::pair<std::string, std::vector<int64_t>>> batch_sizes;
  std::optional<at::Device> device;

  /// The tensor stored under `key`; KeyError when absent.
  const at::Tensor& at(const std::string& key) const;
  bool contains(const std::string& key) const;
};

}  // namespace tensordict
