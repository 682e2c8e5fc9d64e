#include "backends/consolidated/views_from_tree.h"

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <c10/util/strides.h>

#include <tensordict/entry.h>

#include "backends/consolidated/metadata_layout.h"
#include "backends/in_memory/level_builder.h"
#include "backends/lazy_stack/lazy_stack_impl.h"

namespace tensordict {
namespace consolidated {

DimNames stored_names(const TensorDictBase& level) {
  DimNames out(level.batch_dims());
  bool any = false;
  for (size_t i = 0; i < out.size() && i < level.dim_names().size(); ++i) {
    if (level.dim_names()[i]) {
      out[i] = level.dim_names()[i];
      any = true;
    }
  }
  return any ? out : DimNames{};
}

namespace {

// Walks the source tree as describe() did, so that the packed leaves come in its order, and
// appends each level's entries in the reader's order: leaves, non-tensor data, nested levels.
class TreeViews {
 public:
  TreeViews(const at::Tensor& storage, c10::ArrayRef<PackedLeaf> leaves, std::optional<at::Device> device)
      : storage_(storage), leaves_(leaves), device_(device), flats_(storage, flat_leaves(leaves)) {}

  /// False when a level is a lazy stack (the partial build is then dropped).
  bool fill(LevelBuilder& out, const TensorDictBase& source) {
    // Copies: a backend's for_each may hand each key and entry over as temporaries.
    c10::SmallVector<std::pair<std::string, NonTensorData>, 4> non_tensors;
    c10::SmallVector<std::pair<std::string, TensorDict>, 4> children;
    bool ok = true;
    source.for_each([&](const std::string& key, const Entry& entry) {
      if (!ok) return;
      switch (entry.kind()) {
        case Entry::Kind::Tensor:
          if (next_ == leaves_.size()) {
            ok = false;  // more leaves than were packed: not the tree describe() walked
            return;
          }
          append_leaf(out, key, leaves_[next_++]);
          break;
        case Entry::Kind::NonTensor:
          non_tensors.emplace_back(key, entry.non_tensor());
          break;
        case Entry::Kind::TensorDict: {
          const TensorDictBase& child = *entry.tensordict_unchecked().impl();
          std::optional<TensorDict> level = build(child);
          if (!level) {
            ok = false;
            return;
          }
          children.emplace_back(key, std::move(*level));
          break;
        }
        case Entry::Kind::Undefined:
          break;
      }
    });
    if (!ok) return false;
    for (auto& [key, data] : non_tensors) out.append(std::move(key), NonTensorData(data.value()));
    for (auto& [key, child] : children) out.append(std::move(key), std::move(child));
    return true;
  }

  /// The packed result's levels list the flats (Note [Intact runs]).
  void list_flats(LevelBuilder& out) const {
    if (flats_.empty()) return;
    out.mark_packed_result();
    out.list_flats(flats_.all(), !flats_.tiles());
  }

  /// Every leaf taken, in describe's order.
  bool all_taken() const { return next_ == leaves_.size(); }

 private:
  static std::vector<LeafFlats::Leaf> flat_leaves(c10::ArrayRef<PackedLeaf> leaves) {
    std::vector<LeafFlats::Leaf> out;
    out.reserve(leaves.size());
    for (const PackedLeaf& p : leaves) out.push_back(LeafFlats::Leaf{p.start, p.nbytes, p.leaf.scalar_type()});
    return out;
  }

  std::optional<TensorDict> build(const TensorDictBase& source) {
    if (dynamic_cast<const lazy::LazyStackImpl*>(&source) != nullptr) return std::nullopt;
    LevelBuilder level(source.batch_size(), device_, source.num_entries());
    list_flats(level);
    if (!fill(level, source)) return std::nullopt;
    TensorDict out = level.finish();
    out.impl()->set_dim_names(stored_names(source));
    return out;
  }

  // As the reader makes it: a view of its flat made when read, or a view of the bytes now.
  void append_leaf(LevelBuilder& out, const std::string& key, const PackedLeaf& p) {
    const at::Tensor& t = p.leaf;
    const at::ScalarType dtype = t.scalar_type();
    const auto item = static_cast<int64_t>(t.element_size());
    if (const at::Tensor* flat = flats_.empty() ? nullptr : flats_.find(dtype, p.start, p.nbytes)) {
      out.append_lazy_view(key, *flat, p.start / item, t.sizes(), c10::contiguous_strides(t.sizes()));
    } else {
      out.append(key, storage_.narrow(0, p.start, p.nbytes).view(dtype).view(t.sizes()));
    }
  }

  const at::Tensor& storage_;
  c10::ArrayRef<PackedLeaf> leaves_;
  std::optional<at::Device> device_;
  LeafFlats flats_;
  size_t next_ = 0;
};

}  // namespace

std::optional<TensorDict> table_from_tree(const TensorDictBase& source, const at::Tensor& storage,
                                          c10::ArrayRef<PackedLeaf> leaves, std::optional<at::Device> device) {
  if (dynamic_cast<const lazy::LazyStackImpl*>(&source) != nullptr) return std::nullopt;
  TreeViews views(storage, leaves, device);
  LevelBuilder table(source.batch_size(), device, source.num_entries());
  views.list_flats(table);
  if (!views.fill(table, source) || !views.all_taken()) return std::nullopt;
  return table.finish();
}

}  // namespace consolidated
}  // namespace tensordict
