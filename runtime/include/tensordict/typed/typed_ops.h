#pragma once
// TypedOps: the tensordict operations whose result is a tensordict, re-declared to return the
// typed class. TypedTensorDict and TensorClass both derive from it; a class extending another
// typed class derives from TypedOps<Derived, Parent> again, so its operations return the
// extending class and hide the parent's. Results wrap the TensorDict result without copying or
// re-checking it, like Python tensordict does.
//
// `Base` provides `typed_storage()` (the TensorDict holding the data) and a constructor
// `Base(typed::Unchecked, TensorDict)`.

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/tensor_dict.h>
#include <tensordict/typed/field.h>

namespace tensordict {
namespace typed {

template <class Derived, class Base>
class TypedOps : public Base {
 public:
  TypedOps() = default;
  TypedOps(Unchecked tag, TensorDict td) : Base(tag, std::move(td)) {}

  /// Python's repr with the class name in front: `Step(\n    fields={...`.
  std::string repr() const { return rename_repr(storage().repr(), Derived::Traits::name); }

  /// `self[indices]` over the batch dims, as the typed class.
  Derived index(c10::ArrayRef<at::indexing::TensorIndex> indices) const {
    return wrap(storage().index(indices));
  }
  Derived index(std::initializer_list<at::indexing::TensorIndex> indices) const {
    return wrap(storage().index(indices));
  }

  // Batch shape operations, as the typed class.
  Derived view(c10::IntArrayRef shape) const { return wrap(storage().view(shape)); }
  Derived reshape(c10::IntArrayRef shape) const { return wrap(storage().reshape(shape)); }
  Derived permute(c10::IntArrayRef dims) const { return wrap(storage().permute(dims)); }
  Derived transpose(int64_t dim0, int64_t dim1) const { return wrap(storage().transpose(dim0, dim1)); }
  Derived squeeze() const { return wrap(storage().squeeze()); }
  Derived squeeze(int64_t dim) const { return wrap(storage().squeeze(dim)); }
  Derived unsqueeze(int64_t dim) const { return wrap(storage().unsqueeze(dim)); }
  Derived expand(c10::IntArrayRef shape) const { return wrap(storage().expand(shape)); }
  Derived flatten(int64_t start_dim = 0, int64_t end_dim = -1) const {
    return wrap(storage().flatten(start_dim, end_dim));
  }
  Derived unflatten(int64_t dim, c10::IntArrayRef sizes) const { return wrap(storage().unflatten(dim, sizes)); }

  // Several results, each the typed class.
  std::vector<Derived> split(int64_t split_size, int64_t dim = 0) const {
    return wrap_all(storage().split(split_size, dim));
  }
  std::vector<Derived> split(c10::IntArrayRef split_sizes, int64_t dim = 0) const {
    return wrap_all(storage().split(split_sizes, dim));
  }
  std::vector<Derived> chunk(int64_t chunks, int64_t dim = 0) const { return wrap_all(storage().chunk(chunks, dim)); }
  std::vector<Derived> unbind(int64_t dim = 0) const { return wrap_all(storage().unbind(dim)); }

  // Copies and conversions, as the typed class.
  Derived to(at::Device device, bool non_blocking = false) const { return wrap(storage().to(device, non_blocking)); }
  Derived to(at::ScalarType dtype) const { return wrap(storage().to(dtype)); }
  Derived to(at::Device device, at::ScalarType dtype, bool non_blocking = false) const {
    return wrap(storage().to(device, dtype, non_blocking));
  }
  Derived cpu() const { return wrap(storage().cpu()); }
  /// Deep copy (recurse) or a new object sharing the leaves (!recurse).
  Derived clone(bool recurse = true) const { return wrap(storage().clone(recurse)); }
  Derived detach() const { return wrap(storage().detach()); }
  Derived contiguous() const { return wrap(storage().contiguous()); }

  /// A deep copy as a plain TensorDict (Python `to_tensordict()`).
  TensorDict to_tensordict() const { return storage().clone(true); }

  /// Dense stack of objects of this class along a new batch dim.
  static Derived stack(const std::vector<Derived>& items, int64_t dim = 0) {
    return wrap(tensordict::stack(storages(items), dim));
  }
  /// Concatenation of objects of this class along batch dim `dim`.
  static Derived cat(const std::vector<Derived>& items, int64_t dim = 0) {
    return wrap(tensordict::cat(storages(items), dim));
  }

 protected:
  const TensorDict& storage() const { return this->typed_storage(); }
  static Derived wrap(TensorDict td) { return Derived(unchecked, std::move(td)); }
  static std::vector<Derived> wrap_all(std::vector<TensorDict> tds) {
    std::vector<Derived> out;
    out.reserve(tds.size());
    for (auto& td : tds) out.push_back(wrap(std::move(td)));
    return out;
  }
  static std::vector<TensorDict> storages(const std::vector<Derived>& items) {
    std::vector<TensorDict> out;
    out.reserve(items.size());
    for (const auto& item : items) out.push_back(item.typed_storage());
    return out;
  }
};

/// True for classes generated from a schema (TypedTensorDict or TensorClass).
template <class T, class = void>
struct is_typed : std::false_type {};
template <class T>
struct is_typed<T, std::void_t<typename T::Traits, decltype(T::Traits::schema)>> : std::true_type {};

}  // namespace typed

/// `stack` of typed objects returns their class: stack(std::vector<Step>{a, b}) is a Step.
template <class T, std::enable_if_t<typed::is_typed<T>::value, int> = 0>
T stack(const std::vector<T>& items, int64_t dim = 0) {
  return T::stack(items, dim);
}
/// `cat` of typed objects returns their class.
template <class T, std::enable_if_t<typed::is_typed<T>::value, int> = 0>
T cat(const std::vector<T>& items, int64_t dim = 0) {
  return T::cat(items, dim);
}

}  // namespace tensordict
