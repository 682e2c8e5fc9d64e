#pragma once
// LazyStackedTensorDict: tensordicts stacked along a new batch dim without copying (Python
// tensordict's LazyStackedTensorDict, semantics §2). Members are held by reference and may
// differ: keys only some members hold are "exclusive" (visible through the members and in
// repr), and leaves or batch dims that differ in size are ragged (-1 in the batch size). Reads
// stack the members' leaves into new tensors; every write goes to the members. See
// docs/backends.md, "Lazy stacks".
//
//   auto ls = tensordict::lazy_stack({env0, env1});   // batch [2, ...]
//   ls.index({0}).is_same(env0);                      // true: the member itself
//   ls.get("obs");                                    // at::stack of the members' "obs"
//   ls.get_as_list("pixels");                         // ragged leaves, one per member

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/ArrayRef.h>

#include <tensordict/key.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

/// Where get_padded pads a shorter leaf.
enum class PaddingSide : uint8_t { Right, Left };

/// How densify stores a key whose leaves differ in shape between members.
enum class DensifyLayout : uint8_t {
  Nested,  ///< a nested tensor (stack dim 0 only)
  Padded,  ///< a dense tensor padded with zeros on the right
};

/// A handle to a lazy stack: a TensorDict (every tensordict operation works on it) with the
/// lazy-stack operations added. It has no state of its own, so it converts to and from
/// TensorDict freely; `LazyStackedTensorDict::from(td)` checks that `td` is one.
class LazyStackedTensorDict : public TensorDict {
 public:
  /// A lazy stack of `members` along `stack_dim` (in [-member_dims - 1, member_dims]). Members
  /// are kept by reference. Their batch sizes must have the same rank (and be equal with
  /// `strict_shape`), their devices must match: RuntimeError otherwise. Dims where members
  /// differ show as -1 in batch_size(). ValueError for an empty list (use empty()).
  explicit LazyStackedTensorDict(std::vector<TensorDict> members, int64_t stack_dim = 0, bool strict_shape = false);
  /// A lazy stack with no members yet: its batch is `member_batch_size` with a 0 inserted at
  /// `stack_dim` (Python's `LazyStackedTensorDict(stack_dim=1, batch_size=[1, 2])`: [1, 0, 2]).
  static LazyStackedTensorDict empty(c10::IntArrayRef member_batch_size = {}, int64_t stack_dim = 0,
                                     std::optional<at::Device> device = std::nullopt);
  /// `td` as a lazy stack; TypeError naming its class when it is not one.
  static LazyStackedTensorDict from(const TensorDict& td);
  /// True when `td` is a lazy stack.
  static bool is_lazy_stack(const TensorDict& td);

  int64_t stack_dim() const;
  /// The members, in stack order (handles to the tensordicts themselves). A view: valid while
  /// the stack lives and gains no member (`.vec()` copies the handles).
  c10::ArrayRef<TensorDict> members() const;
  /// Member `i` (negative counts from the end): the same handle the stack holds.
  TensorDict member(int64_t i) const;
  int64_t num_members() const;
  /// True when `td` is one of the members (identity, as Python's `td in ls`).
  bool has_member(const TensorDict& td) const;
  /// Keys some members hold and others do not, in first-seen order (top level).
  std::vector<std::string> exclusive_keys() const;

  /// The members' leaves at `key`, one per member, not stacked (ragged leaves welcome).
  std::vector<at::Tensor> get_as_list(KeyRef key) const;
  /// The members' leaves at `key` padded to a common shape with `padding_value` and stacked
  /// along the stack dim (Python's `as_padded_tensor`).
  at::Tensor get_padded(KeyRef key, double padding_value = 0.0, PaddingSide side = PaddingSide::Right) const;
  /// The members' leaves at `key` as one nested tensor (Python's `as_nested_tensor`); needs
  /// stack dim 0 (ValueError otherwise).
  at::Tensor get_nested(KeyRef key) const;

  /// Appends a member. Its device must match, and its batch size equal the members' except in
  /// dims already ragged (-1): ValueError otherwise. LockedError when locked.
  LazyStackedTensorDict& append(const TensorDict& td);
  /// Inserts a member before position `index` (0..num_members(); negative counts from the end).
  LazyStackedTensorDict& insert(int64_t index, const TensorDict& td);
  LazyStackedTensorDict& extend(const std::vector<TensorDict>& tds);

  /// TensorDict::update, except that a lazy stack `source` along the same dim with more members
  /// updates the members pairwise and appends its extra members (cloned with `clone`). Python
  /// silently drops them.
  LazyStackedTensorDict& update(const TensorDict& source, bool clone = false, bool inplace = false,
                                const std::optional<std::vector<NestedKey>>& keys_to_update = std::nullopt);

  /// A dense in-memory tensordict in which every key of any member appears, in first-seen
  /// order: keys whose leaves match are stacked, ragged or exclusive ones become nested tensors
  /// (`Nested`, stack dim 0) or zero-padded tensors (`Padded`, members lacking the key give
  /// zeros); nested collections are densified in turn.
  TensorDict densify(DensifyLayout layout = DensifyLayout::Nested) const;

 private:
  explicit LazyStackedTensorDict(TensorDict td) : TensorDict(std::move(td)) {}
};

/// A lazy stack of `tds` along `dim`: always lazy, even when the members match.
LazyStackedTensorDict lazy_stack(const std::vector<TensorDict>& tds, int64_t dim = 0);
/// A dense stack (tensordict::stack) when every member has the same keys, kinds, leaf shapes
/// and batch size; a lazy stack otherwise.
TensorDict maybe_dense_stack(const std::vector<TensorDict>& tds, int64_t dim = 0);

}  // namespace tensordict
