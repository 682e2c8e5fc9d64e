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
#include <memory>
#include <optional>
#include <ostream>
#include <type_traits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/backends/leaf_spec.h>
#include <tensordict/backends/memmap.h>
#include <tensordict/batch_index.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/typed/field.h>

namespace torch {
namespace nn {
class Module;
}  // namespace nn
}  // namespace torch

namespace tensordict {

// The backends of store_like and h5_like: declared by their own headers, which a caller of
// either includes (see there).
class TensorDictStore;
struct StoreOptions;
class PersistentTensorDict;
struct H5Options;

namespace nn {
// Declared by <tensordict/nn/params.h>: the classes' from_modules compiles without torch/nn.
TensorDict from_modules(const std::vector<std::shared_ptr<torch::nn::Module>>& modules);
}  // namespace nn

namespace typed {

/// True for classes generated from a schema (TypedTensorDict or TensorClass).
template <class T, class = void>
struct is_typed : std::false_type {};
template <class T>
struct is_typed<T, std::void_t<typename T::Traits, decltype(T::Traits::schema)>> : std::true_type {};

/// A typed object that is not itself a TensorDict (a TensorClass): passed by its tensordict.
template <class T>
using if_typed_wrapper = std::enable_if_t<is_typed<T>::value && !std::is_base_of_v<TensorDict, T>, int>;

// Helpers of TypedOps' state-dict members, compiled once (runtime/src/typed/typed_ops.cpp).

/// What `current.load_state_dict(sd, ..., assign=true)` would make of `current`: a new in-memory
/// tree of the state dict's tensors and batch sizes, plus `current`'s non-tensor entries when
/// `with_non_tensor` (a state dict holds tensors only). For TypedOps::load_state_dict's checks.
TensorDict state_dict_tree(const TensorDict& current, const StateDict& sd, bool with_non_tensor);
/// Puts back non-tensor entries (`TensorDict::non_tensor_items(true)`) whose level still exists.
void restore_non_tensor(TensorDict& td, const std::vector<std::pair<NestedKey, NonTensorData>>& entries);

/// A module handle (ModuleHolder, `ptr()`) or a shared_ptr to a module, as the module's base.
template <class M>
std::shared_ptr<torch::nn::Module> module_ptr(const std::shared_ptr<M>& module) {
  return module;
}
template <class H>
auto module_ptr(const H& holder) -> decltype(std::shared_ptr<torch::nn::Module>(holder.ptr())) {
  return holder.ptr();
}

template <class Derived, class Base>
class TypedOps : public Base {
 public:
  TypedOps() = default;
  TypedOps(Unchecked tag, TensorDict td) : Base(tag, std::move(td)) {}

  /// Python's repr with the class name in front: `Step(\n    fields={...`.
  std::string repr() const { return typed_repr(storage(), Derived::Traits::schema); }

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

  // ---- Writes, checked against the schema ------------------------------------------------
  // The value's tensor fields must have the declared dtype and event shape exactly (no silent
  // cast or broadcast of a field), nested fields are checked against their class, and a
  // TensorClass refuses undeclared keys: the same messages as the setters, naming class.field.

  /// `self[indices] = value`, field by field through the backend.
  Derived& index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices, const TensorDict& value) {
    check_write(Derived::Traits::schema, value);
    this->typed_storage().index_put_(indices, value);
    return self();
  }
  Derived& index_put_(std::initializer_list<at::indexing::TensorIndex> indices, const TensorDict& value) {
    return index_put_(c10::ArrayRef<at::indexing::TensorIndex>(indices), value);
  }
  template <class T, if_typed_wrapper<T> = 0>
  Derived& index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices, const T& value) {
    return index_put_(indices, value.typed_storage());
  }
  template <class T, if_typed_wrapper<T> = 0>
  Derived& index_put_(std::initializer_list<at::indexing::TensorIndex> indices, const T& value) {
    return index_put_(c10::ArrayRef<at::indexing::TensorIndex>(indices), value.typed_storage());
  }
  /// Every tensor field of the region set to one value, cast to each field's dtype (as fill_:
  /// one number for all fields, so no schema check applies).
  Derived& index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices, const at::Tensor& value) {
    this->typed_storage().index_put_(indices, value);
    return self();
  }
  Derived& index_put_(std::initializer_list<at::indexing::TensorIndex> indices, const at::Tensor& value) {
    return index_put_(c10::ArrayRef<at::indexing::TensorIndex>(indices), value);
  }
  Derived& index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices, const c10::Scalar& value) {
    this->typed_storage().index_put_(indices, value);
    return self();
  }
  Derived& index_put_(std::initializer_list<at::indexing::TensorIndex> indices, const c10::Scalar& value) {
    return index_put_(c10::ArrayRef<at::indexing::TensorIndex>(indices), value);
  }

  /// TensorDict::update with `source` checked first (the whole source, whatever keys_to_update).
  Derived& update(const TensorDict& source, bool clone = false, bool inplace = false,
                  const std::optional<std::vector<NestedKey>>& keys_to_update = std::nullopt) {
    check_write(Derived::Traits::schema, source);
    this->typed_storage().update(source, clone, inplace, keys_to_update);
    return self();
  }
  template <class T, if_typed_wrapper<T> = 0>
  Derived& update(const T& source, bool clone = false, bool inplace = false) {
    return update(source.typed_storage(), clone, inplace);
  }
  /// TensorDict::update_ (copies into the existing fields) with `source` checked first.
  Derived& update_(const TensorDict& source) {
    check_write(Derived::Traits::schema, source);
    this->typed_storage().update_(source);
    return self();
  }
  template <class T, if_typed_wrapper<T> = 0>
  Derived& update_(const T& source) {
    return update_(source.typed_storage());
  }
  /// TensorDict::update_at_ with `source` checked first.
  Derived& update_at_(const TensorDict& source, c10::ArrayRef<at::indexing::TensorIndex> index) {
    check_write(Derived::Traits::schema, source);
    this->typed_storage().update_at_(source, index);
    return self();
  }
  Derived& update_at_(const TensorDict& source, std::initializer_list<at::indexing::TensorIndex> index) {
    return update_at_(source, c10::ArrayRef<at::indexing::TensorIndex>(index));
  }
  /// TensorDict::set_at_ with `value` checked against the field at `key`: the indexed batch
  /// dims, then the declared event shape and dtype.
  Derived& set_at_(KeyRef key, const at::Tensor& value, c10::ArrayRef<at::indexing::TensorIndex> index) {
    const BatchIndex parsed(index, this->typed_storage().batch_size());
    check_write_at(Derived::Traits::schema, key, parsed.result_batch_size(), value);
    this->typed_storage().set_at_(key, value, index);
    return self();
  }
  Derived& set_at_(KeyRef key, const at::Tensor& value, std::initializer_list<at::indexing::TensorIndex> index) {
    return set_at_(key, value, c10::ArrayRef<at::indexing::TensorIndex>(index));
  }

  // ---- Iteration over dim 0 (Python `for row in obj`): each row is this class --------------
  RowIterator<Derived> begin() const {
    check_iterable(storage());
    return RowIterator<Derived>(&storage(), 0, &TypedOps::wrap);
  }
  RowIterator<Derived> end() const {
    return RowIterator<Derived>(&storage(), storage().batch_dims() ? storage().batch_size()[0] : 0, nullptr);
  }

  // ---- Typed buffers on disk -------------------------------------------------------------

  /// A zero-filled memory-mapped object of this class in the directory `prefix`, preallocated
  /// from the schema alone (no example tensors, nothing allocated full-size in memory). Tensor
  /// fields need a concrete dtype and event shape (ValueError naming the field otherwise);
  /// optional fields without them are left out. Non-tensor fields start as "", 0, 0.0 or false
  /// (null when optional). A directory that already holds a tensordict is refused unless
  /// `options.overwrite`.
  static Derived memmap_like(c10::IntArrayRef batch_size, const std::string& prefix,
                             const MemmapOptions& options = {}) {
    return wrap(tensordict::memmap_like(schema_skeleton(Derived::Traits::schema, batch_size), prefix, options));
  }
  /// A store of this class on a Redis server, preallocated from the schema as memmap_like
  /// does (TensorDictStore::from_schema: the server zero-fills the tensors, no tensor bytes
  /// leave the client; non-tensor fields "", 0, 0.0, false or null). A store that exists under
  /// options.td_id is refused unless `options.overwrite`. Needs <tensordict/backends/store.h>
  /// (a template, so that classes compile without it) and a runtime built with Redis.
  template <class Store = TensorDictStore, class Options = StoreOptions>
  static Derived store_like(c10::IntArrayRef batch_size, const Options& options = Options()) {
    return wrap(Store::from_schema(leaf_specs(schema_skeleton(Derived::Traits::schema, batch_size)), batch_size, options));
  }
  /// An HDF5 file of this class at `path`, preallocated from the schema as memmap_like does
  /// (PersistentTensorDict::from_schema: datasets never written read as zeros). An existing
  /// file is refused unless `options.overwrite`. Needs <tensordict/backends/persistent.h> and a
  /// runtime built with HDF5.
  template <class File = PersistentTensorDict, class Options = H5Options>
  static Derived h5_like(c10::IntArrayRef batch_size, const std::string& path, const Options& options = Options()) {
    return wrap(File::from_schema(leaf_specs(schema_skeleton(Derived::Traits::schema, batch_size)), batch_size, path,
                                  options));
  }
  /// Maps a directory written by memmap / memmap_like (or Python) and checks it against the
  /// schema (from_tensordict's checks).
  static Derived load_memmap(const std::string& prefix, const LoadMemmapOptions& options = {}) {
    return Derived::from_tensordict(tensordict::load_memmap(prefix, options));
  }

  // ---- Saving, loading, state dicts (Python tensorclass's memmap / save / load family) ----
  // Results are the typed class. What is read from outside (a directory, a state dict, keys,
  // modules) is checked as from_tensordict checks it, before the object is changed.

  /// Writes this object to the directory `prefix` (Python's format) and returns a memmapped,
  /// locked copy of this class whose leaves map the written files (tensordict::memmap).
  Derived memmap(const std::string& prefix, const MemmapOptions& options = {}) const {
    return wrap(tensordict::memmap(storage(), prefix, options));
  }
  /// Aliases of memmap (Python's `save` and `dumps`).
  Derived save(const std::string& prefix, const MemmapOptions& options = {}) const { return memmap(prefix, options); }
  Derived dumps(const std::string& prefix, const MemmapOptions& options = {}) const { return memmap(prefix, options); }
  /// memmap in place: this object's leaves become the written files' mappings and it is locked
  /// (tensordict::memmap_; the object must be on the CPU). Returns this object.
  Derived& memmap_(const std::string& prefix, const MemmapOptions& options = {}) {
    tensordict::memmap_(this->typed_storage(), prefix, options);
    return self();
  }
  /// The directory `prefix` as this class (an alias of load_memmap): ValueError / TypeError /
  /// ShapeError naming the field when it does not hold the schema.
  static Derived load(const std::string& prefix, const LoadMemmapOptions& options = {}) {
    return load_memmap(prefix, options);
  }
  /// Loads the directory `prefix` into this object in place (tensordict::load_memmap_, Python's
  /// load_memmap_ / load_): the directory is checked against the schema first, so a directory
  /// that does not hold this class leaves the object as it was. Then every entry on disk
  /// replaces this object's (nested fields are loaded into), the others stay, and the batch
  /// size is kept; a memmapped object gets the values copied into its own files. Returns this
  /// object.
  Derived& load_(const std::string& prefix, const LoadMemmapOptions& options = {}) {
    (void)load(prefix, options);
    tensordict::load_memmap_(this->typed_storage(), prefix, options);
    return self();
  }
  Derived& load_memmap_(const std::string& prefix, const LoadMemmapOptions& options = {}) {
    return load_(prefix, options);
  }
  /// Reloads a memmapped object from its directory (tensordict::memmap_refresh_), picking up
  /// entries other writers added; the directory is checked against the schema first, so a
  /// directory that no longer holds this class leaves the object as it was.
  Derived& memmap_refresh_() {
    (void)load(memmap_path(storage()));
    tensordict::memmap_refresh_(this->typed_storage());
    return self();
  }

  /// The flat state dict of the tensor fields (TensorDict::state_dict; non-tensor fields are
  /// not tensors, so they are not in it).
  StateDict state_dict(std::string_view separator = ".", bool keep_vars = false) const {
    return storage().state_dict(separator, keep_vars);
  }
  /// TensorDict::load_state_dict with the state dict checked against the schema first (dtype
  /// and event shape of every field exactly, undeclared keys of a TensorClass refused; with
  /// `assign`, the result as from_tensordict checks it). Non-tensor fields are kept, also with
  /// `assign`. Returns this object.
  Derived& load_state_dict(const StateDict& sd, bool strict = true, bool assign = false) {
    if (assign) {
      (void)Derived::from_tensordict(state_dict_tree(storage(), sd, /*with_non_tensor=*/true));
      auto kept = storage().non_tensor_items(/*include_nested=*/true);
      this->typed_storage().load_state_dict(sd, strict, assign);
      restore_non_tensor(this->typed_storage(), kept);
    } else {
      check_write(Derived::Traits::schema, state_dict_tree(storage(), sd, /*with_non_tensor=*/false));
      this->typed_storage().load_state_dict(sd, strict, assign);
    }
    return self();
  }

  /// TensorDict::fromkeys as this class (batch size [], `value` at every key), checked by
  /// from_tensordict: every key must be a field (TensorClass) and `value` fit each field.
  static Derived fromkeys(const std::vector<NestedKey>& keys, const c10::Scalar& value = 0) {
    return Derived::from_tensordict(TensorDict::fromkeys(keys, value));
  }
  static Derived fromkeys(const std::vector<NestedKey>& keys, const at::Tensor& value) {
    return Derived::from_tensordict(TensorDict::fromkeys(keys, value));
  }
  static Derived fromkeys(const std::vector<NestedKey>& keys, const std::string& value) {
    return Derived::from_tensordict(TensorDict::fromkeys(keys, value));
  }
  static Derived fromkeys(const std::vector<NestedKey>& keys, const char* value) {
    return fromkeys(keys, std::string(value));
  }

  /// The parameters and buffers of identical modules stacked along a new batch dim 0
  /// (nn::from_modules), as this class: parameter names are the fields, submodules nested
  /// fields; checked by from_tensordict (ValueError for parameters the schema lacks, ...).
  /// Classes compile without torch/nn: the caller includes its modules' headers.
  static Derived from_modules(const std::vector<std::shared_ptr<torch::nn::Module>>& modules) {
    return Derived::from_tensordict(nn::from_modules(modules));
  }
  /// The same from module handles (`torch::nn::Linear`, ...) or shared_ptrs to modules.
  template <class M, class... More, class = decltype(module_ptr(std::declval<const M&>()))>
  static Derived from_modules(const M& first, const More&... more) {
    return from_modules(std::vector<std::shared_ptr<torch::nn::Module>>{module_ptr(first), module_ptr(more)...});
  }

  /// A deep copy as a plain TensorDict (Python `to_tensordict()`).
  TensorDict to_tensordict() const { return storage().clone(true); }

  /// Dense stack of objects of this class along a new batch dim.
  static Derived stack(const std::vector<Derived>& items, int64_t dim = 0) {
    return wrap(tensordict::stack(storages(items), dim));
  }
  /// Lazy stack of objects of this class along a new batch dim: nothing is copied, the result
  /// is this class over a LazyStackedTensorDict, and its element `i` (index({i})) wraps the
  /// very tensordict items[i] wraps. Objects may differ in ragged fields and batch dims.
  static Derived lazy_stack(const std::vector<Derived>& items, int64_t dim = 0) {
    return wrap(tensordict::lazy_stack(storages(items), dim));
  }
  /// tensordict::maybe_dense_stack as this class: a dense stack when the objects match (keys,
  /// kinds, leaf shapes, batch size), a lazy stack of them otherwise (ragged fields, ...).
  static Derived maybe_dense_stack(const std::vector<Derived>& items, int64_t dim = 0) {
    return wrap(tensordict::maybe_dense_stack(storages(items), dim));
  }
  /// Concatenation of objects of this class along batch dim `dim`.
  static Derived cat(const std::vector<Derived>& items, int64_t dim = 0) {
    return wrap(tensordict::cat(storages(items), dim));
  }

 protected:
  const TensorDict& storage() const { return this->typed_storage(); }
  Derived& self() { return static_cast<Derived&>(*this); }
  const Derived& self() const { return static_cast<const Derived&>(*this); }
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

}  // namespace typed

/// Prints Python's repr with the class name: `Transition(\n    fields={...`.
template <class T, std::enable_if_t<typed::is_typed<T>::value, int> = 0>
std::ostream& operator<<(std::ostream& os, const T& value) {
  return os << value.repr();
}

/// `stack` of typed objects returns their class: stack(std::vector<Step>{a, b}) is a Step.
template <class T, std::enable_if_t<typed::is_typed<T>::value, int> = 0>
T stack(const std::vector<T>& items, int64_t dim = 0) {
  return T::stack(items, dim);
}
/// `lazy_stack` of typed objects returns their class over a lazy stack of their tensordicts.
template <class T, std::enable_if_t<typed::is_typed<T>::value, int> = 0>
T lazy_stack(const std::vector<T>& items, int64_t dim = 0) {
  return T::lazy_stack(items, dim);
}
/// `maybe_dense_stack` of typed objects returns their class, over a dense or a lazy stack.
template <class T, std::enable_if_t<typed::is_typed<T>::value, int> = 0>
T maybe_dense_stack(const std::vector<T>& items, int64_t dim = 0) {
  return T::maybe_dense_stack(items, dim);
}
/// `cat` of typed objects returns their class.
template <class T, std::enable_if_t<typed::is_typed<T>::value, int> = 0>
T cat(const std::vector<T>& items, int64_t dim = 0) {
  return T::cat(items, dim);
}

}  // namespace tensordict
