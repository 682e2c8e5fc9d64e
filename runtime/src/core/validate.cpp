// Checks of values about to be stored, and the errors every lookup shares.

#include "core/validate.h"

#include <algorithm>

#include <ATen/ATen.h>

#include <tensordict/batch_index.h>
#include <tensordict/errors.h>
#include <tensordict/tensor_dict.h>

#include "core/dim_names.h"
#include "core/format.h"

namespace tensordict {
namespace detail {

at::Tensor prepare_tensor(const TensorDictBase& dest, KeyRef key, at::Tensor value) {
  if (storable_as_is(dest, value)) return value;
  // The slow path: say what is wrong, or move the tensor to the tensordict's device.
  TD_CHECK(value.defined(), ValueError, "cannot store an undefined tensor at key ", key.repr());
  c10::IntArrayRef batch = dest.batch_size();
  c10::IntArrayRef shape = value.sizes();
  if (C10_UNLIKELY(shape.size() < batch.size() || shape.slice(0, batch.size()) != batch)) {
    TD_THROW(ShapeError, "batch dimension mismatch, got self.batch_size=", size_str(batch),
             " and value.shape=", size_str(shape), " for key ", key.repr(), ".");
  }
  const auto& device = dest.device();
  if (device.has_value() && value.device() != *device) value = value.to(*device);
  return value;
}

void write_tensor_(TensorDictBase& level, std::string_view name, const at::Tensor& value, FunctionRef<NestedKey()> key) {
  TD_CHECK(batch_leads(level, value), ShapeError, "batch dimension mismatch, got self.batch_size=",
           size_str(level.batch_size()), " and value.shape=", size_str(value.sizes()), " for key ", key().repr(), ".");
  try {
    level.write_(name, value);
  } catch (const c10::Error& e) {
    // Only on failure is the destination read, to name its shape.
    TD_THROW(ValueError, "Failed to update ", key().repr(), " in tensordict: destination shape ",
             size_str(level.get(name).tensor().sizes()), ", value shape ", size_str(value.sizes()), ": ",
             e.what_without_backtrace());
  }
}

TensorDict prepare_tensordict(const TensorDictBase& dest, KeyRef key, TensorDict value) {
  c10::IntArrayRef batch = dest.batch_size();
  c10::IntArrayRef child = value.batch_size();
  if (child.size() < batch.size() || child.slice(0, batch.size()) != batch) {
    // Python re-batches a nested tensordict to its parent's batch when its leaves allow it.
    TensorDict rebatched = value.clone(/*recurse=*/false);
    try {
      rebatched.set_batch_size(batch);
    } catch (const ShapeError&) {
      TD_THROW(ShapeError, "batch dimension mismatch, got self.batch_size=", size_str(batch),
               " and the batch size of the TensorDict at key ", key.repr(), " is ", size_str(child),
               ", which cannot be re-batched to it.");
    }
    value = rebatched;
  }
  if (C10_UNLIKELY(any_named(dest.dim_names()))) {
    // Python refines a named parent's names into the value (a copy, so the caller's keeps its own).
    const DimNames want = names_of(dest);
    DimNames have = names_of(*value.impl());
    if (!std::equal(want.begin(), want.end(), have.begin())) {
      for (size_t i = 0; i < want.size(); ++i) {
        TD_CHECK(!have[i] || have[i] == want[i], RuntimeError, "the TensorDict at key ", key.repr(),
                 " names its batch dim ", i, " '", *have[i], "', which its parent names differently");
        have[i] = want[i];
      }
      value = value.clone(/*recurse=*/false);
      assign_names(*value.impl(), have);
    }
  }
  const auto& device = dest.device();
  if (device.has_value() && value.device() != device) value = value.to(*device);
  return value;
}

NonTensorData prepare_non_tensor(const TensorDictBase& dest, KeyRef key, NonTensorData value) {
  if (value.is_stack()) {
    TD_CHECK(value.shape() == dest.batch_size(), ShapeError, "batch dimension mismatch, got self.batch_size=",
             size_str(dest.batch_size()), " and a non-tensor stack of shape ", size_str(value.shape()),
             " for key ", key.repr(), ".");
  }
  return value;
}

Entry prepare_entry(const TensorDictBase& dest, KeyRef key, Entry value) {
  switch (value.kind()) {
    case Entry::Kind::Tensor: return prepare_tensor(dest, key, value.tensor_unchecked());
    case Entry::Kind::TensorDict: return prepare_tensordict(dest, key, value.tensordict_unchecked());
    case Entry::Kind::NonTensor: return prepare_non_tensor(dest, key, value.non_tensor());
    case Entry::Kind::Undefined: break;
  }
  TD_THROW(ValueError, "cannot store an undefined entry at key ", key.repr());
}

void throw_missing(const TensorDictBase& level, KeyRef key, size_t depth) {
  std::string where = depth == 0 ? "" : " at " + key.prefix(depth).repr();
  TD_THROW(KeyError, "key \"", printable(key[depth]), "\" not found in ", level.type_name(), where, " with keys ",
           keys_str(level.keys()), key.size() > 1 ? " (looking up " + key.repr() + ")" : std::string(),
           level.missing_key_note(key[depth]));
}

void throw_locked() {
  TD_THROW(LockedError,
           "Cannot modify locked TensorDict. For in-place modification, consider using the "
           "`set_()` method and make sure the key is present.");
}

BatchSize indexed_shape(c10::IntArrayRef leaf, size_t batch_dims, const BatchIndex& index) {
  const c10::IntArrayRef rows = index.result_batch_size();
  BatchSize shape(rows.begin(), rows.end());
  const size_t own = std::min(batch_dims, leaf.size());
  shape.append(leaf.begin() + static_cast<std::ptrdiff_t>(own), leaf.end());
  return shape;
}

bool broadcasts_to(c10::IntArrayRef value, c10::IntArrayRef target) {
  while (value.size() > target.size()) {
    if (value[0] != 1) return false;
    value = value.slice(1);
  }
  for (size_t i = 1; i <= value.size(); ++i) {
    if (value[value.size() - i] != 1 && value[value.size() - i] != target[target.size() - i]) return false;
  }
  return true;
}

void throw_empty_key() { TD_THROW(KeyError, "Only NestedKeys are supported. Got key ()."); }

}  // namespace detail
}  // namespace tensordict
