// Indexing a ragged lazy stack (batch [2, -1]: members of 5 and 8 rows). A BatchIndex cannot
// bounds-check a dim of -1, so the raw index is split here: its item over the stack dim picks
// the members, and every other item goes to each member, which checks it against its own batch
// (Python indexes the members the same way: ls[1, 2] is row 2 of member 1).

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/errors.h>

#include "backends/lazy_stack/lazy_stack_impl.h"
#include "core/format.h"

namespace tensordict {
namespace lazy {

using at::indexing::TensorIndex;

namespace {

int64_t dims_consumed(const TensorIndex& item) {
  if (item.is_integer() || item.is_slice()) return 1;
  if (item.is_tensor()) return item.tensor().scalar_type() == at::kBool ? item.tensor().dim() : 1;
  return 0;  // None, a boolean, Ellipsis
}

// The members `item` picks among `count`, in result order; torch's rules (negative indices,
// slices, masks), with its range errors as IndexError.
std::vector<int64_t> picked_members(const TensorIndex& item, int64_t count) {
  at::Tensor picks;
  try {
    // Any integer index tensor picks members (torch 1.13 takes only int64 ones).
    const bool narrow_ints = item.is_tensor() && at::isIntegralType(item.tensor().scalar_type(), /*includeBool=*/false) &&
                             item.tensor().scalar_type() != at::kLong;
    const TensorIndex pick = narrow_ints ? TensorIndex(item.tensor().to(at::kLong)) : item;
    picks = at::arange(count).index({pick}).reshape({-1});
  } catch (const c10::Error& e) {
    TD_THROW(IndexError, "index over the stack dim of a LazyStackedTensorDict of ", count,
             " members: ", e.what_without_backtrace());
  }
  const int64_t* p = picks.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + picks.numel());
}

}  // namespace

MemberSelection LazyStackImpl::select_ragged(c10::ArrayRef<TensorIndex> indices) const {
  const std::string shape = detail::size_str(batch_size_);
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& item : indices) {
    consumed += dims_consumed(item);
    ellipses += item.is_ellipsis();
  }
  TD_CHECK(ellipses <= 1, IndexError, "an index can only have a single ellipsis ('...')");
  TD_CHECK(consumed <= batch_dims(), IndexError, "too many indices for a LazyStackedTensorDict of batch size ",
           shape, ": ", consumed, " dims indexed");
  std::vector<TensorIndex> items;
  for (const TensorIndex& item : indices) {
    if (!item.is_ellipsis()) {
      items.push_back(item);
      continue;
    }
    for (int64_t d = consumed; d < batch_dims(); ++d) items.emplace_back(at::indexing::Slice());
  }

  MemberSelection sel;
  bool covered = false;
  int64_t source = 0, result = 0, tensors = 0;
  for (const TensorIndex& item : items) {
    const int64_t n = dims_consumed(item);
    tensors += item.is_tensor();
    TD_CHECK(tensors <= 1, IndexError, "several index tensors over the ragged batch ", shape,
             " of a LazyStackedTensorDict: index the stack dim first, then each member");
    const bool at_stack = n > 0 && source <= stack_dim_ && stack_dim_ < source + n;
    if (!at_stack) {
      sel.rest.push_back(item);
      if (item.is_tensor()) result += item.tensor().scalar_type() == at::kBool ? 1 : item.tensor().dim();
      else if (!item.is_integer()) ++result;  // a slice, None or a boolean keeps or adds a dim
      source += n;
      continue;
    }
    TD_CHECK(n == 1 && (!item.is_tensor() || item.tensor().dim() == 1), IndexError,
             "a mask or index tensor over the stack dim and other dims of the ragged batch ", shape,
             " of a LazyStackedTensorDict: index the stack dim on its own first (ls.index({i}) is member i)");
    covered = true;
    sel.members = picked_members(item, count());
    sel.keeps_dim = !item.is_integer();
    sel.position = result;
    if (sel.keeps_dim) ++result;
    ++source;
  }
  if (!covered) {
    sel.position = result + (stack_dim_ - source);
    for (int64_t i = 0; i < count(); ++i) sel.members.push_back(i);
  }
  return sel;
}

TensorDict LazyStackImpl::index_ragged(c10::ArrayRef<TensorIndex> indices) const {
  const MemberSelection sel = select_ragged(indices);
  auto indexed = [&](int64_t m) {
    const TensorDict& member = member_at(static_cast<size_t>(m));
    return sel.rest.empty() ? member : member.index(sel.rest);
  };
  if (!sel.keeps_dim) return indexed(sel.members.front());
  if (sel.members.empty()) {
    const BatchSize inner = count() > 0 ? BatchSize(indexed(0).batch_size().begin(), indexed(0).batch_size().end())
                                        : member_batch();
    return make_empty(inner, sel.position, device_);
  }
  std::vector<TensorDict> out;
  out.reserve(sel.members.size());
  for (int64_t m : sel.members) out.push_back(indexed(m));
  return make_stack(std::move(out), sel.position);
}

void LazyStackImpl::put_ragged_(c10::ArrayRef<TensorIndex> indices, const TensorDict& value) {
  const MemberSelection sel = select_ragged(indices);
  auto put = [&](int64_t m, const TensorDict& part) { member_at(static_cast<size_t>(m)).index_put_(sel.rest, part); };
  if (!sel.keeps_dim) {
    put(sel.members.front(), value);
    return;
  }
  const int64_t n = static_cast<int64_t>(sel.members.size());
  // The value's part for each selected member: its own members when it is a lazy stack along
  // the same dim, its slices along that dim otherwise, or all of it (broadcast) when it has no
  // such dim.
  std::vector<TensorDict> parts;
  const LazyStackImpl* other = as_stack(value);
  if (other != nullptr && other->stack_dim_ == sel.position && other->count() == n) {
    parts = other->members().vec();
  } else if (value.batch_dims() > sel.position && value.batch_size()[sel.position] == n) {
    parts = value.unbind(sel.position);
  } else {
    TD_CHECK(value.batch_dims() <= sel.position, ShapeError, "cannot write a tensordict of batch size ",
             detail::size_str(value.batch_size()), " into ", n, " members of a LazyStackedTensorDict of batch size ",
             detail::size_str(batch_size_), ": its dim ", sel.position, " must hold one entry per member");
    parts.assign(static_cast<size_t>(n), value);
  }
  for (int64_t j = 0; j < n; ++j) put(sel.members[static_cast<size_t>(j)], parts[static_cast<size_t>(j)]);
}

}  // namespace lazy
}  // namespace tensordict
