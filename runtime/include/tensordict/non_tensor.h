#pragma once
// Non-tensor entries (Python's NonTensorData / NonTensorStack). A value is either one JSON
// value shared by every batch element, or a stack: one value per batch element, stored as a
// pool of distinct values plus an int64 tensor of pool ids shaped like the batch. Batch
// operations (indexing, reshaping, stacking) apply to that id tensor like to any leaf, so a
// stack follows every batch operation without special cases.
//
// A lazy stack whose members' batches differ (a ragged stack: batch [2, -1] of members [5] and
// [8]) has no dense id tensor: its non-tensor values are ragged, one stack per member, as
// Python's NonTensorStack of NonTensorStacks. tolist() and members() read them; what needs the
// dense ids (ids(), as_stack, batch operations) raises ShapeError saying so.

#include <iosfwd>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include <tensordict/json.h>

namespace tensordict {

class NonTensorData {
 public:
  /// One value for every batch element.
  NonTensorData(json::Value value = json::Value());
  NonTensorData(const char* value) : NonTensorData(json::Value(value)) {}
  NonTensorData(std::string value) : NonTensorData(json::Value(std::move(value))) {}

  /// One value per batch element: `ids` (int64, shaped like the batch) indexes `pool`.
  static NonTensorData from_ids(std::vector<json::Value> pool, at::Tensor ids);
  /// A stack from a nested JSON list of the given batch shape (what `tolist` returns).
  static NonTensorData from_list(const json::Value& nested, c10::IntArrayRef batch_size);

  /// Member i's values (`members[i]`, over its own batch `member_batches[i]`) of a ragged lazy
  /// stack along `stack_dim`; `batch_size` is the stack's (-1 where the members differ).
  static NonTensorData ragged(const std::vector<NonTensorData>& members,
                              const std::vector<std::vector<int64_t>>& member_batches, int64_t stack_dim,
                              c10::IntArrayRef batch_size);

  /// True when elements may hold different values.
  bool is_stack() const { return ids_.defined() || ragged_ != nullptr; }
  /// True for the values of a ragged lazy stack (members of different batch sizes).
  bool is_ragged() const { return ragged_ != nullptr; }
  /// A ragged value's per-member stacks, in member order (empty otherwise).
  const std::vector<NonTensorData>& members() const;
  /// The batch shape of a stack: the ids' shape, or a ragged stack's batch (-1 where members
  /// differ); [] for one shared value.
  c10::IntArrayRef shape() const;
  /// True when every element holds the same value (always so when not a stack).
  bool is_uniform() const;
  /// The value shared by all elements. Throws ValueError for a stack whose values differ.
  const json::Value& value() const;
  /// Uniform: the value. Stack: nested lists following the id tensor's shape. Ragged: nested
  /// lists of the stack's shape, the ragged dims as long as each member's (stack dim 0: one
  /// list per member).
  json::Value tolist() const;

  /// The pool ids of a stack (ShapeError for a ragged value, which has none).
  const at::Tensor& ids() const {
    if (ragged_) throw_ragged("ids()");
    return ids_;
  }
  const std::vector<json::Value>& pool() const {
    if (ragged_) throw_ragged("pool()");
    return *pool_;
  }

  /// Same values, ids replaced (the result of a batch operation on `ids()`).
  NonTensorData with_ids(at::Tensor ids) const;
  /// A stack whose ids are shaped `batch_size`, filled from this (uniform or stack) value.
  NonTensorData as_stack(c10::IntArrayRef batch_size) const;
  /// The same values with the pool cut to what ids use, when it holds more than twice as many
  /// (row-by-row writes and stacks would otherwise grow it without bound).
  NonTensorData compacted() const;
  /// Stacks several non-tensor values along `dim` of the batch `batch_size` they share.
  /// Equal uniform values stay uniform.
  static NonTensorData stack(const std::vector<NonTensorData>& items, int64_t dim,
                             c10::IntArrayRef batch_size);

  /// Element-wise equality of the values (ids may differ).
  friend bool operator==(const NonTensorData& a, const NonTensorData& b);
  friend bool operator!=(const NonTensorData& a, const NonTensorData& b) { return !(a == b); }

 private:
  struct Ragged;
  [[noreturn]] void throw_ragged(const char* what) const;

  std::shared_ptr<const std::vector<json::Value>> pool_;
  at::Tensor ids_;  // undefined: uniform value pool_->front(), or ragged
  std::shared_ptr<const Ragged> ragged_;
};

/// Python's repr: `NonTensorData(data='x')`, `NonTensorStack([...], batch_size=[2, 3])`.
std::ostream& operator<<(std::ostream& os, const NonTensorData& data);

}  // namespace tensordict
