#pragma once
// TensorDictBase: the interface every backend implements (in-memory, memory-mapped, HDF5,
// lazy stack, Redis, ...). It plays the part TensorImpl plays for at::Tensor: users hold the
// `TensorDict` handle, which implements the tensordict operations on top of the primitives
// below. A backend implements the storage primitives (one nesting level, one key part at a
// time); the structural hooks have generic defaults that build in-memory results, and a
// backend overrides one only when it can do better (a lazy view, a partial read).
// See docs/architecture.md.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/SmallVector.h>
#include <c10/util/intrusive_ptr.h>

#include <tensordict/function_ref.h>

namespace tensordict {

class Entry;
class TensorDict;
class BatchIndex;

using BatchSize = c10::SmallVector<int64_t, 6>;

class TensorDictBase : public c10::intrusive_ptr_target {
 public:
  TensorDictBase(c10::IntArrayRef batch_size, std::optional<at::Device> device);
  ~TensorDictBase() override;

  /// Class name shown by repr and in errors: "TensorDict", "PersistentTensorDict", ...
  virtual const char* type_name() const = 0;

  c10::IntArrayRef batch_size() const { return batch_size_; }
  int64_t batch_dims() const { return static_cast<int64_t>(batch_size_.size()); }
  const std::optional<at::Device>& device() const { return device_; }
  bool is_locked() const { return locked_; }
  virtual bool is_shared() const { return false; }
  virtual bool is_memmap() const { return false; }

  // ---- Storage primitives: entries of this level, addressed by one key part ----------------

  virtual size_t num_entries() const = 0;
  /// Keys of this level in insertion order.
  virtual std::vector<std::string> keys() const = 0;
  virtual bool has(std::string_view key) const = 0;
  /// The entry stored under `key`, or an undefined Entry when there is none.
  virtual Entry get(std::string_view key) const = 0;
  /// Calls `fn(key, entry)` for every entry of this level, in order.
  virtual void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const = 0;
  /// Inserts or replaces. The caller has validated the value (batch dims, device) already.
  virtual void insert_or_assign(std::string_view key, Entry value) = 0;
  virtual void erase(std::string_view key) = 0;
  /// Moves an entry to a new key (which is absent), keeping its position.
  virtual void rename(std::string_view from, std::string_view to) = 0;

  /// A new, empty collection of this backend's kind for a nested key created on the fly
  /// (`set({"a","b"}, x)` with no "a"). The default is an in-memory TensorDict.
  virtual TensorDict make_child(std::string_view key, c10::IntArrayRef batch_size) const;
  /// Copies `value` into the storage of the existing tensor leaf `key` (`set_`, `update_`).
  /// The default copies into the tensor `get(key)` returns, which is the storage in memory.
  virtual void write_(std::string_view key, const at::Tensor& value);
  /// `leaf[index] = value` for the existing tensor leaf `key`.
  virtual void write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value);
  /// Changes the batch size; the caller has validated it against every entry.
  virtual void set_batch_size(c10::IntArrayRef batch_size);
  /// Locks or unlocks this level only (the handle recurses).
  virtual void set_locked(bool locked) { locked_ = locked; }

  // ---- Structural hooks with generic defaults -----------------------------------------------

  /// `td[index]`. The default indexes every leaf and builds an in-memory TensorDict.
  virtual TensorDict index(const BatchIndex& index) const;
  /// A batch-shape operation (view, permute, unsqueeze, ...): `fn` maps a tensor whose leading
  /// dims are this batch to one whose leading dims are `new_batch_size`. The default applies it
  /// to every leaf (and to nested tensordicts, whose extra batch dims it keeps).
  virtual TensorDict map_batch(c10::IntArrayRef new_batch_size,
                               FunctionRef<at::Tensor(const at::Tensor&)> fn) const;
  /// A batch-preserving map of every tensor leaf (to, clone, detach, ...), into an in-memory
  /// tensordict on `device`.
  virtual TensorDict map_leaves(FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                std::optional<at::Device> device) const;

  /// Identity of the storage layout; bumped whenever entries are added, removed or renamed,
  /// so typed accessors can cache an entry's position safely.
  uint64_t layout_version() const { return layout_version_; }

  /// Parents that locked this collection and are still alive keep it from being unlocked.
  void add_lock_parent(const c10::intrusive_ptr<TensorDictBase>& parent);
  void remove_lock_parent(TensorDictBase* parent);
  /// True when a live, locked parent registered itself through add_lock_parent.
  bool has_locked_parent() const;

 protected:
  void bump_layout_version() { ++layout_version_; }

  BatchSize batch_size_;
  std::optional<at::Device> device_;
  bool locked_ = false;
  uint64_t layout_version_ = 0;
  std::vector<c10::weak_intrusive_ptr<TensorDictBase>> lock_parents_;
};

}  // namespace tensordict
