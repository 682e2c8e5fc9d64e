#pragma once
// TensorClass<Derived>: a typed class that HAS a TensorDict (Python's TensorClass). It holds a
// handle to any backend, may declare non-tensor fields (string, int, float, bool, stored in the
// backend as NonTensorData) and refuses keys it does not declare. `from_tensordict(td)` wraps
// `td` live, without copying.
//
//   class Observation : public tensordict::TensorClass<Observation> { ... };  // generated

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tensordict/tensor_dict.h>
#include <tensordict/typed/accessors.h>
#include <tensordict/typed/field.h>
#include <tensordict/typed/typed_ops.h>

namespace tensordict {
namespace typed {

/// Builds the tensordict of a TensorClass constructor: TypeError naming the missing required
/// fields, AttributeError for an undeclared one, Shape/TypeError for a bad value. Numbers
/// given for int/float/bool fields become non-tensor values.
TensorDict build_tensor_class(const Schema& schema, c10::ArrayRef<TensorDict::Item> items,
                              c10::IntArrayRef batch_size, std::optional<at::Device> device);
/// from_tensordict's check: ValueError when `td` holds keys the class does not declare;
/// declared fields that are present must be well-typed. Missing fields read as "not set".
void check_tensor_class(const Schema& schema, const TensorDict& td);
/// TensorClass::set: AttributeError for an undeclared key, then the field's checks.
void set_tensor_class_field(const Schema& schema, TensorDict& td, const std::string& key, EntryInit value);

/// The root of every TensorClass hierarchy: holds the backend handle.
class TensorClassRoot {
 public:
  TensorClassRoot() = default;
  TensorClassRoot(Unchecked, TensorDict td) : td_(std::move(td)) {}

  /// The backend handle holding the fields (shared, not copied).
  const TensorDict& tensordict() const& { return td_; }
  /// On a temporary (`buf.obs().tensordict()`), the handle itself: a reference would dangle.
  TensorDict tensordict() const&& { return td_; }
  const TensorDict& typed_storage() const { return td_; }
  TensorDict& typed_storage() { return td_; }

  c10::IntArrayRef batch_size() const { return td_.batch_size(); }
  int64_t batch_dims() const { return td_.batch_dims(); }
  int64_t numel() const { return td_.numel(); }
  const std::optional<at::Device>& device() const { return td_.device(); }
  bool is_locked() const { return td_.is_locked(); }
  /// Keys of the backend's top level (the fields that are set).
  std::vector<NestedKey> keys() const { return td_.keys(); }
  bool contains(KeyRef key) const { return td_.contains(key); }
  /// The tensor at `key` (nested keys walk nested fields).
  at::Tensor get(KeyRef key) const { return td_.get(key); }
  /// Locks or unlocks the backend.
  void lock_() { td_.lock_(); }
  void unlock_() { td_.unlock_(); }

 protected:
  TensorDict td_;
};

}  // namespace typed

template <class Derived, class Base = typed::TensorClassRoot>
class TensorClass : public typed::TypedOps<Derived, Base> {
  using Ops = typed::TypedOps<Derived, Base>;

 public:
  /// An empty object (batch size [], no fields): fill it with the generated setters.
  TensorClass() = default;
  /// Wraps `td` without checking it.
  TensorClass(typed::Unchecked tag, TensorDict td) : Ops(tag, std::move(td)) {}
  /// A new in-memory object from field -> value pairs (Python `C(x=..., s=..., batch_size=...)`).
  TensorClass(c10::ArrayRef<TensorDict::Item> items, c10::IntArrayRef batch_size,
              std::optional<at::Device> device)
      : Ops(typed::unchecked, typed::build_tensor_class(Derived::Traits::schema, items, batch_size, device)) {}

  /// Wraps `td` live (no copy: writes go to `td`'s backend). With `check`, keys the class
  /// does not declare are refused and declared fields that are present must be well-typed (and
  /// agree on named dims). A frozen class locks `td`.
  static Derived from_tensordict(TensorDict td, bool check = true) {
    if (check) typed::check_tensor_class(Derived::Traits::schema, td);
    // A frozen class locks what it wraps: its objects are never writable (Python leaves them so).
    if (Derived::Traits::schema.frozen) td.lock_();
    return Derived(typed::unchecked, std::move(td));
  }

  /// Sets a declared field by name, checked like its generated setter; AttributeError for a
  /// name the class does not declare.
  Derived& set(const std::string& key, EntryInit value) {
    typed::set_tensor_class_field(Derived::Traits::schema, this->typed_storage(), key, std::move(value));
    return static_cast<Derived&>(*this);
  }
};

}  // namespace tensordict
