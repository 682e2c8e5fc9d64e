#pragma once
// What a backend's from_schema preallocates at one key, without example data: a tensor (event
// shape and dtype, zero-filled) or a non-tensor value (one value for every batch element, as
// memmap_like writes them). TensorDictStore::from_schema and PersistentTensorDict::from_schema
// take a list of them; T::store_like and T::h5_like derive one from a generated class.
//
//   TensorDictStore::from_schema({{"obs", {{84, 84}, at::kByte}},   // a tensor
//                                 {{"info", "task"}, ""},            // a string, "" in every row
//                                 {"note", nullptr}},                // null (Python None)
//                                {64}, options);

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <tensordict/json.h>
#include <tensordict/key.h>
#include <tensordict/non_tensor.h>

namespace tensordict {

class TensorDict;

class LeafSpec {
 public:
  /// A tensor leaf: zeros shaped batch_size + event_shape.
  LeafSpec(std::vector<int64_t> event_shape, at::ScalarType dtype)
      : tensor_(true), event_shape_(std::move(event_shape)), dtype_(dtype) {}
  /// A non-tensor leaf holding `value` (uniform, or a stack shaped like the batch).
  LeafSpec(NonTensorData value) : value_(std::move(value)) {}
  LeafSpec(json::Value value) : value_(std::move(value)) {}
  LeafSpec(const char* value) : value_(json::Value(value)) {}
  LeafSpec(std::string value) : value_(json::Value(std::move(value))) {}
  LeafSpec(std::nullptr_t) : value_(json::Value()) {}

  bool is_tensor() const { return tensor_; }
  const std::vector<int64_t>& event_shape() const { return event_shape_; }
  at::ScalarType dtype() const { return dtype_; }
  const NonTensorData& value() const { return value_; }

 private:
  bool tensor_ = false;
  std::vector<int64_t> event_shape_;
  at::ScalarType dtype_ = at::ScalarType::Undefined;
  NonTensorData value_;
};

using LeafSpecs = std::vector<std::pair<NestedKey, LeafSpec>>;

/// The specs that preallocate `td`'s layout: every tensor leaf's event shape (past its level's
/// batch dims) and dtype, every non-tensor value as it is, nested keys as paths. Reads no
/// tensor data. An empty nested level has nothing to preallocate and is left out. ValueError
/// naming the key when a nested level's batch size is not the root's (from_schema gives every
/// level the root's).
LeafSpecs leaf_specs(const TensorDict& td);

/// Checks `specs` before a from_schema writes anything (`where`: the store or file, for
/// messages): keys not empty, none twice, none both a leaf and a level of another's path,
/// event dims >= 0, a dtype given, a non-tensor stack shaped `batch_size`. ValueError (ShapeError
/// for a stack) naming the key.
void check_leaf_specs(const LeafSpecs& specs, c10::IntArrayRef batch_size, const std::string& where);

}  // namespace tensordict
