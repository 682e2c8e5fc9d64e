#pragma once
// LazyStackImpl: the backend behind LazyStackedTensorDict. It holds its members by reference
// and presents them as one batch with a new dim at `stack_dim`. Reads build new tensors
// (at::stack of the members' leaves), so it declares no aliasing: every write reaches the
// members through write_, write_at_ and write_many_ (Note [Reads, copies and writes]).

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/TensorIndexing.h>
#include <c10/util/ArrayRef.h>

#include <tensordict/tensor_dict.h>
#include <tensordict/tensor_dict_base.h>

namespace tensordict {
namespace lazy {

/// How an index over a lazy stack's batch reaches its members.
struct MemberSelection {
  /// The members selected, in result order (repeats allowed).
  std::vector<int64_t> members;
  /// False when an integer picked one member: the stack dim is gone from the result.
  bool keeps_dim = true;
  /// Where the stack dim lands in the result (keeps_dim).
  int64_t position = 0;
  /// The index every selected member receives over its own batch (empty: the member whole).
  std::vector<at::indexing::TensorIndex> rest;
};

class LazyStackImpl final : public TensorDictBase {
 public:
  /// Members already validated (same rank, same device); `batch_size` from stacked_batch().
  LazyStackImpl(std::vector<TensorDict> members, int64_t stack_dim, c10::IntArrayRef batch_size,
                std::optional<at::Device> device);
  /// Members [begin, begin + count) of `shared`, the list another stack holds (a slice of it).
  LazyStackImpl(std::shared_ptr<std::vector<TensorDict>> shared, size_t begin, size_t count, int64_t stack_dim,
                c10::IntArrayRef batch_size, std::optional<at::Device> device);

  const char* type_name() const override { return "LazyStackedTensorDict"; }

  c10::ArrayRef<TensorDict> members() const {
    return count_ == 0 ? c10::ArrayRef<TensorDict>() : c10::ArrayRef<TensorDict>(list_->data() + begin_, count_);
  }
  int64_t stack_dim() const { return stack_dim_; }
  int64_t count() const { return static_cast<int64_t>(count_); }
  /// Batch dims of a member (the stack has one more).
  int64_t member_dims() const { return batch_dims() - 1; }
  /// Keys some members hold and others do not, in first-seen order.
  std::vector<std::string> exclusive_keys() const;
  /// Indices of the members holding `key`.
  std::vector<int64_t> holders(std::string_view key) const;

  /// The batch of a member (the stack's without the stack dim; -1 where members differ).
  BatchSize member_batch() const;
  /// How `index` splits over the members, or nullopt when they cannot share it (more than one
  /// index tensor, a mask across the stack dim and other dims).
  std::optional<MemberSelection> select_members(const BatchIndex& index) const;

  /// Adds a member at `position` (validated by the caller), growing the stack dim.
  void insert_member(int64_t position, TensorDict member);

  // ---- Storage primitives -------------------------------------------------------------------
  size_t num_entries() const override;
  std::vector<std::string> keys() const override;
  bool has(std::string_view key) const override;
  Entry get(std::string_view key) const override;
  void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const override;
  void insert_or_assign(std::string_view key, Entry value) override;
  void erase(std::string_view key) override;
  void rename(std::string_view from, std::string_view to) override;

  // ---- Hooks ----------------------------------------------------------------------------------
  EntryKind kind(std::string_view key) const override;
  void for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const override;
  LeafMeta leaf_meta(std::string_view key) const override;
  std::string missing_key_note(std::string_view key) const override;
  void repr_parts(std::vector<std::string>& parts) const override;
  void write_(std::string_view key, const at::Tensor& value) override;
  void write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) override;
  void write_many_(const TensorDict& values) override;
  void write_non_tensor_(std::string_view key, const NonTensorData& value) override;
  TensorDict make_child(std::string_view key, c10::IntArrayRef batch_size) const override;
  void set_batch_size(c10::IntArrayRef batch_size) override;
  void set_locked(bool locked) override;
  bool is_locked() const override;
  TensorDict index(const BatchIndex& index) const override;
  TensorDict index_ragged(c10::ArrayRef<at::indexing::TensorIndex> indices) const override;
  void put_ragged_(c10::ArrayRef<at::indexing::TensorIndex> indices, const TensorDict& value) override;
  TensorDict rearrange_batch(c10::IntArrayRef source) const override;
  /// A view or reshape that leaves the stack dim whole (the dims before it and after it keep
  /// their products) views every member and stays lazy; anything else reads the stacked leaves.
  TensorDict map_batch(c10::IntArrayRef new_batch_size, FunctionRef<at::Tensor(const at::Tensor&)> fn) const override;
  TensorDict map_leaves(FunctionRef<at::Tensor(const at::Tensor&)> fn,
                        std::optional<at::Device> device) const override;
  void release_resources() override;

 private:
  // The slice of `value` (broadcast like the stacked leaf `key`) member `i` receives.
  // `value` broadcasts to a stacked leaf of `leaf_dims` dims whose stack dim, of size `n`, is at
  // `stack_pos`.
  at::Tensor member_part(const at::Tensor& value, int64_t leaf_dims, int64_t stack_pos, int64_t i, int64_t n) const;
  int64_t leaf_dims(std::string_view key) const;
  // How raw `indices` over a ragged batch split over the members (bounds checked per member).
  MemberSelection select_ragged(c10::ArrayRef<at::indexing::TensorIndex> indices) const;
  // The members' non-tensor values at one key as the stack's (ragged when batches differ).
  NonTensorData stack_non_tensor(const std::vector<NonTensorData>& items) const;

  // Member `i` as a handle to write through: writes reach the member tensordict, never the list.
  TensorDict& member_at(size_t i) const { return (*list_)[begin_ + i]; }

  // A slice with step 1 (ls[a:b]) holding at least half of its parent's list shares it instead
  // of copying the handles: one reference count where a copy takes one per member. This stack's
  // members are list_[begin_, begin_ + count_); insert_member copies the list first unless this
  // stack is its only user, so a change to one stack's list never shows in another's.
  std::shared_ptr<std::vector<TensorDict>> list_;
  size_t begin_ = 0;
  size_t count_ = 0;
  int64_t stack_dim_;
};

/// The batch size of a stack of `members` along `stack_dim`: the members' batch with their
/// count inserted, dims that differ between members shown as -1. Raises the errors of
/// semantics §2 for members of different ranks or devices, or any difference with
/// `strict_shape`.
BatchSize stacked_batch(const std::vector<TensorDict>& members, int64_t stack_dim, bool strict_shape);

/// A lazy stack over `members` (validated), as a TensorDict handle.
TensorDict make_stack(std::vector<TensorDict> members, int64_t stack_dim, bool strict_shape = false);

/// An empty lazy stack: members would have batch `member_batch`; the stack dim has size 0.
TensorDict make_empty(c10::IntArrayRef member_batch, int64_t stack_dim, std::optional<at::Device> device);

/// The LazyStackImpl behind `td`, or nullptr.
LazyStackImpl* as_stack(const TensorDict& td);

}  // namespace lazy
}  // namespace tensordict
