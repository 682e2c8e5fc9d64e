// Operations producing or consuming several tensordicts: split, chunk, unbind, stack, cat.

#include <algorithm>

#include <ATen/ATen.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/level_builder.h"
#include "core/batch_dim.h"
#include "core/borrowed_tensors.h"
#include "core/dim_names.h"
#include "core/format.h"
#include "core/plain_copy.h"
#include "core/key_chain.h"
#include "core/validate.h"
#include "handle/aligned_level.h"
#include "handle/key_path.h"
#include "ops/leafwise.h"

namespace tensordict {

using detail::size_str;

namespace {

int64_t wrap_batch_dim(int64_t dim, const TensorDict& td, const char* op) {
  return detail::wrap_batch_dim<IndexError>(dim, td.batch_dims(), op, td.batch_size());
}

// Splits every leaf with `fn` (which returns one piece per output) into `batches.size()`
// tensordicts; nested tensordicts and non-tensor stacks follow.
std::vector<TensorDict> split_with(const TensorDictBase& td,
                                   const std::vector<BatchSize>& batches,
                                   const std::function<std::vector<at::Tensor>(const at::Tensor&)>& fn,
                                   bool keep_lock = true) {
  std::vector<LevelBuilder> outs;
  outs.reserve(batches.size());
  for (const auto& b : batches) outs.emplace_back(b, td.device(), td.num_entries());
  const size_t old_dims = td.batch_size().size();
  td.for_each([&](const std::string& key, const Entry& entry) {
    switch (entry.kind()) {
      case Entry::Kind::Tensor: {
        std::vector<at::Tensor> pieces = fn(entry.tensor_unchecked());
        for (size_t i = 0; i < outs.size(); ++i) outs[i].append(key, std::move(pieces[i]));
        break;
      }
      case Entry::Kind::TensorDict: {
        const TensorDictBase* child = entry.tensordict_unchecked().impl();
        std::vector<BatchSize> child_batches;
        c10::IntArrayRef extra = child->batch_size().slice(old_dims);
        for (const auto& b : batches) {
          BatchSize cb = b;
          cb.append(extra.begin(), extra.end());
          child_batches.push_back(cb);
        }
        std::vector<TensorDict> pieces = split_with(*child, child_batches, fn, keep_lock);
        for (size_t i = 0; i < outs.size(); ++i) outs[i].append(key, std::move(pieces[i]));
        break;
      }
      case Entry::Kind::NonTensor: {
        const NonTensorData& data = entry.non_tensor();
        if (!data.is_stack()) {
          for (auto& out : outs) out.append(key, data);
          break;
        }
        std::vector<at::Tensor> pieces = fn(data.ids());
        for (size_t i = 0; i < outs.size(); ++i) outs[i].append(key, data.with_ids(pieces[i]));
        break;
      }
      case Entry::Kind::Undefined:
        break;
    }
  });
  std::vector<TensorDict> result;
  result.reserve(outs.size());
  for (auto& out : outs) {
    out.set_locked(keep_lock && td.is_locked());
    result.push_back(out.finish());
  }
  return result;
}

// split_with locks the pieces of a locked level; pieces of a snapshot (read from a backend whose
// reads are copies) get the lock of the tensordict they came from.
std::vector<TensorDict> keep_locks(std::vector<TensorDict> pieces, const TensorDict& from, const TensorDict& read) {
  if (!read.is_same(from) && from.is_locked()) {
    for (auto& piece : pieces) piece.lock_();
  }
  return pieces;
}

}  // namespace

// The pieces of a named tensordict keep its names (less the unbound dim's).
static std::vector<TensorDict> with_names(std::vector<TensorDict> pieces, const TensorDictBase& from,
                                   std::optional<int64_t> removed_dim) {
  if (C10_LIKELY(from.dim_names().empty())) return pieces;
  DimNames names = detail::names_of(from);
  if (removed_dim) names.erase(names.begin() + *removed_dim);
  for (TensorDict& piece : pieces) detail::assign_names(*piece.impl(), names);
  return pieces;
}

std::vector<TensorDict> TensorDict::split(int64_t split_size, int64_t dim) const {
  TD_CHECK(split_size > 0, ValueError, "TensorDict.split: split_size must be positive, got ",
           split_size, ".");
  dim = wrap_batch_dim(dim, *this, "split");
  const int64_t total = batch_size()[dim];
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < total; start += split_size) sizes.push_back(std::min(split_size, total - start));
  if (sizes.empty()) sizes.push_back(0);
  return split(sizes, dim);
}

std::vector<TensorDict> TensorDict::split(c10::IntArrayRef split_sizes, int64_t dim) const {
  dim = wrap_batch_dim(dim, *this, "split");
  int64_t sum = 0;
  for (int64_t s : split_sizes) {
    TD_CHECK(s >= 0, ValueError, "TensorDict.split: split sizes must be non-negative, got ", split_sizes);
    sum += s;
  }
  TD_CHECK(sum == batch_size()[dim], RuntimeError, "TensorDict.split: split sizes ", split_sizes,
           " sum to ", sum, " but batch dim ", dim, " has size ", batch_size()[dim]);
  std::vector<BatchSize> batches;
  for (int64_t s : split_sizes) {
    BatchSize b(batch_size().begin(), batch_size().end());
    b[dim] = s;
    batches.push_back(b);
  }
  std::vector<int64_t> sizes(split_sizes.begin(), split_sizes.end());
  const TensorDict src = ops::readable(*this);
  return with_names(keep_locks(split_with(*src.impl(), batches,
                                          [&](const at::Tensor& t) { return t.split_with_sizes(sizes, dim); }),
                               *this, src),
                    *impl_, std::nullopt);
}

std::vector<TensorDict> TensorDict::chunk(int64_t chunks, int64_t dim) const {
  TD_CHECK(chunks >= 1, ValueError, "TensorDict.chunk: chunks must be a strictly positive integer, got ",
           chunks, ".");
  dim = wrap_batch_dim(dim, *this, "chunk");
  const int64_t total = batch_size()[dim];
  const int64_t size = std::max<int64_t>((total + chunks - 1) / chunks, 1);
  return split(size, dim);
}

namespace {

// v0.14's LazyStackedTensorDict._unbind: along the stack dim, the members themselves; along
// another dim, each member unbound there and the pieces restacked lazily.
std::vector<TensorDict> unbind_lazy(const LazyStackedTensorDict& ls, int64_t dim) {
  if (dim == ls.stack_dim()) return ls.members().vec();
  TD_CHECK(ls.batch_size()[dim] >= 0, ShapeError, "unbind: batch dim ", dim, " of the lazy stack (batch size ",
           size_str(ls.batch_size()), ") differs in size between its members; unbind the members instead");
  const int64_t member_dim = dim < ls.stack_dim() ? dim : dim - 1;
  const int64_t stack_dim = dim > ls.stack_dim() ? ls.stack_dim() : ls.stack_dim() - 1;
  std::vector<std::vector<TensorDict>> pieces;
  for (const TensorDict& m : ls.members()) pieces.push_back(m.unbind(member_dim));
  std::vector<TensorDict> out;
  for (int64_t j = 0; j < ls.batch_size()[dim]; ++j) {
    std::vector<TensorDict> column;
    column.reserve(pieces.size());
    for (const auto& p : pieces) column.push_back(p[static_cast<size_t>(j)]);
    out.push_back(lazy_stack(column, stack_dim));
  }
  return out;
}

}  // namespace

std::vector<TensorDict> TensorDict::unbind(int64_t dim) const {
  dim = wrap_batch_dim(dim, *this, "unbind");
  if (LazyStackedTensorDict::is_lazy_stack(*this))
    return with_names(unbind_lazy(LazyStackedTensorDict::from(*this), dim), *impl_, dim);
  BatchSize b(batch_size().begin(), batch_size().end());
  b.erase(b.begin() + dim);
  std::vector<BatchSize> batches(batch_size()[dim], b);
  // The pieces are unlocked, as v0.14's _unbind builds them.
  const TensorDict src = ops::readable(*this);
  return with_names(split_with(*src.impl(), batches, [&](const at::Tensor& t) { return t.unbind(dim); }, /*keep_lock=*/false),
                    *impl_, dim);
}

// ---- stack / cat -------------------------------------------------------------------------------

namespace {

enum class Join { Stack, Cat };

TensorDict join(const std::vector<TensorDict>& tds, int64_t dim, Join mode, const detail::KeyChain& prefix);

void check_same_keys(const std::vector<TensorDict>& tds, const detail::KeyChain& prefix, Join mode) {
  const auto& first = *tds.front().impl();
  for (size_t i = 1; i < tds.size(); ++i) {
    const auto& other = *tds[i].impl();
    bool same = other.num_entries() == first.num_entries();
    std::string missing;
    first.for_each([&](const std::string& key, const Entry&) {
      if (same && !other.has(key)) {
        same = false;
        missing = key;
      }
    });
    if (same) continue;
    std::string where = prefix.empty() ? "" : " in nested TensorDict " + prefix.repr();
    if (mode == Join::Stack) {
      TD_THROW(RuntimeError, "The sets of keys in the tensordicts to stack are exclusive",
               where, ": td[0] has keys ", detail::keys_str(first.keys()), " and td[", i,
               "] has keys ", detail::keys_str(other.keys()),
               missing.empty() ? "" : " (first differing key " + NestedKey(missing).repr() + ").");
    }
    TD_THROW(KeyError, "got keys ", detail::keys_str(first.keys()), " and ",
             detail::keys_str(other.keys()), " which are incompatible", where, ".");
  }
}

// at::stack / at::cat of the tensor leaves in `column` (one key's, td[0]'s first), borrowed into
// `leaves`, a buffer reused from key to key. Out of line: join's walk stays small enough for GCC
// to inline its per-member key compare.
C10_NOINLINE at::Tensor join_leaves(const std::vector<const Entry*>& column, detail::BorrowedTensors& leaves,
                                    int64_t dim, Join mode, const detail::KeyChain& prefix, const std::string& key) {
  leaves.clear();
  const int64_t leaf_dims = column[0]->tensor_unchecked().dim();
  bool same_dims = true;
  for (const Entry* e : column) {
    const at::Tensor& t = e->tensor_unchecked();
    same_dims = same_dims && t.dim() == leaf_dims;
    leaves.push_back(t);
  }
  // The sizes are compared by at::stack / at::cat themselves; only when they refuse (or when
  // dims differ, which cat would let a legacy empty leaf through) are they compared here, for an
  // error that names the key.
  auto check_sizes = [&] {
    c10::IntArrayRef a = leaves[0].sizes();
    for (size_t i = 1; i < leaves.size(); ++i) {
      c10::IntArrayRef b = leaves[i].sizes();
      bool ok = a.size() == b.size();
      for (size_t d = 0; ok && d < a.size(); ++d) {
        ok = a[d] == b[d] || (mode == Join::Cat && static_cast<int64_t>(d) == dim);
      }
      TD_CHECK(ok, ShapeError, "The shapes of the tensors to ", mode == Join::Stack ? "stack" : "cat",
               " is incompatible: ", size_str(b), " vs ", size_str(a), " for key ", prefix.child_path(key).repr(), ".");
    }
  };
  if (!same_dims) check_sizes();
  // Plain CPU leaves: copied into the result with no dispatch (Note [Plain copies]).
  if (at::Tensor joined = detail::join_by_copy(leaves.list(), dim, mode == Join::Stack); joined.defined()) return joined;
  try {
    return mode == Join::Stack ? at::stack(leaves.list(), dim) : at::cat(leaves.list(), dim);
  } catch (const c10::Error&) {
    check_sizes();
    throw;  // the sizes fit: LibTorch's own reason (devices, dtypes) stands
  }
}

TensorDict join(const std::vector<TensorDict>& tds, int64_t dim, Join mode, const detail::KeyChain& prefix) {
  const TensorDict& first = tds.front();
  const int64_t n = first.batch_dims();
  BatchSize out_batch(first.batch_size().begin(), first.batch_size().end());
  std::optional<at::Device> device = first.device();
  for (size_t i = 1; i < tds.size(); ++i) {
    if (tds[i].device() != device) device.reset();
  }
  if (mode == Join::Stack) {
    for (size_t i = 1; i < tds.size(); ++i) {
      TD_CHECK(tds[i].batch_size() == first.batch_size(), ShapeError,
               "stacking tensordicts requires them to have congruent batch sizes, got td[", i,
               "].batch_size=", size_str(tds[i].batch_size()), " and td[0].batch_size=",
               size_str(first.batch_size()),
               prefix.empty() ? std::string() : " in nested TensorDict " + prefix.repr());
    }
    out_batch.insert(out_batch.begin() + dim, static_cast<int64_t>(tds.size()));
  } else {
    int64_t total = 0;
    for (size_t i = 0; i < tds.size(); ++i) {
      c10::IntArrayRef b = tds[i].batch_size();
      bool ok = static_cast<int64_t>(b.size()) == n;
      for (int64_t d = 0; ok && d < n; ++d) ok = d == dim || b[d] == first.batch_size()[d];
      TD_CHECK(ok, ShapeError, "cat: td[", i, "].batch_size=", size_str(b),
               " does not match td[0].batch_size=", size_str(first.batch_size()),
               " outside dim ", dim);
      total += b[dim];
    }
    out_batch[dim] = total;
  }
  // Equal counts here and every key of td[0] found below make equal key sets; a difference is
  // reported by check_same_keys, which walks the keys a second time only then.
  for (size_t i = 1; i < tds.size(); ++i) {
    if (tds[i].impl()->num_entries() != first.impl()->num_entries()) check_same_keys(tds, prefix, mode);
  }

  LevelBuilder out(out_batch, device, first.impl()->num_entries());
  // Each member's entry at the key: its address where entries live in memory (no reference
  // count touched, the common case), else a copy held in `held`.
  std::vector<const Entry*> column(tds.size());
  std::vector<Entry> held(tds.size());
  std::vector<detail::AlignedLevel> members;
  members.reserve(tds.size());
  for (const TensorDict& td : tds) members.emplace_back(*td.impl());
  detail::BorrowedTensors leaves;  // one key's leaves (the members hold them), reused from key to key
  leaves.reserve(tds.size());
  size_t position = 0;  // the key's place in td[0]: where members built alike hold it too
  first.impl()->for_each([&](const std::string& key, const Entry& head) {
    const size_t at = position++;
    for (size_t i = 0; i < tds.size(); ++i) {
      column[i] = i == 0 ? &head : members[i].at(key, at, held[i]);
      if (column[i] == nullptr) {
        check_same_keys(tds, prefix, mode);  // throws: td[i] lacks the key
        TD_THROW(KeyError, "key ", prefix.child_path(key).repr(), " is missing from td[", i, "]");
      }
      TD_CHECK(column[i]->kind() == head.kind(), TypeError, "cannot ", mode == Join::Stack ? "stack" : "cat", " key ",
               prefix.child_path(key).repr(), ": td[0] holds ", kind_name(head.kind()), " but td[", i, "] holds ",
               kind_name(column[i]->kind()));
    }
    switch (head.kind()) {
      case Entry::Kind::Tensor:
        out.append(key, join_leaves(column, leaves, dim, mode, prefix, key));
        break;
      case Entry::Kind::TensorDict: {
        std::vector<TensorDict> children;
        children.reserve(tds.size());
        for (const Entry* e : column) children.push_back(e->tensordict_unchecked());
        out.append(key, join(children, dim, mode, prefix.child(key)));
        break;
      }
      case Entry::Kind::NonTensor: {
        std::vector<NonTensorData> items;
        for (const Entry* e : column) items.push_back(e->non_tensor());
        if (mode == Join::Stack) {
          out.append(key, NonTensorData::stack(items, dim, first.batch_size()));
        } else {
          bool same = true;
          for (const auto& it : items) same = same && !it.is_stack() && it.value() == items[0].value();
          if (same) {
            out.append(key, items[0]);
          } else {
            std::vector<json::Value> pool;
            std::vector<at::Tensor> ids;
            for (size_t i = 0; i < items.size(); ++i) {
              NonTensorData s = items[i].as_stack(tds[i].batch_size());
              ids.push_back(s.ids() + static_cast<int64_t>(pool.size()));
              pool.insert(pool.end(), s.pool().begin(), s.pool().end());
            }
            out.append(key, NonTensorData::from_ids(std::move(pool), at::cat(ids, dim)));
          }
        }
        break;
      }
      case Entry::Kind::Undefined:
        break;
    }
  });
  return out.finish();
}

std::vector<TensorDict> readable_all(const std::vector<TensorDict>& tds) {
  std::vector<TensorDict> out;
  out.reserve(tds.size());
  for (const auto& td : tds) out.push_back(ops::readable(td));
  return out;
}

// v0.14's _stack of lazy stacks: stacks with as many members along the same dim stay lazy over
// the dense stacks of their members; others become a lazy stack of lazy stacks.
TensorDict stack_lazy(const std::vector<TensorDict>& tds, int64_t dim) {
  const LazyStackedTensorDict first = LazyStackedTensorDict::from(tds.front());
  const bool congruent = std::all_of(tds.begin(), tds.end(), [&](const TensorDict& td) {
    const LazyStackedTensorDict ls = LazyStackedTensorDict::from(td);
    return ls.num_members() == first.num_members() && ls.stack_dim() == first.stack_dim();
  });
  if (!congruent || first.num_members() == 0) return lazy_stack(tds, dim);
  int64_t stack_dim = first.stack_dim();
  int64_t member_dim = dim;
  if (dim <= stack_dim) ++stack_dim;
  else --member_dim;
  std::vector<TensorDict> stacked;
  for (int64_t i = 0; i < first.num_members(); ++i) {
    std::vector<TensorDict> column;
    column.reserve(tds.size());
    for (const TensorDict& td : tds) column.push_back(LazyStackedTensorDict::from(td).member(i));
    stacked.push_back(stack(column, member_dim));
  }
  return lazy_stack(stacked, stack_dim);
}

}  // namespace

TensorDict stack(const std::vector<TensorDict>& tds, int64_t dim) {
  TD_CHECK(!tds.empty(), RuntimeError, "list_of_tensordicts cannot be empty");
  const int64_t n = tds.front().batch_dims();
  TD_CHECK(dim >= -n - 1 && dim <= n, IndexError, "stack: dim ", dim,
           " is out of range for tensordicts with batch size ", size_str(tds.front().batch_size()),
           " (allowed: ", -n - 1, " to ", n, ")");
  if (dim < 0) dim += n + 1;
  // Lazy stacks of one batch size and one key set stay lazy (v0.14's _stack); anything else
  // takes the dense path, whose errors name the differing key or batch size.
  const bool all_lazy = std::all_of(tds.begin(), tds.end(), [&](const TensorDict& td) {
    return LazyStackedTensorDict::is_lazy_stack(td) && td.batch_size() == tds.front().batch_size() &&
           td.keys(/*include_nested=*/true) == tds.front().keys(/*include_nested=*/true);
  });
  TensorDict out = all_lazy ? stack_lazy(tds, dim) : join(readable_all(tds), dim, Join::Stack, detail::KeyChain());
  // Python: the inputs' names, with an unnamed stack dim, when every input has the same names.
  const DimNames& first = tds.front().impl()->dim_names();
  if (C10_UNLIKELY(!first.empty()) &&
      std::all_of(tds.begin(), tds.end(), [&](const TensorDict& td) { return td.impl()->dim_names() == first; })) {
    DimNames names = detail::names_of(*tds.front().impl());
    names.insert(names.begin() + dim, std::nullopt);
    detail::assign_names(*out.impl(), names);
  }
  return out;
}

TensorDict cat(const std::vector<TensorDict>& tds, int64_t dim) {
  TD_CHECK(!tds.empty(), RuntimeError, "list_of_tensordicts cannot be empty");
  const int64_t n = tds.front().batch_dims();
  TD_CHECK(dim >= -n && dim < n, RuntimeError, "dim must be in the range 0 <= dim < len(batch_size), got dim=",
           dim, " and batch_size=", size_str(tds.front().batch_size()));
  if (dim < 0) dim += n;
  TensorDict out = join(readable_all(tds), dim, Join::Cat, detail::KeyChain());
  // Python: the first input's names.
  if (C10_UNLIKELY(!tds.front().impl()->dim_names().empty()))
    detail::assign_names(*out.impl(), detail::names_of(*tds.front().impl()));
  return out;
}

}  // namespace tensordict
