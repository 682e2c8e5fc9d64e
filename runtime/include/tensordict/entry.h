#pragma once
// Entry: what a key holds, a tensor, a nested tensordict or non-tensor data. EntryInit: what a
// constructor or `set` accepts, which adds nested braced lists and numbers.

#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include <tensordict/non_tensor.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

class Entry {
 public:
  using Kind = EntryKind;

  Entry() noexcept {}
  // const& and && rather than by value: the slot table builds entries in place from a borrowed
  // tensor, and a by-value parameter would add a move and a destructor per leaf.
  Entry(const at::Tensor& tensor) : tensor_(tensor), kind_(Kind::Tensor) {}
  Entry(at::Tensor&& tensor) noexcept : tensor_(std::move(tensor)), kind_(Kind::Tensor) {}
  Entry(TensorDict td) noexcept : tensordict_(std::move(td)), kind_(Kind::TensorDict) {}
  Entry(NonTensorData data);

  Entry(const Entry& other) : kind_(Kind::Undefined) { copy_from(other); }
  Entry(Entry&& other) noexcept : kind_(Kind::Undefined) { steal_from(other); }
  Entry& operator=(const Entry& other) {
    if (this != &other) {
      Entry copy(other);
      reset();
      steal_from(copy);
    }
    return *this;
  }
  Entry& operator=(Entry&& other) noexcept {
    if (this != &other) {
      reset();
      steal_from(other);
    }
    return *this;
  }
  ~Entry() { reset(); }

  Kind kind() const { return kind_; }
  bool defined() const { return kind_ != Kind::Undefined; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  bool is_tensordict() const { return kind_ == Kind::TensorDict; }
  bool is_non_tensor() const { return kind_ == Kind::NonTensor; }

  /// Typed access; TypeError naming the actual kind on a mismatch.
  const at::Tensor& tensor() const;
  const TensorDict& tensordict() const;
  const NonTensorData& non_tensor() const;
  at::Tensor& mutable_tensor();

  /// Unchecked access for code that has tested kind() already.
  const at::Tensor& tensor_unchecked() const { return tensor_; }
  const TensorDict& tensordict_unchecked() const { return tensordict_; }

 private:
  // Non-tensor data is boxed so that every alternative is one intrusive pointer: an Entry is
  // 16 bytes, and a move copies a pointer and a tag whatever the kind.
  struct NonTensorBox;

  // The empty case inline: moved-from and default entries (most destructors on the write paths)
  // then cost a compare, not a call the compiler would not inline.
  void reset() noexcept {
    if (kind_ != Kind::Undefined) release();
  }
  void release() noexcept {
    switch (kind_) {
      case Kind::Tensor: tensor_.~Tensor(); break;
      case Kind::TensorDict: tensordict_.~TensorDict(); break;
      case Kind::NonTensor: destroy_non_tensor(); break;
      case Kind::Undefined: return;
    }
    kind_ = Kind::Undefined;
  }
  // `this` is Undefined on entry to both.
  void copy_from(const Entry& other) {
    switch (other.kind_) {
      case Kind::Tensor: new (&tensor_) at::Tensor(other.tensor_); break;
      case Kind::TensorDict: new (&tensordict_) TensorDict(other.tensordict_); break;
      case Kind::NonTensor: copy_non_tensor(other); break;
      case Kind::Undefined: return;
    }
    kind_ = other.kind_;
  }
  void steal_from(Entry& other) noexcept {
    const Kind kind = other.kind_;
    switch (kind) {
      case Kind::Tensor: new (&tensor_) at::Tensor(std::move(other.tensor_)); break;
      case Kind::TensorDict: new (&tensordict_) TensorDict(std::move(other.tensordict_)); break;
      case Kind::NonTensor: non_tensor_ = other.non_tensor_; break;  // the reference moves
      case Kind::Undefined: return;
    }
    kind_ = kind;
    // A moved-from tensor or tensordict is a null handle and the box's reference moved here:
    // the source holds nothing to release, so it is only marked empty.
    other.kind_ = Kind::Undefined;
  }
  // Out of line: NonTensorBox is complete only in entry.cpp.
  void destroy_non_tensor() noexcept;
  void copy_non_tensor(const Entry& other);

  union {
    at::Tensor tensor_;
    TensorDict tensordict_;
    NonTensorBox* non_tensor_;  // owned: one reference of the box's intrusive count
  };
  Kind kind_ = Kind::Undefined;
};

const char* kind_name(Entry::Kind kind);

/// A value given to a TensorDict constructor or to `set`.
class EntryInit {
 public:
  EntryInit(at::Tensor tensor) : entry_(std::move(tensor)) {}
  EntryInit(TensorDict td) : entry_(std::move(td)) {}
  EntryInit(NonTensorData data) : entry_(std::move(data)) {}
  EntryInit(Entry entry) : entry_(std::move(entry)) {}
  /// A typed object that holds a tensordict (a generated TensorClass): that tensordict, shared.
  template <class Typed, class = std::enable_if_t<!std::is_base_of_v<TensorDict, Typed> &&
                                                  std::is_convertible_v<decltype(std::declval<const Typed&>().typed_storage()),
                                                                        const TensorDict&>>>
  EntryInit(const Typed& value) : entry_(value.typed_storage()) {}
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
