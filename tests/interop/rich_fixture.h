#pragma once
// The tensordicts of the Python tensordict v0.14 interoperability check, built in C++:
// tests/interop/v014_spec.py builds the same ones in Python (its docstring gives the value rule).
// Change both together.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/tensordict.h>

namespace interop {

inline const std::vector<int64_t> kBatch = {3, 2};

struct LeafSpec {
  tensordict::NestedKey key;
  at::ScalarType dtype;
  std::vector<int64_t> feature;  // shape after the batch dims
};

inline const std::vector<LeafSpec>& rich_leaves() {
  static const std::vector<LeafSpec> leaves = {
      {{"f32"}, at::kFloat, {4}},
      {{"f64"}, at::kDouble, {}},
      {{"i64"}, at::kLong, {1}},
      {{"flag"}, at::kBool, {}},
      {{"nested", "f16"}, at::kHalf, {2}},
      {{"nested", "bf16"}, at::kBFloat16, {3}},
      {{"nested", "i8"}, at::kChar, {}},
      {{"nested", "u8"}, at::kByte, {5}},
      {{"nested", "i16"}, at::kShort, {}},
      {{"nested", "i32"}, at::kInt, {2}},
      {{"nested", "c64"}, at::kComplexFloat, {}},
      {{"nested", "empty"}, at::kFloat, {0}},
      {{"nested", "deeper", "x"}, at::kFloat, {2, 2}},
  };
  return leaves;
}

struct NonTensorSpec {
  tensordict::NestedKey key;
  tensordict::json::Value value;
};

inline const std::vector<NonTensorSpec>& rich_non_tensors() {
  using tensordict::json::Array;
  using tensordict::json::Value;
  static const std::vector<NonTensorSpec> values = {
      {{"name"}, Value("run-7")},
      {{"nested", "note"}, Value("h\xc3\xa9llo \xe2\x9c\x93")},
      {{"meta_int"}, Value(7)},
      {{"nested", "meta_list"}, Value(Array{Value(1), Value(2.5), Value("x")})},
  };
  return values;
}

/// Where the rich tensordict is stored: an HDF5 file holds no bfloat16 (h5py has none) and no
/// non-string values (v0.14 writes them as opaque numpy objects); v0.14's Redis store can neither
/// write bfloat16 (numpy) nor read a 0-byte leaf back (np.frombuffer refuses it).
enum class Format { any, h5, store };

inline bool excluded(Format format, const tensordict::NestedKey& key) {
  using tensordict::NestedKey;
  if (format == Format::h5)
    return key == NestedKey({"nested", "bf16"}) || key == NestedKey("meta_int") || key == NestedKey({"nested", "meta_list"});
  if (format == Format::store) return key == NestedKey({"nested", "bf16"}) || key == NestedKey({"nested", "empty"});
  return false;
}

/// Leaf values by flat element index i (v014_spec.leaf).
inline at::Tensor leaf(const std::vector<int64_t>& shape, at::ScalarType dtype) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  const at::Tensor i = at::arange(n, at::kLong);
  const at::Tensor centred = at::remainder(i, 97) - 20;
  at::Tensor t;
  if (dtype == at::kBool) {
    t = at::remainder(i, 3) == 0;
  } else if (at::isComplexType(dtype)) {
    t = at::complex(centred.to(at::kDouble) / 4, i.to(at::kDouble) / 2).to(dtype);
  } else if (at::isFloatingType(dtype)) {
    t = (centred.to(at::kDouble) / 4).to(dtype);
  } else if (dtype == at::kByte) {
    t = at::remainder(i, 97).to(dtype);
  } else {
    t = centred.to(dtype);
  }
  return t.reshape(shape);
}

inline std::vector<int64_t> with_batch(const std::vector<int64_t>& feature) {
  std::vector<int64_t> shape = kBatch;
  shape.insert(shape.end(), feature.begin(), feature.end());
  return shape;
}

/// The rich tensordict, less what `format` cannot hold.
inline tensordict::TensorDict rich(Format format = Format::any) {
  tensordict::TensorDict td({}, kBatch);
  for (const LeafSpec& spec : rich_leaves())
    if (!excluded(format, spec.key)) td.set(spec.key, leaf(with_batch(spec.feature), spec.dtype));
  for (const NonTensorSpec& spec : rich_non_tensors())
    if (!excluded(format, spec.key)) td.set_non_tensor(spec.key, spec.value);
  return td;
}

/// A stack of one string per batch element beside a tensor leaf (v014_spec.strings).
inline tensordict::TensorDict strings() {
  using tensordict::json::Value;
  const tensordict::json::Array values = {Value("a"), Value("b\xc3\xa9"), Value("c")};
  return tensordict::TensorDict(
      {{"x", leaf({3, 2}, at::kFloat)}, {"s", tensordict::NonTensorData::from_list(Value(values), {3})}}, {3});
}

inline const std::vector<int64_t> kLazyWidths = {1, 2, 3};

/// Member k: batch [2], obs [2, width k], id [2] (leaf values + k), label "m<k>".
inline tensordict::TensorDict lazy_member(int64_t k) {
  tensordict::TensorDict member({{"obs", leaf({2, kLazyWidths[k]}, at::kFloat)}, {"id", leaf({2}, at::kLong) + k}},
                                {2});
  member.set_non_tensor("label", tensordict::json::Value("m" + std::to_string(k)));
  return member;
}

inline tensordict::LazyStackedTensorDict lazy() {
  std::vector<tensordict::TensorDict> members;
  for (int64_t k = 0; k < static_cast<int64_t>(kLazyWidths.size()); ++k) members.push_back(lazy_member(k));
  return tensordict::lazy_stack(members, 0);
}

}  // namespace interop
