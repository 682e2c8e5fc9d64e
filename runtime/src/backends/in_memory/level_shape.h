#pragma once
// Note [Shared shapes]: an elementwise op over an intact result (Note [Intact results]) builds a
// result with the same keys, kinds, nested levels and leaf records over a new storage. Building
// those levels slot by slot, then dropping them, cost more than the kernel on small trees. A
// LevelShape is that structure, immutable and shared: the result is one *deferred* level holding
// the shape and the storage, and builds its slots (and its nested levels, deferred in turn) on
// first access (TensorDictImpl::materialize). A deferred result fed to the next op gives it its
// shape as it is; a level built otherwise (a consolidated tensordict's, a result read since)
// caches the shape made from it until it is written to.
//
// What a write does not tell the level, a nested level's batch size, device or dim names, is
// compared on each use (fits); the root's come from the operand itself. A kept shape that no
// longer fits is replaced by the one made then (the old one kept alive until the next write:
// readers hold it without a lock), so a renamed nested level costs one new shape, not one an op.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_base.h>

#include "backends/in_memory/lazy_leaves.h"

namespace tensordict {

class TensorDictImpl;
struct GroupPlan;

struct LevelShape : c10::intrusive_ptr_target {
  struct Field {
    std::string key;
    uint32_t hash;
    EntryKind kind;
    c10::intrusive_ptr<LevelShape> child;  // kind TensorDict
    Entry value;                           // kind NonTensor (shared data, as the op copies it)
  };
  std::vector<Field> fields;     // in slot order
  std::vector<uint32_t> nested;  // the fields that are nested levels
  std::vector<int64_t> batch_size;
  std::optional<at::Device> device;
  DimNames names;
  /// The level's leaves, as LazyLeaves keeps them (slot, offset, dim, sizes, strides).
  std::vector<int64_t> records;
  size_t leaves = 0;
  int64_t elements = 0;       // of this level's leaves
  int64_t tree_elements = 0;  // and its nested levels'
  size_t tree_leaves = 0;
  bool has_empty_level = false;  // a nested level without entries, at any depth
  bool has_non_tensor_stack = false;  // a NonTensorStack (per-row values), at any depth
  bool over_runs = false;        // LazyLeaves::over_runs of the level's records
  /// Per flat the records number: the elements and the leaves of this level's records
  /// (LazyLeaves::per_flat), and of this level's and its nested levels' (a tree over runs lists
  /// its flats alike at every level, Note [Intact runs]).
  FlatCounts per_flat, tree_per_flat;

  /// What grouped ops over a tree of this shape made from it (Note [Grouped results],
  /// grouped_result.h), kept for the next: its leaves' groups, and the result shapes by the
  /// batch sizes an op left and its groups' entry sizes. Under derived_mutex; used where this
  /// shape is an operand's root.
  mutable std::mutex derived_mutex;
  mutable bool plan_made = false;
  mutable std::shared_ptr<const GroupPlan> group_plan;  // null: its leaves do not group
  mutable std::vector<std::pair<std::vector<int64_t>, c10::intrusive_ptr<LevelShape>>> derived;

  /// When the last level holding it goes (the interning table's weak reference may outlive it).
  void release_resources() override {
    fields.clear();
    records.clear();
    per_flat = {};
    tree_per_flat = {};
    group_plan.reset();
    derived.clear();
  }
};

namespace in_memory {

/// The shape of `level` (an intact packed level: a packed result or a consolidated table), whose
/// batch size, device and names are `outer`'s: the level's own or cached one when it still fits,
/// else one made now (and cached on the level when it has none). Shapes made are interned: two
/// trees laid out alike (and without non-tensors) get the same object, so same_shape() compares
/// pointers.
c10::intrusive_ptr<LevelShape> shape_of(const TensorDictImpl& level, const TensorDictBase& outer);
/// `fresh` (a shape just made) or an identical one already in use, so that trees laid out alike
/// share one shape; nested shapes must be interned first.
c10::intrusive_ptr<LevelShape> intern_shape(c10::intrusive_ptr<LevelShape> fresh);
/// Whether two shapes describe the same tree: keys, kinds and order, leaf records, and the batch
/// sizes of nested levels (the roots' are the caller's to compare).
bool same_shape(const LevelShape& a, const LevelShape& b);

/// For code that walks an operand's level as an op reads it (a shape made, a result built
/// eagerly): raises when the leaf `key` has no layout record, that is, the level was written to
/// meanwhile.
void require_leaf_record(const LazyLeaves* layout, const std::string& key);
/// The packed level of the nested tensordict `key` of such an operand; raises when it was
/// replaced meanwhile by a tensordict that is no packed level.
const TensorDictImpl& operand_child(const TensorDictBase& child, const std::string& key);

}  // namespace in_memory
}  // namespace tensordict
