// Indexing a lazy stack (semantics §2): the index is split into the members it selects and the
// index each of them receives, so an integer on the stack dim returns the member itself, and a
// slice or an index tensor there a lazy stack of the same members, with no copy.

#include <ATen/ATen.h>

#include <tensordict/batch_index.h>
#include <tensordict/errors.h>

#include "backends/lazy_stack/lazy_stack_impl.h"

namespace tensordict {
namespace lazy {

using at::indexing::TensorIndex;
using Kind = BatchIndex::Item::Kind;

std::optional<MemberSelection> LazyStackImpl::select_members(const BatchIndex& index) const {
  int tensors = 0;
  for (const auto& item : index.items()) tensors += item.kind == Kind::Tensor;
  if (tensors > 1) return std::nullopt;  // numpy's placement rules for several index tensors

  MemberSelection sel;
  bool covered = false;
  int64_t source = 0, result = 0;
  for (const auto& item : index.items()) {
    switch (item.kind) {
      case Kind::None:
        sel.rest.emplace_back(at::indexing::None);
        ++result;
        break;
      case Kind::Boolean:
        sel.rest.emplace_back(item.integer != 0);
        ++result;
        break;
      case Kind::Integer:
        if (source == stack_dim_) {
          covered = true;
          sel.keeps_dim = false;
          sel.members = {item.integer};
        } else {
          sel.rest.emplace_back(item.integer);
        }
        ++source;
        break;
      case Kind::Slice:
        if (source == stack_dim_) {
          covered = true;
          sel.position = result;
          for (int64_t i = item.start; item.step > 0 ? i < item.stop : i > item.stop; i += item.step) {
            sel.members.push_back(i);
          }
        } else {
          sel.rest.emplace_back(at::indexing::Slice(item.start, item.stop, item.step));
        }
        ++source;
        ++result;
        break;
      case Kind::Tensor: {
        const bool mask = item.tensor.scalar_type() == at::kBool;
        const int64_t consumed = mask ? item.tensor.dim() : 1;
        if (source <= stack_dim_ && stack_dim_ < source + consumed) {
          if (item.tensor.dim() != 1) return std::nullopt;  // a mask over several dims, a 2-d index
          covered = true;
          sel.position = result;
          at::Tensor picks = mask ? item.tensor.nonzero().view(-1) : item.tensor;
          picks = picks.to(at::kCPU, at::kLong).contiguous();
          const int64_t* p = picks.data_ptr<int64_t>();
          for (int64_t i = 0; i < picks.numel(); ++i) sel.members.push_back(p[i] < 0 ? p[i] + count() : p[i]);
          ++result;
        } else {
          sel.rest.emplace_back(item.tensor);
          result += mask ? 1 : item.tensor.dim();
        }
        source += consumed;
        break;
      }
    }
  }
  if (!covered) {
    // The index stops before the stack dim: every member, the stack dim after the result's dims.
    sel.position = result + (stack_dim_ - source);
    for (int64_t i = 0; i < count(); ++i) sel.members.push_back(i);
  }
  return sel;
}

namespace {
// The member `index` picks when it is an integer on the stack dim and full slices elsewhere
// (index({i})), or -1: the common case skips building a MemberSelection.
int64_t single_member(const BatchIndex& index, int64_t stack_dim) {
  int64_t member = -1;
  int64_t source = 0;
  for (const auto& item : index.items()) {
    if (item.kind == Kind::Integer && source == stack_dim) member = item.integer;
    else if (item.kind != Kind::Slice || !item.full) return -1;
    ++source;
  }
  return member;
}

// The slice `index` takes on the stack dim when every other item is a full slice (ls[a:b]), or
// null: such a selection needs no MemberSelection and no new check of the members.
const BatchIndex::Item* stack_dim_slice(const BatchIndex& index, int64_t stack_dim) {
  const auto& items = index.items();
  if (static_cast<int64_t>(items.size()) <= stack_dim) return nullptr;
  for (const auto& item : items) {
    if (item.kind != Kind::Slice || (!item.full && &item != &items[static_cast<size_t>(stack_dim)])) return nullptr;
  }
  return &items[static_cast<size_t>(stack_dim)];
}
}  // namespace

TensorDict LazyStackImpl::index(const BatchIndex& index) const {
  if (const int64_t m = single_member(index, stack_dim_); m >= 0) return member_at(static_cast<size_t>(m));
  if (const BatchIndex::Item* slice = stack_dim_slice(index, stack_dim_)) {
    // Members of a stack with no ragged dim (a ragged batch never reaches here) agree with each
    // other already: the sub-stack's batch is the index's result, as make_stack would find.
    const int64_t picked = index.result_batch_size()[static_cast<size_t>(stack_dim_)];
    // A step-1 slice shares the list when it holds at least half of it: a slice then pins at
    // most twice the members it selects (ls[:2] of a million must not keep the rest alive).
    if (picked > 0 && slice->step == 1 && 2 * static_cast<size_t>(picked) >= list_->size()) {
      return TensorDict(c10::make_intrusive<LazyStackImpl>(list_, begin_ + static_cast<size_t>(slice->start),
                                                           static_cast<size_t>(picked), stack_dim_,
                                                           index.result_batch_size(), device_));
    }
    if (picked > 0) {
      std::vector<TensorDict> out;
      out.reserve(static_cast<size_t>(picked));
      for (int64_t i = slice->start; slice->step > 0 ? i < slice->stop : i > slice->stop; i += slice->step)
        out.push_back(member_at(static_cast<size_t>(i)));
      return TensorDict(c10::make_intrusive<LazyStackImpl>(std::move(out), stack_dim_, index.result_batch_size(), device_));
    }
  }
  std::optional<MemberSelection> sel = select_members(index);
  if (!sel) return TensorDictBase::index(index);  // reads and indexes the stacked leaves
  auto indexed = [&](int64_t m) {
    const TensorDict& member = member_at(static_cast<size_t>(m));
    return sel->rest.empty() ? member : member.index(sel->rest);
  };
  if (!sel->keeps_dim) return indexed(sel->members.front());
  if (sel->members.empty()) {
    BatchSize batch(index.result_batch_size().begin(), index.result_batch_size().end());
    batch.erase(batch.begin() + sel->position);
    return make_empty(batch, sel->position, device_);
  }
  std::vector<TensorDict> out;
  out.reserve(sel->members.size());
  for (int64_t m : sel->members) out.push_back(indexed(m));
  return make_stack(std::move(out), sel->position);
}

}  // namespace lazy
}  // namespace tensordict
