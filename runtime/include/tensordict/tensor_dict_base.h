#pragma once
// TensorDictBase: the interface every backend implements (in memory, memory-mapped,
// consolidated, HDF5, lazy stack, Redis, ...). It plays the part TensorImpl plays for
// at::Tensor: users hold the `TensorDict` handle, which implements every tensordict operation on
// top of the members below. See docs/architecture.md, "The backend contract".
//
// A backend implements:
//   - the storage primitives, one nesting level and one key part at a time: type_name,
//     num_entries, keys, has, get, for_each, insert_or_assign, erase, rename;
//   - write_, unless its leaves alias its storage (StoragePolicy below).
// It may override the hooks, whose defaults are correct for any backend: peek, peek_at,
// insert_or_assign_at, erase_if_present, kind, for_each_key, for_each_key_nesting, leaf_meta, snapshot, write_at_,
// write_many_, make_child, set_batch_size, set_locked, is_locked, index, map_batch,
// rearrange_batch, map_leaves, leaf_class_name, missing_key_note, repr_parts, is_shared,
// is_memmap.
//
// Note [Reads, copies and writes]: a backend whose `get` hands out the stored tensor itself
// (in memory, a file mapping, a view of a consolidated storage) declares
// `leaves_alias_storage`; in-place operations then change the leaves directly. Every other
// backend (HDF5, Redis, a lazy stack, whose `get` builds a new tensor) gets its data changed
// only through write_, write_at_ and write_many_: the handle reads the leaves (snapshot), runs
// the in-place kernel on those copies, and writes them back. No operation changes a copy and
// drops it; one a backend cannot do raises NotImplementedError naming the backend and the
// operation.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/SmallVector.h>
#include <c10/util/intrusive_ptr.h>

#include <tensordict/function_ref.h>

namespace at {
namespace indexing {
struct TensorIndex;
}  // namespace indexing
}  // namespace at

namespace tensordict {

class Entry;
class TensorDict;
class BatchIndex;
class NonTensorData;

using BatchSize = c10::SmallVector<int64_t, 6>;
/// Names of the batch dims (Python's `names`), one per dim; nullopt where a dim is unnamed.
using DimNames = std::vector<std::optional<std::string>>;
/// rename's map form: old name -> new name, in order (Python's `**rename_map`).
struct NameMap : std::vector<std::pair<std::string, std::string>> {
  using std::vector<std::pair<std::string, std::string>>::vector;
};

/// What a key holds (Entry::Kind is this type).
enum class EntryKind : uint8_t { Undefined, Tensor, TensorDict, NonTensor };

/// Shape, dtype and device of a tensor leaf, known without reading its data. A dim is -1
/// where it varies (a lazy stack of members whose leaves differ in size there).
struct LeafMeta {
  BatchSize shape;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
};

/// What a backend promises about where its data live. The handle reads it (a field, not a
/// virtual call) to choose its fast paths, as TensorImpl does with its sizes-strides policy.
/// The defaults promise nothing, which is always correct.
struct StoragePolicy {
  /// get() and for_each() hand out the stored tensors themselves, so an in-place change of
  /// one reaches the storage (Note [Reads, copies and writes]). False: reads are fresh copies
  /// that no one else holds.
  bool leaves_alias_storage = false;
  /// Entries live in memory and peek() returns their addresses.
  bool entries_in_memory = false;
};

class TensorDictBase : public c10::intrusive_ptr_target {
 public:
  TensorDictBase(c10::IntArrayRef batch_size, std::optional<at::Device> device, StoragePolicy policy = {});
  ~TensorDictBase() override;

  /// Class name shown by repr and in errors: "TensorDict", "PersistentTensorDict", ...
  virtual const char* type_name() const = 0;
  /// Class name repr shows for this level's tensor leaves: "Tensor", "MemoryMappedTensor".
  virtual const char* leaf_class_name() const { return "Tensor"; }

  c10::IntArrayRef batch_size() const { return batch_size_; }
  int64_t batch_dims() const { return static_cast<int64_t>(batch_size_.size()); }
  const std::optional<at::Device>& device() const { return device_; }
  /// True when this level is locked (a lazy stack: also when every member is).
  virtual bool is_locked() const { return locked_; }
  /// True after share_memory_ (until unlocked), and on CUDA devices (Python's is_shared).
  virtual bool is_shared() const { return shared_ || (device_ && device_->is_cuda()); }
  virtual bool is_memmap() const { return false; }
  const StoragePolicy& policy() const { return policy_; }
  bool leaves_alias_storage() const { return policy_.leaves_alias_storage; }
  bool entries_in_memory() const { return policy_.entries_in_memory; }

  // ---- Storage primitives: entries of this level, addressed by one key part ----------------

  virtual size_t num_entries() const = 0;
  /// Keys of this level in insertion order.
  virtual std::vector<std::string> keys() const = 0;
  virtual bool has(std::string_view key) const = 0;
  /// The entry stored under `key`, or an undefined Entry when there is none. A nested
  /// collection comes back as a handle to it (no data read); a tensor is the stored tensor or a
  /// fresh copy (StoragePolicy::leaves_alias_storage).
  virtual Entry get(std::string_view key) const = 0;
  /// Calls `fn(key, entry)` for every entry of this level, in order.
  virtual void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const = 0;
  /// Inserts or replaces. The handle has validated the value (batch dims, device) already.
  virtual void insert_or_assign(std::string_view key, Entry value) = 0;
  /// Removes `key`; an absent key is not an error (callers erase without probing first).
  virtual void erase(std::string_view key) = 0;
  /// erase(key), returning whether `key` was there. The default asks has() first; a backend
  /// that finds the key as it erases it answers from that one lookup.
  virtual bool erase_if_present(std::string_view key);
  /// Moves an entry to a new key (which is absent), keeping its position.
  virtual void rename(std::string_view from, std::string_view to) = 0;

  // ---- Reads: hooks with defaults -----------------------------------------------------------

  /// The address of the entry stored under `key`, valid until layout_version() changes, or
  /// nullptr when there is none. Only backends with `entries_in_memory` return non-null.
  virtual const Entry* peek(std::string_view key) const;
  /// peek(key) for a caller walking another level in step with this one (stack, cat, binary
  /// ops): the entry at `position` in key order is tried first, with no hash or scan, then the
  /// key is looked up as usual. The default is peek(key).
  virtual const Entry* peek_at(std::string_view key, size_t position) const;
  /// insert_or_assign(key, value) for a caller walking another level in step with this one
  /// (update): an existing entry at `position` is replaced with no hash or scan. The default is
  /// insert_or_assign(key, value).
  virtual void insert_or_assign_at(std::string_view key, size_t position, Entry value);
  /// What `key` holds, Undefined when it is missing, without reading tensor data.
  virtual EntryKind kind(std::string_view key) const;
  /// Calls `fn(key, kind)` for every entry, in order, without reading tensor data.
  virtual void for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const;
  /// for_each_key for a walk that only tells nested levels from the rest: `fn(key, nested)`. A
  /// backend that must open a leaf to tell a tensor from non-tensor data (HDF5) lists these
  /// without opening any. The default asks for_each_key.
  virtual void for_each_key_nesting(FunctionRef<void(const std::string&, bool)> fn) const;
  /// Shape, dtype and device of the tensor leaf `key` (repr, tdtool). The default reads it.
  virtual LeafMeta leaf_meta(std::string_view key) const;
  /// Appended to the KeyError for a key this level lacks: why it is missing, when the backend
  /// knows more (a lazy stack names the members that hold it). Empty by default.
  virtual std::string missing_key_note(std::string_view key) const;
  /// The `name=value` parts repr prints (fields, batch_size, device, is_shared); a backend
  /// with more state inserts its own (a lazy stack: exclusive_fields, stack_dim).
  virtual void repr_parts(std::vector<std::string>& parts) const;
  /// This level and every level below it read at once into an in-memory tensordict of the
  /// same structure (batch sizes, keys, non-tensor data). Its leaves are the values `get`
  /// returns. A remote backend overrides it to serve the whole tree in one round trip; every
  /// operation that reads all leaves (to, clone, apply, arithmetic, ...) goes through it.
  virtual TensorDict snapshot() const;

  // ---- Writes into existing leaves: hooks with defaults ------------------------------------

  /// Copies `value` into the existing tensor leaf `key` (cast to its dtype, broadcast to its
  /// shape: at::Tensor::copy_). The default copies into the tensor `get` returns when leaves
  /// alias storage, and raises NotImplementedError otherwise.
  virtual void write_(std::string_view key, const at::Tensor& value);
  /// `leaf[index] = value` for the existing tensor leaf `key`, with `value` cast to the
  /// leaf's dtype and broadcast. The default writes into `get(key)` when leaves alias storage,
  /// and otherwise reads the leaf, changes it and writes it back with write_.
  virtual void write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value);
  /// `self[index] = values` for every entry of `values`, a tensordict already sized to the
  /// indexed batch (TensorDict::index_put_ has checked it): tensors through write_at_, missing
  /// keys preallocated, nested levels and non-tensor data as index_put_ documents. The default
  /// goes key by key; a remote backend overrides it to write every leaf in one round trip, and
  /// calls the default for whatever its fast path does not cover.
  virtual void put_at_(const BatchIndex& index, const TensorDict& values);
  /// Copies every tensor leaf of `values` (some of this level's keys, nested levels included,
  /// same shapes) into the existing leaves: one batched write where the backend can. The
  /// default calls write_ per leaf; where entries live in memory and alias the storage it copies
  /// into the leaves in place, as write_'s default does (a backend with both flags that
  /// overrides write_ overrides this too).
  virtual void write_many_(const TensorDict& values);
  /// Replaces the non-tensor value of the existing non-tensor entry `key` (uniform, or a stack
  /// shaped like this level's batch): what an indexed write of per-element strings leaves.
  /// Allowed on locked levels, as write_. The default is insert_or_assign, right for backends
  /// whose table is their storage; a backend that stores entries elsewhere persists the value
  /// there or raises NotImplementedError naming itself. It never keeps it only in memory.
  virtual void write_non_tensor_(std::string_view key, const NonTensorData& value);

  // ---- Structure: hooks with defaults ---------------------------------------------------------

  /// Removes every entry of this level. The default erases key by key; a backend that can drop
  /// its whole table at once overrides it.
  virtual void clear();
  /// Moves the existing entry `key` after every other one (select_ orders what it keeps this
  /// way). The default takes the entry out and re-inserts it; a backend whose nested levels
  /// live in its storage (a file's groups) overrides it, so erasing never drops them.
  virtual void move_to_end(std::string_view key);

  /// A new, empty collection of this backend's kind for a nested key created on the fly
  /// (`set({"a","b"}, x)` with no "a"). The default is an in-memory TensorDict.
  virtual TensorDict make_child(std::string_view key, c10::IntArrayRef batch_size) const;
  /// Changes the batch size; the caller has validated it against every entry.
  virtual void set_batch_size(c10::IntArrayRef batch_size);
  /// Locks or unlocks this level only (the handle recurses).
  virtual void set_locked(bool locked) {
    locked_ = locked;
    if (!locked) shared_ = false;  // Python's unlock_ clears is_shared too
  }
  void set_shared(bool shared) { shared_ = shared; }
  /// This level's batch-dim names; empty when none is set. The handle validates them and keeps
  /// a nested level's leading names equal to its parent's (TensorDict::set_names).
  const DimNames& dim_names() const { return names_; }
  void set_dim_names(DimNames names) { names_ = std::move(names); }
  /// Forgets the device (clear_device_); the tensors stay where they are.
  void clear_device() { device_.reset(); }

  /// `td[index]`. The default indexes every leaf (of the snapshot, when reads are copies) and
  /// builds an in-memory TensorDict.
  virtual TensorDict index(const BatchIndex& index) const;
  /// `td[indices]` and `td[indices] = value` on a batch with ragged dims (-1: the size differs
  /// between members), which a BatchIndex cannot bounds-check. Only a lazy stack has such a
  /// batch: it indexes each member over its own batch. The defaults raise IndexError.
  virtual TensorDict index_ragged(c10::ArrayRef<at::indexing::TensorIndex> indices) const;
  virtual void put_ragged_(c10::ArrayRef<at::indexing::TensorIndex> indices, const TensorDict& value);
  /// A batch-shape operation (view, permute, unsqueeze, ...): `fn` maps a tensor whose leading
  /// dims are this batch to one whose leading dims are `new_batch_size`. The default applies it
  /// to every leaf (and to nested tensordicts, whose extra batch dims it keeps).
  virtual TensorDict map_batch(c10::IntArrayRef new_batch_size,
                               FunctionRef<at::Tensor(const at::Tensor&)> fn) const;
  /// A batch rearrangement that moves no data (permute, transpose, squeeze, unsqueeze): new
  /// batch dim j is old dim `source[j]`, or a new dim of size 1 where `source[j]` is -1; old
  /// dims not named have size 1 and are dropped. The default calls map_batch; a lazy stack
  /// rearranges its members instead and stays lazy.
  virtual TensorDict rearrange_batch(c10::IntArrayRef source) const;
  /// A batch-preserving map of every tensor leaf (to, clone, detach, ...), into an in-memory
  /// tensordict on `device`.
  virtual TensorDict map_leaves(FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                std::optional<at::Device> device) const;

  /// Identity of the storage layout; bumped whenever entries are added, removed or renamed,
  /// so typed accessors can cache the address peek() returned.
  uint64_t layout_version() const { return layout_version_; }

  /// Parents that locked this collection and are still alive keep it from being unlocked.
  void add_lock_parent(const c10::intrusive_ptr<TensorDictBase>& parent);
  void remove_lock_parent(TensorDictBase* parent);
  /// True when a live, locked parent registered itself through add_lock_parent.
  bool has_locked_parent() const;

  /// Called when the last handle goes (weak lock-parent references may keep the object
  /// itself): drops the lock parents. Backends override it to drop their entries too, so
  /// leaves and mapped files are released then, and call this.
  void release_resources() override;

 protected:
  void bump_layout_version() { ++layout_version_; }
  /// NotImplementedError "<type_name> cannot <what>: <why>".
  [[noreturn]] void unsupported(const char* what, const char* why) const;

  BatchSize batch_size_;
  std::optional<at::Device> device_;
  bool locked_ = false;
  bool shared_ = false;
  DimNames names_;
  StoragePolicy policy_;
  uint64_t layout_version_ = 0;
  std::vector<c10::weak_intrusive_ptr<TensorDictBase>> lock_parents_;
};

}  // namespace tensordict
