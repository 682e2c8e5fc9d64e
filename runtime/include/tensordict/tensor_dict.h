#pragma once
// TensorDict: the handle users hold. Like at::Tensor it has reference semantics: copying the
// handle shares the entries, `clone()` copies the data. It works on any backend through the
// TensorDictBase interface; behaviour follows Python tensordict (v0.14), spelled the way
// LibTorch's C++ API spells it (index, index_put_, sizes, to).

#include <initializer_list>
#include <iterator>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>
#include <c10/util/intrusive_ptr.h>

#include <tensordict/errors.h>
#include <tensordict/json.h>
#include <tensordict/key.h>
#include <tensordict/non_tensor.h>
#include <tensordict/op_options.h>
#include <tensordict/tensor_dict_base.h>

/// The pointwise unary operations of TensorDict, each with an in-place `_` form. The first list
/// has `_foreach_*` kernels in every supported LibTorch (1.13 has no `_foreach_sign`).
#define TENSORDICT_FORALL_UNARY_OPS_WITH_FOREACH(_)                                             \
  _(abs) _(acos) _(asin) _(atan) _(ceil) _(cos) _(cosh) _(erf) _(erfc) _(exp) _(expm1)         \
  _(floor) _(frac) _(lgamma) _(log) _(log10) _(log1p) _(log2) _(neg) _(reciprocal) _(round)    \
  _(sigmoid) _(sin) _(sinh) _(sqrt) _(tan) _(tanh) _(trunc)
#define TENSORDICT_FORALL_UNARY_OPS(_) TENSORDICT_FORALL_UNARY_OPS_WITH_FOREACH(_) _(sign)

namespace tensordict {

class Entry;
class EntryInit;

/// Which keys `keys()`, `items()` and `values()` list.
struct KeysOptions {
  bool include_nested = false;  ///< descend into nested tensordicts
  bool leaves_only = false;     ///< drop nested tensordicts and non-tensor entries
};

struct ValuesIndices;

/// `td[i]` along dim 0 (what iteration yields).
TensorDict row_of(const TensorDict& td, int64_t i);
/// ValueError for iterating a tensordict with no batch dims (as Python refuses a 0-d one).
void check_iterable(const TensorDict& td);

/// Iterates dim 0 of a tensordict or typed object (Python's `for row in td`): row i is `td[i]`
/// (a view, as indexing gives), wrapped as `Row` by `wrap`.
template <class Row>
class RowIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Row;
  using difference_type = int64_t;
  using pointer = void;
  using reference = Row;

  RowIterator(const TensorDict* td, int64_t row, Row (*wrap)(TensorDict)) : td_(td), row_(row), wrap_(wrap) {}
  Row operator*() const;  // defined below TensorDict, whose type row_of returns
  RowIterator& operator++() {
    ++row_;
    return *this;
  }
  bool operator==(const RowIterator& other) const { return row_ == other.row_; }
  bool operator!=(const RowIterator& other) const { return row_ != other.row_; }

 private:
  const TensorDict* td_;
  int64_t row_;
  Row (*wrap_)(TensorDict);
};

class TensorDict {
 public:
  using Item = std::pair<std::string, EntryInit>;

  /// An empty in-memory tensordict with batch size [] and no device.
  TensorDict();
  /// An in-memory tensordict from key -> value pairs; values may be tensors, tensordicts,
  /// nested braced lists of pairs, strings (non-tensor data) or numbers (0-dim tensors).
  /// Every tensor's leading dims must equal `batch_size`; with a `device`, leaves move there;
  /// `names` names the batch dims (set_names).
  TensorDict(std::initializer_list<Item> items, c10::IntArrayRef batch_size = {},
             std::optional<at::Device> device = std::nullopt, const DimNames& names = {});
  TensorDict(const std::vector<Item>& items, c10::IntArrayRef batch_size = {},
             std::optional<at::Device> device = std::nullopt, const DimNames& names = {});
  /// Wraps a backend.
  explicit TensorDict(c10::intrusive_ptr<TensorDictBase> impl);

  /// An empty in-memory tensordict with this batch size and device.
  static TensorDict empty_with(c10::IntArrayRef batch_size,
                               std::optional<at::Device> device = std::nullopt);

  // ---- Handle --------------------------------------------------------------------------
  TensorDictBase* impl() const { return impl_.get(); }
  const c10::intrusive_ptr<TensorDictBase>& impl_ptr() const { return impl_; }
  /// True when both handles refer to the same tensordict.
  bool is_same(const TensorDict& other) const { return impl_ == other.impl_; }
  size_t use_count() const { return impl_.use_count(); }

  // ---- Batch size and device -------------------------------------------------------------
  c10::IntArrayRef batch_size() const { return impl_->batch_size(); }
  c10::IntArrayRef sizes() const { return impl_->batch_size(); }
  int64_t size(int64_t dim) const;
  int64_t batch_dims() const { return impl_->batch_dims(); }
  int64_t dim() const { return impl_->batch_dims(); }
  /// prod(batch_size): 1 for batch size [], 0 when a dim is 0 (Python returns 1 there: a
  /// quirk this port fixes).
  int64_t numel() const;
  const std::optional<at::Device>& device() const { return impl_->device(); }
  /// Re-validates every entry against the new batch size (Python `td.batch_size = ...`).
  TensorDict& set_batch_size(c10::IntArrayRef batch_size);
  bool is_locked() const { return impl_->is_locked(); }
  bool is_shared() const { return impl_->is_shared(); }
  bool is_memmap() const { return impl_->is_memmap(); }
  const char* type_name() const { return impl_->type_name(); }

  // ---- Keys and entries ------------------------------------------------------------------
  bool contains(KeyRef key) const;
  /// The tensor at `key`. Throws KeyError (naming the keys that exist) when missing, and
  /// TypeError when the entry is a tensordict or non-tensor data.
  at::Tensor get(KeyRef key) const;
  at::Tensor operator[](KeyRef key) const { return get(key); }
  /// The tensor at `key`, or `default_value` when the key is missing.
  at::Tensor get(KeyRef key, const at::Tensor& default_value) const;
  TensorDict get_tensordict(KeyRef key) const;
  NonTensorData get_non_tensor(KeyRef key) const;
  /// Whatever is stored at `key`; throws KeyError when missing.
  Entry get_entry(KeyRef key) const;
  /// Whatever is stored at `key`, or an undefined Entry when missing.
  Entry find(KeyRef key) const;

  /// Stores `value` at `key`, replacing any entry, creating intermediate tensordicts.
  /// Checks the batch dims, moves the value to the tensordict's device. Returns *this.
  TensorDict& set(KeyRef key, at::Tensor value);
  TensorDict& set(KeyRef key, EntryInit value);
  /// Copies `value` into the existing entry at `key` (key must exist; dtype and device of the
  /// destination are kept). Allowed on locked tensordicts.
  TensorDict& set_(KeyRef key, const at::Tensor& value);
  TensorDict& set_(KeyRef key, const TensorDict& value);
  /// Stores a non-tensor value (Python NonTensorData).
  TensorDict& set_non_tensor(KeyRef key, json::Value value);
  /// Replaces the value of the existing non-tensor entry at `key` (one value, or a stack shaped
  /// like the batch) through the backend: allowed on locked and memory-mapped tensordicts, where
  /// the directory is rewritten.
  TensorDict& set_non_tensor_(KeyRef key, NonTensorData value);
  /// The shape of the entry at `key` (a tensordict's batch size), from the backend's metadata.
  std::vector<int64_t> get_item_shape(KeyRef key) const;
  /// Removes the entry at `key`; KeyError when missing.
  TensorDict& erase(KeyRef key);
  /// Removes and returns the entry at `key`; KeyError when missing.
  Entry pop(KeyRef key);
  /// Removes and returns the entry at `key`, or returns `default_value` when missing.
  Entry pop(KeyRef key, Entry default_value);
  /// Renames `old_key` to `new_key` (the entry moves, no copy). With `safe`, an existing
  /// `new_key` is an error; otherwise it is replaced.
  TensorDict& rename_key_(KeyRef old_key, KeyRef new_key, bool safe = false);

  /// Keys in insertion order. With include_nested, a nested tensordict's key comes before its
  /// children (pre-order): {"a"}, {"a","b"}, {"c"}. With leaves_only, only tensor leaves.
  std::vector<NestedKey> keys(bool include_nested = false, bool leaves_only = false) const;
  std::vector<std::pair<NestedKey, Entry>> items(bool include_nested = false,
                                                 bool leaves_only = false) const;
  std::vector<Entry> values(bool include_nested = false, bool leaves_only = false) const;
  /// Number of entries at the top level.
  size_t num_keys() const { return impl_->num_entries(); }

  // ---- Batch indexing --------------------------------------------------------------------
  /// `td[indices]` over the batch dims. Integers, slices, None and Ellipsis give views;
  /// masks and index tensors give copies; `{}`, `{Ellipsis}` and `{Slice()}` give *this.
  TensorDict index(c10::ArrayRef<at::indexing::TensorIndex> indices) const;
  TensorDict index(std::initializer_list<at::indexing::TensorIndex> indices) const;
  /// `td[indices] = value` for every key of `value`; keys absent here are created as zeros
  /// of the full batch size first (Python's pre-allocation).
  TensorDict& index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices, const TensorDict& value);
  TensorDict& index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                         const TensorDict& value);
  /// `leaf[indices] = value` for every tensor leaf.
  TensorDict& index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices, const at::Tensor& value);
  TensorDict& index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                         const at::Tensor& value);
  TensorDict& index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices, const c10::Scalar& value);
  TensorDict& index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                         const c10::Scalar& value);

  // ---- Batch shape operations (batch dims only; views where the leaf op gives views) ----
  TensorDict view(c10::IntArrayRef shape) const;
  TensorDict reshape(c10::IntArrayRef shape) const;
  TensorDict permute(c10::IntArrayRef dims) const;
  TensorDict transpose(int64_t dim0, int64_t dim1) const;
  TensorDict squeeze() const;
  TensorDict squeeze(int64_t dim) const;
  TensorDict unsqueeze(int64_t dim) const;
  TensorDict expand(c10::IntArrayRef shape) const;
  TensorDict flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  TensorDict unflatten(int64_t dim, c10::IntArrayRef sizes) const;
  /// Tiles the batch: dim d grows `repeats[d]` times (one count per batch dim).
  TensorDict repeat(c10::IntArrayRef repeats) const;
  /// Repeats each row of batch dim `dim` (no dim: of the flattened batch) `repeats` times, or
  /// repeats[i] times for row i.
  TensorDict repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  TensorDict repeat_interleave(const at::Tensor& repeats, std::optional<int64_t> dim = std::nullopt) const;
  /// Rolls rows along batch dims `dims` (none: the flattened batch) by `shifts`.
  TensorDict roll(c10::IntArrayRef shifts, c10::IntArrayRef dims = {}) const;
  /// Python's `inplace=True`: this handle and its nested tensordicts are rebound to the result.
  /// An in-memory tensordict only (NotImplementedError otherwise; roll_ writes through any backend).
  TensorDict& reshape_(c10::IntArrayRef shape);
  TensorDict& flatten_(int64_t start_dim = 0, int64_t end_dim = -1);
  TensorDict& unflatten_(int64_t dim, c10::IntArrayRef sizes);
  TensorDict& contiguous_();
  TensorDict& gather_(int64_t dim, const at::Tensor& index);
  TensorDict& repeat_(c10::IntArrayRef repeats);
  TensorDict& repeat_interleave_(int64_t repeats, int64_t dim);
  TensorDict& repeat_interleave_(const at::Tensor& repeats, int64_t dim);
  TensorDict& roll_(c10::IntArrayRef shifts, c10::IntArrayRef dims = {});

  // ---- Batch-dim names (Python's names; kept by indexing, shape ops, stack, cat, memmap) ----
  /// One name per batch dim, nullopt where a dim is unnamed.
  DimNames names() const;
  /// Names the batch dims (none named erases them): ValueError for duplicates or a count other
  /// than batch_dims(). Nested tensordicts take them as their leading names.
  TensorDict& set_names(const DimNames& names);
  /// Names unnamed dims in place; a named dim must keep its name (RuntimeError); "..." stands
  /// for the current names of the dims it covers.
  TensorDict& refine_names(const DimNames& names);
  /// A shallow copy with new names (a list, or a map old -> new); rename_ renames in place.
  TensorDict rename(const DimNames& names) const;
  TensorDict rename(const NameMap& mapping) const;
  TensorDict& rename_(const DimNames& names);
  TensorDict& rename_(const NameMap& mapping);

  // ---- Several tensordicts ---------------------------------------------------------------
  std::vector<TensorDict> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<TensorDict> split(c10::IntArrayRef split_sizes, int64_t dim = 0) const;
  std::vector<TensorDict> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<TensorDict> unbind(int64_t dim = 0) const;

  // ---- Copies and conversions ------------------------------------------------------------
  /// All leaves on `device`; returns *this when the device is already `device`.
  TensorDict to(at::Device device, bool non_blocking = false) const;
  /// All tensor leaves cast to `dtype` (integer and bool leaves too).
  TensorDict to(at::ScalarType dtype) const;
  TensorDict to(at::Device device, at::ScalarType dtype, bool non_blocking = false) const;
  TensorDict cpu() const;
  /// Deep copy (recurse) or a new tensordict sharing the leaves (!recurse). Never locked.
  TensorDict clone(bool recurse = true) const;
  TensorDict detach() const;
  /// Contiguous leaves; a backend whose reads are new tensors (a lazy stack) gives a dense
  /// in-memory tensordict.
  TensorDict contiguous() const;
  /// A dense in-memory deep copy (Python `to_tensordict()`): lazy stacks are stacked (ragged
  /// leaves raise), files and stores read.
  TensorDict to_tensordict() const;
  /// A tensordict with no entries, the same batch size and device (Python `empty()`); with
  /// `recurse`, nested tensordicts are kept, empty.
  TensorDict empty(bool recurse = false) const;
  /// Leaves replaced by uninitialized tensors of the same shape, dtype and device
  /// (`torch.empty_like` over the tensordict).
  TensorDict empty_like() const;
  TensorDict& zero_();
  /// Fills the tensor at `key` with `value`.
  TensorDict& fill_(KeyRef key, const c10::Scalar& value);
  /// Fills every tensor leaf with `value`.
  TensorDict& fill_(const c10::Scalar& value);

  // ---- Locking ---------------------------------------------------------------------------
  /// Locks this tensordict and every nested one: new keys, erase, rename and non-in-place
  /// set are refused; in-place writes (set_, index_put_ on existing keys) are allowed.
  TensorDict& lock_();
  /// Unlocks recursively. Refused for a tensordict that a live locked parent contains.
  TensorDict& unlock_();

  // ---- Printing ----------------------------------------------------------------------------
  /// Python tensordict's repr layout.
  std::string repr() const;

  // ==== Operation surface (issue 3) =======================================================
  // Implemented in runtime/src/ops/*.cpp on top of the TensorDictBase primitives, so every
  // backend gets them. Semantics: Python tensordict (docs/semantics.md 1.5-1.7, 1.11-1.13, 1.16).

  /// Pointwise unary math on every tensor leaf: `abs()` returns a new tensordict (keeping the lock), `abs_()` works in place.
#define TENSORDICT_DECLARE_UNARY_OP(name) \
  TensorDict name() const;                \
  TensorDict& name##_();
  TENSORDICT_FORALL_UNARY_OPS(TENSORDICT_DECLARE_UNARY_OP)
#undef TENSORDICT_DECLARE_UNARY_OP
  /// Clamping of every leaf (at least one bound for clamp).
  TensorDict clamp(const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max = std::nullopt) const;
  TensorDict& clamp_(const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max = std::nullopt);
  TensorDict clamp_min(const c10::Scalar& min) const;
  TensorDict& clamp_min_(const c10::Scalar& min);
  TensorDict clamp_max(const c10::Scalar& max) const;
  TensorDict& clamp_max_(const c10::Scalar& max);
  /// Bounds per leaf: a tensordict (keys matched, `default_` as for add), or a tensor aligned to
  /// the batch dims.
  TensorDict clamp_min(const TensorDict& min, const BinaryDefault& default_ = {}) const;
  TensorDict clamp_min(const at::Tensor& min) const;
  TensorDict& clamp_min_(const TensorDict& min);
  TensorDict& clamp_min_(const at::Tensor& min);
  TensorDict clamp_max(const TensorDict& max, const BinaryDefault& default_ = {}) const;
  TensorDict clamp_max(const at::Tensor& max) const;
  TensorDict& clamp_max_(const TensorDict& max);
  TensorDict& clamp_max_(const at::Tensor& max);
  /// pow / maximum / minimum / lerp / addcmul / addcdiv leaf by leaf; tensordict operands are matched by key.
  TensorDict pow(const c10::Scalar& exponent) const;
  TensorDict pow(const TensorDict& exponent) const;
  TensorDict& pow_(const c10::Scalar& exponent);
  TensorDict& pow_(const TensorDict& exponent);
  TensorDict maximum(const TensorDict& other) const;
  TensorDict& maximum_(const TensorDict& other);
  TensorDict minimum(const TensorDict& other) const;
  TensorDict& minimum_(const TensorDict& other);
  TensorDict lerp(const TensorDict& end, const c10::Scalar& weight) const;
  TensorDict lerp(const TensorDict& end, const TensorDict& weight) const;
  TensorDict& lerp_(const TensorDict& end, const c10::Scalar& weight);
  TensorDict addcmul(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value = 1) const;
  TensorDict& addcmul_(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value = 1);
  TensorDict addcdiv(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value = 1) const;
  TensorDict& addcdiv_(const TensorDict& tensor1, const TensorDict& tensor2, const c10::Scalar& value = 1);

  /// Arithmetic with a tensordict (keys matched, `default_` for keys on one side only), a tensor (left-aligned to the batch dims) or a scalar; `_` forms in place.
  TensorDict add(const TensorDict& other, const c10::Scalar& alpha = 1, const BinaryDefault& default_ = {}) const;
  TensorDict add(const at::Tensor& other, const c10::Scalar& alpha = 1) const;
  TensorDict add(const c10::Scalar& other, const c10::Scalar& alpha = 1) const;
  TensorDict sub(const TensorDict& other, const c10::Scalar& alpha = 1, const BinaryDefault& default_ = {}) const;
  TensorDict sub(const at::Tensor& other, const c10::Scalar& alpha = 1) const;
  TensorDict sub(const c10::Scalar& other, const c10::Scalar& alpha = 1) const;
  TensorDict mul(const TensorDict& other, const BinaryDefault& default_ = {}) const;
  TensorDict mul(const at::Tensor& other) const;
  TensorDict mul(const c10::Scalar& other) const;
  TensorDict div(const TensorDict& other, const BinaryDefault& default_ = {}) const;
  TensorDict div(const at::Tensor& other) const;
  TensorDict div(const c10::Scalar& other) const;
  TensorDict& add_(const TensorDict& other, const c10::Scalar& alpha = 1);
  TensorDict& add_(const at::Tensor& other, const c10::Scalar& alpha = 1);
  TensorDict& add_(const c10::Scalar& other, const c10::Scalar& alpha = 1);
  TensorDict& sub_(const TensorDict& other, const c10::Scalar& alpha = 1);
  TensorDict& sub_(const at::Tensor& other, const c10::Scalar& alpha = 1);
  TensorDict& sub_(const c10::Scalar& other, const c10::Scalar& alpha = 1);
  TensorDict& mul_(const TensorDict& other);
  TensorDict& mul_(const at::Tensor& other);
  TensorDict& mul_(const c10::Scalar& other);
  TensorDict& div_(const TensorDict& other);
  TensorDict& div_(const at::Tensor& other);
  TensorDict& div_(const c10::Scalar& other);

  /// Comparisons giving a tensordict of bools (the operators `==`... in tensordict/ops.h give a comparison whose all()/any() take a fast path).
  TensorDict eq(const TensorDict& other) const;
  TensorDict eq(const at::Tensor& other) const;
  TensorDict eq(const c10::Scalar& other) const;
  TensorDict ne(const TensorDict& other) const;
  TensorDict ne(const at::Tensor& other) const;
  TensorDict ne(const c10::Scalar& other) const;
  TensorDict lt(const TensorDict& other) const;
  TensorDict lt(const at::Tensor& other) const;
  TensorDict lt(const c10::Scalar& other) const;
  TensorDict le(const TensorDict& other) const;
  TensorDict le(const at::Tensor& other) const;
  TensorDict le(const c10::Scalar& other) const;
  TensorDict gt(const TensorDict& other) const;
  TensorDict gt(const at::Tensor& other) const;
  TensorDict gt(const c10::Scalar& other) const;
  TensorDict ge(const TensorDict& other) const;
  TensorDict ge(const at::Tensor& other) const;
  TensorDict ge(const c10::Scalar& other) const;
  /// Elementwise tests giving a tensordict of bools.
  TensorDict isnan() const;
  TensorDict isfinite() const;
  TensorDict isposinf() const;
  TensorDict isneginf() const;
  TensorDict isreal() const;

  /// Reductions: no `dim` reduces each leaf fully (batch []); a batch `dim` reduces there; with `reduce`, one tensor over all leaves (flattened and concatenated).
  /// With `feature`, every leaf is reduced over its non-batch dims (those past its own level's
  /// batch dims; a leaf without any is reduced over a new unit dim), keeping the batch size.
#define TENSORDICT_DECLARE_REDUCTION(name)                                                      \
  TensorDict name(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;     \
  at::Tensor name(Reduce, std::optional<int64_t> dim = std::nullopt) const;                   \
  TensorDict name(FeatureDims) const;                                                         \
  at::Tensor name(Reduce, FeatureDims) const;
  TENSORDICT_DECLARE_REDUCTION(sum)
  TENSORDICT_DECLARE_REDUCTION(nansum)
  TENSORDICT_DECLARE_REDUCTION(mean)
  TENSORDICT_DECLARE_REDUCTION(nanmean)
  TENSORDICT_DECLARE_REDUCTION(prod)
  TENSORDICT_DECLARE_REDUCTION(norm)
  TENSORDICT_DECLARE_REDUCTION(amax)
  TENSORDICT_DECLARE_REDUCTION(amin)
#undef TENSORDICT_DECLARE_REDUCTION
  /// Standard deviation and variance (Bessel-corrected unless `unbiased` is false).
  TensorDict std(std::optional<int64_t> dim = std::nullopt, bool keepdim = false, bool unbiased = true) const;
  at::Tensor std(Reduce, std::optional<int64_t> dim = std::nullopt, bool unbiased = true) const;
  TensorDict var(std::optional<int64_t> dim = std::nullopt, bool keepdim = false, bool unbiased = true) const;
  at::Tensor var(Reduce, std::optional<int64_t> dim = std::nullopt, bool unbiased = true) const;
  TensorDict std(FeatureDims, bool unbiased = true) const;
  at::Tensor std(Reduce, FeatureDims, bool unbiased = true) const;
  TensorDict var(FeatureDims, bool unbiased = true) const;
  at::Tensor var(Reduce, FeatureDims, bool unbiased = true) const;
  /// max / min: no dim reduces each leaf fully (batch []); a batch `dim` gives the values and
  /// the indices (Python's named tuple of two tensordicts); with `reduce`, one tensor.
  TensorDict max() const;
  ValuesIndices max(int64_t dim, bool keepdim = false) const;
  at::Tensor max(Reduce) const;
  TensorDict min() const;
  ValuesIndices min(int64_t dim, bool keepdim = false) const;
  at::Tensor min(Reduce) const;
  /// log(sum(exp)) over batch dims: `dim`, or every batch dim when none is given (Python's rule
  /// for logsumexp, unlike the other reductions). ValueError for a dim outside the batch.
  TensorDict logsumexp(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  /// The q-th quantile (q in [0, 1]); `interpolation` is linear, lower, higher, midpoint or
  /// nearest, as at::quantile.
  TensorDict quantile(double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                      std::string_view interpolation = "linear") const;
  at::Tensor quantile(Reduce, double q, std::optional<int64_t> dim = std::nullopt,
                      std::string_view interpolation = "linear") const;
  TensorDict quantile(FeatureDims, double q, std::string_view interpolation = "linear") const;
  at::Tensor quantile(Reduce, FeatureDims, double q, std::string_view interpolation = "linear") const;
  /// True when every (any) element of every leaf is true; with a batch dim, a tensordict.
  bool all() const;
  bool any() const;
  TensorDict all(int64_t dim) const;
  TensorDict any(int64_t dim) const;

  /// apply: `fn(leaf[, matching leaves of others])` for every tensor leaf, nested keys included; an undefined result drops the entry.
  TensorDict apply(FunctionRef<at::Tensor(const at::Tensor&)> fn, const ApplyOptions& options = {}) const;
  TensorDict apply(FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn, const TensorDict& other,
                   const ApplyOptions& options = {}) const;
  TensorDict apply(FunctionRef<at::Tensor(c10::ArrayRef<at::Tensor>)> fn, const std::vector<TensorDict>& others,
                   const ApplyOptions& options = {}) const;
  /// Python's `call_on_nested=True`: `fn` gets every first-level entry as it is (a tensor, a
  /// whole nested tensordict, non-tensor data) and returns the new entry; an undefined Entry
  /// drops it. With `others`, `fn` gets the entry followed by the others' entries at that key.
  TensorDict apply(CallOnNested, FunctionRef<Entry(const Entry&)> fn, const ApplyOptions& options = {}) const;
  TensorDict apply(CallOnNested, FunctionRef<Entry(c10::ArrayRef<Entry>)> fn, const std::vector<TensorDict>& others,
                   const ApplyOptions& options = {}) const;
  TensorDict& apply_(FunctionRef<at::Tensor(const at::Tensor&)> fn);
  TensorDict& apply_(FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn, const TensorDict& other);
  /// `fn(key, leaf)`: the key is the leaf's own name, or its full path with `nested_keys`.
  TensorDict named_apply(FunctionRef<at::Tensor(const NestedKey&, const at::Tensor&)> fn, bool nested_keys = false,
                         const ApplyOptions& options = {}) const;

  /// Masking and selection along the batch dims (masks and conditions are expanded to the right).
  TensorDict where(const at::Tensor& condition, const TensorDict& other,
                   const std::optional<c10::Scalar>& pad = std::nullopt) const;
  TensorDict where(const at::Tensor& condition, const at::Tensor& other) const;
  TensorDict where(const at::Tensor& condition, const c10::Scalar& other) const;
  TensorDict masked_fill(const at::Tensor& mask, const c10::Scalar& value) const;
  TensorDict& masked_fill_(const at::Tensor& mask, const c10::Scalar& value);
  TensorDict masked_select(const at::Tensor& mask) const;
  TensorDict gather(int64_t dim, const at::Tensor& index) const;

  /// Key selection and key transforms; results share the leaves.
  TensorDict select(const std::vector<NestedKey>& keys, bool strict = true) const;
  TensorDict exclude(const std::vector<NestedKey>& keys) const;
  /// Python's `select(..., inplace=True)`: keeps only `keys`, in that order, narrowing nested
  /// tensordicts in place too; LockedError when locked. Returns *this.
  TensorDict& select_(const std::vector<NestedKey>& keys, bool strict = true);
  /// Python's `exclude(..., inplace=True)`: drops `keys` (missing ones are ignored) from this
  /// tensordict and its nested ones; LockedError when locked (Python does not check). Returns *this.
  TensorDict& exclude_(const std::vector<NestedKey>& keys);
  std::vector<TensorDict> split_keys(const std::vector<std::vector<NestedKey>>& key_sets, bool strict = true) const;
  TensorDict flatten_keys(std::string_view separator = ".") const;
  TensorDict unflatten_keys(std::string_view separator = ".") const;

  /// The update family and indexed reads and writes of one key.
  TensorDict& update(const TensorDict& source, bool clone = false, bool inplace = false,
                     const std::optional<std::vector<NestedKey>>& keys_to_update = std::nullopt);
  /// Copies every leaf of `source` into the existing leaves (keys must exist; allowed when
  /// locked): one batched write through the backend. `copy_` is Python's alias.
  TensorDict& update_(const TensorDict& source);
  TensorDict& copy_(const TensorDict& source);
  TensorDict& update_at_(const TensorDict& source, c10::ArrayRef<at::indexing::TensorIndex> index);
  TensorDict& update_at_(const TensorDict& source, std::initializer_list<at::indexing::TensorIndex> index);
  TensorDict& set_at_(KeyRef key, const at::Tensor& value, c10::ArrayRef<at::indexing::TensorIndex> index);
  TensorDict& set_at_(KeyRef key, const at::Tensor& value, std::initializer_list<at::indexing::TensorIndex> index);
  at::Tensor get_at(KeyRef key, c10::ArrayRef<at::indexing::TensorIndex> index) const;
  at::Tensor get_at(KeyRef key, std::initializer_list<at::indexing::TensorIndex> index) const;
  /// The entry at `key`; when missing, `default_value` is stored there first and returned.
  Entry setdefault(KeyRef key, EntryInit default_value);

  /// Rows along dim 0: `for (TensorDict row : td)`. ValueError when there are no batch dims.
  RowIterator<TensorDict> begin() const {
    check_iterable(*this);
    return RowIterator<TensorDict>(this, 0, [](TensorDict row) { return row; });
  }
  RowIterator<TensorDict> end() const {
    return RowIterator<TensorDict>(this, batch_dims() ? batch_size()[0] : 0, nullptr);
  }

  /// Autograd helpers, pinning and sizes.
  TensorDict& requires_grad_(bool requires_grad = true);
  TensorDict& zero_grad(bool set_to_none = true);
  TensorDict pin_memory() const;
  /// pin_memory in place (in-memory leaves rebound; without CUDA there is no pinned memory and
  /// nothing changes).
  TensorDict& pin_memory_();
  int64_t ndimension() const { return batch_dims(); }
  bool is_empty() const;

  /// Same structure, new batch size `size` (Python's new_zeros ... new_full): every leaf keeps
  /// its dims past the batch, nested levels their extra batch dims, non-tensor values their value.
  TensorDict new_zeros(c10::IntArrayRef size, const NewOptions& options = {}) const;
  TensorDict new_ones(c10::IntArrayRef size, const NewOptions& options = {}) const;
  TensorDict new_empty(c10::IntArrayRef size, const NewOptions& options = {}) const;
  TensorDict new_full(c10::IntArrayRef size, const c10::Scalar& fill_value, const NewOptions& options = {}) const;
  /// Every leaf becomes a copy of `data` (of a tensordict: its leaf at the same key) in the
  /// leaf's dtype; the batch size is data's, and so is the device unless options give one.
  TensorDict new_tensor(const at::Tensor& data, const NewOptions& options = {}) const;
  TensorDict new_tensor(const TensorDict& data, const NewOptions& options = {}) const;

  /// Whether every tensor leaf is contiguous; the top-level keys sorted. (dtype, depth and grad
  /// are free functions in tensordict/ops.h, so schemas may name fields after them.)
  bool is_contiguous() const;
  std::vector<std::string> sorted_keys() const;
  /// Detaches every leaf in place: the same tensors, without autograd history.
  TensorDict& detach_();
  /// Broadcast to `other`: a tensor's shape becomes the batch size (this batch right-aligned);
  /// a tensordict gives each leaf its leaf's shape and each level its batch size.
  TensorDict expand_as(const at::Tensor& other) const;
  TensorDict expand_as(const TensorDict& other) const;

  /// Removes and returns the last top-level entry (KeyError when empty, LockedError when locked).
  std::pair<std::string, Entry> popitem();
  /// An empty tensordict at `key` (this batch size and device); missing levels are created,
  /// existing ones kept (Python also empties those). Returns *this.
  TensorDict& create_nested(KeyRef key);
  /// A tensordict of batch size [] holding `value` at every key (Python's classmethod): a number
  /// gives each key its own 0-dim tensor (int64, the default float dtype or bool), a tensor is
  /// shared by every key, a string is non-tensor data.
  static TensorDict fromkeys(const std::vector<NestedKey>& keys, const c10::Scalar& value = 0);
  static TensorDict fromkeys(const std::vector<NestedKey>& keys, const at::Tensor& value);
  static TensorDict fromkeys(const std::vector<NestedKey>& keys, const std::string& value);
  static TensorDict fromkeys(const std::vector<NestedKey>& keys, const char* value) {
    return fromkeys(keys, std::string(value));
  }
  /// A new tree without the non-tensor entries (tensors shared, emptied levels kept).
  TensorDict filter_non_tensor_data() const;
  /// The non-tensor entries, of nested levels too with `include_nested`.
  std::vector<std::pair<NestedKey, NonTensorData>> non_tensor_items(bool include_nested = false) const;
  /// Removes nested tensordicts without any leaf, deepest first. Returns *this.
  TensorDict& filter_empty_();
  /// Removes every entry (LockedError when locked); batch size and device stay.
  TensorDict& clear();
  /// Forgets the device of this level and the nested ones (the tensors do not move).
  TensorDict& clear_device_();
  /// A new tree (leaves shared, unlocked) with `entries` set over it; *this when there are none.
  TensorDict replace(const TensorDict& entries) const;
  /// Sets the batch size to the longest leading shape every entry shares (nested levels first),
  /// at most `batch_dims` dims. Returns *this.
  TensorDict& auto_batch_size_(std::optional<int64_t> batch_dims = std::nullopt);
  /// Moves every CPU leaf's storage into shared memory in place, so processes forked afterwards
  /// see each other's writes, then locks (Python's share_memory_). StorageError for a
  /// memory-mapped tensordict, NotImplementedError where the backend's leaves are copies.
  TensorDict& share_memory_();

  /// Ragged data padded with `padding` into dense leaves (Python's to_padded_tensor): a lazy
  /// stack's differing leaves (the batch then takes the padded sizes) and nested-tensor leaves.
  /// `mask_key` receives where the first ragged leaf has data (a ragged batch only).
  TensorDict to_padded_tensor(double padding = 0.0, const std::optional<NestedKey>& mask_key = std::nullopt) const;

  /// Flat state dict (keys joined with `separator`) and loading it back in place (or by assignment).
  StateDict state_dict(std::string_view separator = ".", bool keep_vars = false) const;
  TensorDict& load_state_dict(const StateDict& state_dict, bool strict = true, bool assign = false);

 private:
  c10::intrusive_ptr<TensorDictBase> impl_;
};

std::ostream& operator<<(std::ostream& os, const TensorDict& td);

/// The result of `max(dim)` / `min(dim)`: the values and their indices along `dim`, each a
/// tensordict of the reduced batch size (torch.return_types.max over tensordicts).
struct ValuesIndices {
  TensorDict values;
  TensorDict indices;
};

/// Dense stack along a new batch dim `dim` (in [-batch_dims-1, batch_dims]). Keys and batch
/// sizes must match; errors name the first differing key or shape.
TensorDict stack(const std::vector<TensorDict>& tds, int64_t dim = 0);
/// Concatenation along batch dim `dim`.
TensorDict cat(const std::vector<TensorDict>& tds, int64_t dim = 0);

template <class Row>
Row RowIterator<Row>::operator*() const {
  return wrap_(row_of(*td_, row_));
}

}  // namespace tensordict
