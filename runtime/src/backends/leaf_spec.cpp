// LeafSpec lists (from_schema's input): derived from a tensordict, and checked before a backend
// writes anything.

#include <tensordict/backends/leaf_spec.h>

#include <algorithm>

#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/tensor_dict.h>

#include "core/format.h"

namespace tensordict {

namespace {

void collect(const TensorDictBase& level, const NestedKey& prefix, c10::IntArrayRef root_batch, LeafSpecs& out) {
  level.for_each_key([&](const std::string& key, EntryKind kind) {
    const NestedKey path = prefix.child(key);
    if (kind == EntryKind::Tensor) {
      // Metadata only: a file or a store answers without reading the leaf.
      const LeafMeta meta = level.leaf_meta(key);
      const c10::IntArrayRef event = c10::IntArrayRef(meta.shape).slice(static_cast<size_t>(level.batch_dims()));
      out.emplace_back(path, LeafSpec(event.vec(), meta.dtype));
    } else if (kind == EntryKind::NonTensor) {
      out.emplace_back(path, LeafSpec(level.get(key).non_tensor()));
    } else if (kind == EntryKind::TensorDict) {
      const TensorDict child = level.get(key).tensordict();
      TD_CHECK(child.batch_size() == root_batch, ValueError, path.repr(), ": a nested level of batch size ",
               detail::size_str(child.batch_size()), " under a root of ", detail::size_str(root_batch),
               "; from_schema gives every level the root's batch size");
      collect(*child.impl(), path, root_batch, out);
    }
  });
}

}  // namespace

LeafSpecs leaf_specs(const TensorDict& td) {
  LeafSpecs out;
  collect(*td.impl(), NestedKey(), td.batch_size(), out);
  return out;
}

void check_leaf_specs(const LeafSpecs& specs, c10::IntArrayRef batch_size, const std::string& where) {
  std::vector<const NestedKey*> keys;
  keys.reserve(specs.size());
  for (const auto& [key, spec] : specs) {
    TD_CHECK(!key.empty(), ValueError, where, ": from_schema: an empty key");
    if (spec.is_tensor()) {
      TD_CHECK(spec.dtype() != at::ScalarType::Undefined, ValueError, where, ": from_schema: ", key.repr(),
               " has no dtype");
      for (int64_t d : spec.event_shape())
        TD_CHECK(d >= 0, ValueError, where, ": from_schema: ", key.repr(), " has the event shape ",
                 detail::size_str(spec.event_shape()), "; every dim must be a size (>= 0)");
    } else if (spec.value().is_stack()) {
      TD_CHECK(spec.value().ids().sizes() == batch_size, ShapeError, where, ": from_schema: ", key.repr(),
               " holds one value per element of ", detail::size_str(spec.value().ids().sizes()),
               ", not of the batch ", detail::size_str(batch_size));
    }
    keys.push_back(&key);
  }
  // Sorted, a key that is a level of another's path comes right before it.
  std::sort(keys.begin(), keys.end(), [](const NestedKey* a, const NestedKey* b) { return *a < *b; });
  for (size_t i = 1; i < keys.size(); ++i) {
    const NestedKey& a = *keys[i - 1];
    const NestedKey& b = *keys[i];
    const bool prefix = a.size() <= b.size() && std::equal(a.parts().begin(), a.parts().end(), b.parts().begin());
    TD_CHECK(!prefix, ValueError, where, ": from_schema: ", a.repr(),
             a == b ? " is given twice" : " is a leaf and a level of " + b.repr());
  }
}

}  // namespace tensordict
