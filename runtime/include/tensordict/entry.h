#pragma once
// Entry: what a key holds, a tensor, a nested tensordict or non-tensor data. EntryInit: what a
// constructor or `set` accepts, which adds nested braced lists and numbers.

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <ATen/core/Tensor.h>

#include <tensordict/non_tensor.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

class Entry {
 public:
  enum class Kind : uint8_t { Undefined, Tensor, TensorDict, NonTensor };

  Entry() = default;
  // const& and && rather than by value: the slot table builds entries in place from a borrowed
  // tensor, and a by-value parameter would add a move and a destructor per leaf.
  Entry(const at::Tensor& tensor) : value_(std::in_place_type<at::Tensor>, tensor) {}
  Entry(at::Tensor&& tensor) : value_(std::in_place_type<at::Tensor>, std::move(tensor)) {}
  Entry(TensorDict td) : value_(std::move(td)) {}
  Entry(NonTensorData data) : value_(std::move(data)) {}

  Kind kind() const { return static_cast<Kind>(value_.index()); }
  bool defined() const { return kind() != Kind::Undefined; }
  bool is_tensor() const { return kind() == Kind::Tensor; }
  bool is_tensordict() const { return kind() == Kind::TensorDict; }
  bool is_non_tensor() const { return kind() == Kind::NonTensor; }

  /// Typed access; TypeError naming the actual kind on a mismatch.
  const at::Tensor& tensor() const;
  const TensorDict& tensordict() const;
  const NonTensorData& non_tensor() const;
  at::Tensor& mutable_tensor();

  /// Unchecked access for code that has tested kind() already.
  const at::Tensor& tensor_unchecked() const { return *std::get_if<at::Tensor>(&value_); }
  const TensorDict& tensordict_unchecked() const { return *std::get_if<TensorDict>(&value_); }

 private:
  std::variant<std::monostate, at::Tensor, TensorDict, NonTensorData> value_;
};

const char* kind_name(Entry::Kind kind);

/// A value given to a TensorDict constructor or to `set`.
class EntryInit {
 public:
  EntryInit(at::Tensor tensor) : entry_(std::move(tensor)) {}
  EntryInit(TensorDict td) : entry_(std::move(td)) {}
  EntryInit(NonTensorData data) : entry_(std::move(data)) {}
  EntryInit(Entry entry) : entry_(std::move(entry)) {}
  EntryInit(const char* text) : entry_(NonTensorData(json::Value(text))) {}
  EntryInit(std::string text) : entry_(NonTensorData(json::Value(std::move(text)))) {}
  /// Numbers become 0-dim tensors: int64 for integers, the default dtype for floats, bool.
  EntryInit(int value);
  EntryInit(int64_t value);
  EntryInit(double value);
  EntryInit(bool value);
  /// A nested tensordict, inheriting the enclosing batch size and device.
  EntryInit(std::initializer_list<std::pair<std::string, EntryInit>> items)
      : nested_(items), is_nested_(true) {}
  EntryInit(std::vector<std::pair<std::string, EntryInit>> items)
      : nested_(std::move(items)), is_nested_(true) {}

  bool is_nested_list() const { return is_nested_; }
  const Entry& entry() const { return entry_; }
  Entry& entry() { return entry_; }
  const std::vector<std::pair<std::string, EntryInit>>& nested() const { return nested_; }

 private:
  Entry entry_;
  std::vector<std::pair<std::string, EntryInit>> nested_;
  bool is_nested_ = false;
};

}  // namespace tensordict
