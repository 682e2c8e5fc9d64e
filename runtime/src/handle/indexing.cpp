// Indexing of the TensorDict handle (semantics 1.8): td[index] through the backend's index hook,
// and index_put_, whose every write goes through the backend's write_at_.

#include <algorithm>
#include <optional>
#include <typeinfo>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/batch_index.h>
#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/grouped_result.h"
#include "backends/in_memory/in_memory.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "backends/lazy_stack/lazy_stack_impl.h"
#include "core/dim_names.h"
#include "core/format.h"
#include "core/key_chain.h"
#include "core/non_tensor_write.h"
#include "core/sym_int.h"
#include "core/validate.h"
#include "ops/leafwise.h"
#include "ops/shape_groups.h"

namespace tensordict {

using detail::size_str;

// ---- Indexing ------------------------------------------------------------------------------

namespace {
// A dim of -1: a lazy stack whose members differ in size there.
bool has_ragged_dim(c10::IntArrayRef batch) {
  return std::any_of(batch.begin(), batch.end(), [](int64_t s) { return s < 0; });
}

// `ls[i]` of a lazy stack along dim 0 (an RL loop's per-env access): the member itself, as
// LazyStackImpl::index gives it, without building a BatchIndex. Null for any other case.
const TensorDict* lazy_member(const TensorDictBase& impl, c10::ArrayRef<at::indexing::TensorIndex> indices) {
  if (indices.size() != 1 || !indices[0].is_integer() || typeid(impl) != typeid(lazy::LazyStackImpl)) return nullptr;
  const auto& stack = static_cast<const lazy::LazyStackImpl&>(impl);
  const int64_t size = static_cast<int64_t>(stack.members().size());
  const int64_t i = detail::plain_int(indices[0].integer());
  if (stack.stack_dim() != 0 || i < -size || i >= size || !stack.dim_names().empty()) return nullptr;
  return &stack.members()[static_cast<size_t>(i < 0 ? i + size : i)];
}
}  // namespace

namespace {
// Whether the first two tensor leaves of `level` (in walk order) share a storage: what a tree
// whose leaves may group has (a consolidated tensordict written since), and a tree of leaves
// each in its own storage does not, found at its second leaf.
bool first_leaves_share_storage(const TensorDictBase& level, const c10::StorageImpl*& first, int& seen) {
  bool share = false;
  level.for_each([&](const std::string&, const Entry& e) {
    if (seen >= 2) return;
    if (e.is_tensor()) {
      const at::Tensor& t = e.tensor_unchecked();
      const c10::StorageImpl* s = t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
      if (++seen == 1) first = s;
      else share = s != nullptr && s == first;
    } else if (e.is_tensordict()) {
      share = first_leaves_share_storage(*e.tensordict_unchecked().impl(), first, seen) || share;
    }
  });
  return share;
}

// Whether every level of the tree is an in-memory one (another backend indexes its own rows, a
// file reading only those) and none holds a NonTensorStack (per-row values the rows must take
// along).
bool plain_levels_without_stacks(const TensorDictBase& level) {
  if (typeid(level) != typeid(TensorDictImpl)) return false;
  bool plain = true;
  // The slots read in place: no lookup by key, no leaf made.
  in_memory::for_each_structure_entry(level, [&](const std::string&, const Entry& e) {
    if (!plain || e.is_tensor()) return;
    plain = e.is_tensordict() ? plain_levels_without_stacks(*e.tensordict_unchecked().impl()) : !e.non_tensor().is_stack();
  });
  return plain;
}

// td[tensor] (a replay buffer's sample, a mask's rows): one gather a group of leaves of one shape
// instead of one a leaf. Over an intact packed tree (a consolidated tensordict) the groups come
// from its shape and the result is one deferred level (Note [Grouped results]); over another
// tree whose leaves may group (one written since it was consolidated) they are found from its
// leaves (Note [Shape groups]). Nullopt for any other index or tree, and where a gather raises:
// the per-leaf path then runs, and names the error.
std::optional<TensorDict> gather_groups(const TensorDict& td, const BatchIndex& index) {
  const std::vector<BatchIndex::Item>& items = index.items();
  if (items.size() != 1 || items[0].kind != BatchIndex::Item::Kind::Tensor) return std::nullopt;
  const at::Tensor& rows = items[0].tensor;
  // As BatchIndex::apply: index_select for a 1-D long index, a leading index otherwise (one
  // advanced index after a full slice: its dims take the index's place, as on each leaf).
  const bool select = rows.dim() == 1 && rows.scalar_type() == at::kLong;
  const auto gather = [&](const at::Tensor& group) {
    return select ? at::index_select(group, 1, rows) : group.index({at::indexing::Slice(), rows});
  };
  const TensorDictBase& impl = *td.impl();
  in_memory::GroupedResult how{index.result_batch_size()};
  how.indexes_rows = true;
  if (auto gathered = in_memory::map_intact_groups(impl, [&](const at::Tensor& g, int64_t) { return gather(g); }, how))
    return gathered;
  const c10::StorageImpl* first = nullptr;
  int seen = 0;
  if (typeid(impl) != typeid(TensorDictImpl) || !first_leaves_share_storage(impl, first, seen) ||
      !plain_levels_without_stacks(impl))
    return std::nullopt;
  const ops::LeafList leaves = ops::leaves_of(td);
  ops::RebuildOptions options;
  options.batch_size = index.result_batch_size();
  return ops::map_shape_groups(
      impl, leaves, [&](const at::Tensor& g, size_t) { return gather(g); },
      [&](size_t i) { return index.apply(leaves[i]); }, options);
}
}  // namespace

TensorDict TensorDict::index(c10::ArrayRef<at::indexing::TensorIndex> indices) const {
  if (const TensorDict* member = lazy_member(*impl_, indices)) return *member;
  if (has_ragged_dim(batch_size())) return impl_->index_ragged(indices);
  BatchIndex index(indices, batch_size());
  if (index.is_identity()) return *this;
  std::optional<TensorDict> gathered = gather_groups(*this, index);
  TensorDict out = gathered ? std::move(*gathered) : impl_->index(index);
  if (C10_UNLIKELY(!impl_->dim_names().empty()))
    detail::assign_names(*out.impl(), detail::names_after_index(detail::names_of(*impl_), index));
  return out;
}

TensorDict TensorDict::index(std::initializer_list<at::indexing::TensorIndex> indices) const {
  return index(c10::ArrayRef<at::indexing::TensorIndex>(indices));
}

namespace {

// An index that selects no element leaves a backend nothing to write, and those that write
// through their own selection (a file, a store, a lazy stack's members) stop there, before
// LibTorch would have checked the value: its shape is checked here for every backend.
void check_write_of_nothing(const TensorDictBase& dest, std::string_view key, const BatchIndex& index,
                            c10::IntArrayRef value, const detail::KeyChain& prefix) {
  const c10::IntArrayRef rows = index.result_batch_size();
  if (std::find(rows.begin(), rows.end(), 0) == rows.end()) return;
  const BatchSize target = detail::indexed_shape(dest.leaf_meta(key).shape, dest.batch_size().size(), index);
  TD_CHECK(detail::broadcasts_to(value, target), ShapeError, "cannot write a value of shape ", size_str(value), " into ",
           prefix.child_path(key).repr(), "[", index.repr(), "]: it does not broadcast to the selected shape ",
           size_str(target));
}

// Writes `value` (already sized to the indexed batch) into `dest[index]`, key by key.
void put_tensordict(TensorDictBase& dest, const BatchIndex& index, const TensorDict& value,
                    const detail::KeyChain& prefix) {
  size_t position = 0;  // the key's place in `value`: where a level built alike holds it too
  value.impl()->for_each([&](const std::string& key, const Entry& entry) {
    const size_t at = position++;
    // A tensor is written through write_at_ and only its kind is needed: a backend whose reads
    // are copies (a file, a server) must not read the whole leaf to write a row of it.
    Entry existing = entry.is_tensor() ? Entry() : dest.get(key);
    if (entry.is_tensordict()) {
      if (!existing.defined()) {
        detail::check_unlocked(dest);
        BatchSize child_batch(dest.batch_size().begin(), dest.batch_size().end());
        c10::IntArrayRef vb = entry.tensordict_unchecked().batch_size();
        child_batch.append(vb.begin() + index.result_batch_size().size(), vb.end());
        dest.insert_or_assign(key, dest.make_child(key, child_batch));
        existing = dest.get(key);  // what the backend stored
      }
      TD_CHECK(existing.is_tensordict(), TypeError, "cannot write a TensorDict into ", prefix.child_path(key).repr(),
               " which holds ", kind_name(existing.kind()));
      put_tensordict(*existing.tensordict_unchecked().impl(), index, entry.tensordict_unchecked(),
                     prefix.child(key));
      return;
    }
    if (entry.is_non_tensor()) {
      // Non-tensor values: the same value everywhere stays uniform; otherwise write per element.
      const NonTensorData& src = entry.non_tensor();
      if (!existing.defined()) {
        // Python v0.14 pre-allocates a missing key over the full batch, as for tensors below:
        // the rows written get the value, the others None (null). One write of the result.
        detail::check_unlocked(dest);
        dest.insert_or_assign(key, detail::assign_non_tensor(NonTensorData(), dest.batch_size(), index, src));
        return;
      }
      TD_CHECK(existing.is_non_tensor(), TypeError, "cannot write non-tensor data into ",
               prefix.child_path(key).repr(), " which holds ", kind_name(existing.kind()));
      const NonTensorData& cur = existing.non_tensor();
      if (!cur.is_stack() && !src.is_stack() && cur.value() == src.value()) return;
      // Through the backend: a memmapped level rewrites its NonTensorStack directory.
      NonTensorData updated = detail::assign_non_tensor(cur, dest.batch_size(), index, src);
      dest.write_non_tensor_(key, updated);
      return;
    }
    const at::Tensor& src = entry.tensor_unchecked();
    const auto shape_error = [&](const c10::Error& e) {
      TD_THROW(ShapeError, "cannot write a value of shape ", size_str(src.sizes()), " into ",
               prefix.child_path(key).repr(), "[", index.repr(), "]: ", e.what_without_backtrace());
    };
    try {
      if (in_memory::write_leaf_at(dest, key, at, index, src)) return;
    } catch (const c10::Error& e) {
      shape_error(e);
    }
    const EntryKind existing_kind = dest.kind(key);
    if (existing_kind == EntryKind::Undefined) {
      // Python pre-allocates a missing key as zeros of the full batch size.
      detail::check_unlocked(dest);
      BatchSize shape(dest.batch_size().begin(), dest.batch_size().end());
      c10::IntArrayRef event = src.sizes().slice(index.result_batch_size().size());
      shape.append(event.begin(), event.end());
      at::Tensor zeros = at::zeros(shape, src.options().device(dest.device().value_or(src.device())));
      dest.insert_or_assign(key, zeros);
    } else {
      TD_CHECK(existing_kind == EntryKind::Tensor, TypeError, "cannot write a tensor into ",
               prefix.child_path(key).repr(), " which holds ", kind_name(existing_kind));
    }
    check_write_of_nothing(dest, key, index, src.sizes(), prefix);
    try {
      dest.write_at_(key, index, src);
    } catch (const c10::Error& e) {
      shape_error(e);
    }
  });
}

}  // namespace

// The hook's default lives here, next to index_put_, whose rules it implements.
void TensorDictBase::put_at_(const BatchIndex& index, const TensorDict& values) {
  put_tensordict(*this, index, values, detail::KeyChain());
}

TensorDict& TensorDict::index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices,
                                   const TensorDict& value) {
  if (has_ragged_dim(batch_size())) {
    impl_->put_ragged_(indices, value);
    return *this;
  }
  BatchIndex index(indices, batch_size());
  c10::IntArrayRef target = index.result_batch_size();
  TensorDict src = value;
  c10::IntArrayRef vb = value.batch_size();
  if (vb.size() < target.size() || vb.slice(0, target.size()) != target) {
    // A source whose batch is a suffix of the indexed batch broadcasts (td[:1] = td[0]).
    const bool is_suffix = vb.size() <= target.size() &&
                           target.slice(target.size() - vb.size()) == vb;
    TD_CHECK(is_suffix, ShapeError, "indexed destination TensorDict batch size is ",
             size_str(target), " (batch_size = ", size_str(batch_size()), ", index=",
             index.repr(), "), which differs from the source batch size ", size_str(vb));
    src = value.expand(target);
  }
  impl_->put_at_(index, src);
  return *this;
}

TensorDict row_of(const TensorDict& td, int64_t i) { return td.index({i}); }

void check_iterable(const TensorDict& td) {
  TD_CHECK(td.batch_dims() > 0, ValueError, "iteration over a tensordict with batch size [] (no dim to iterate)");
}

TensorDict& TensorDict::index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                                   const TensorDict& value) {
  return index_put_(c10::ArrayRef<at::indexing::TensorIndex>(indices), value);
}

namespace {

// `leaf[index] = value` for every tensor leaf, through each level's write_at_.
void put_every_leaf(TensorDictBase& td, const BatchIndex& index, const at::Tensor& value,
                    const detail::KeyChain& prefix) {
  td.for_each_key([&](const std::string& key, EntryKind kind) {
    if (kind == EntryKind::Tensor) {
      check_write_of_nothing(td, key, index, value.sizes(), prefix);
      try {
        td.write_at_(key, index, value);
      } catch (const c10::Error& e) {
        TD_THROW(ShapeError, "cannot write into ", prefix.child_path(key).repr(), "[", index.repr(), "]: ",
                 e.what_without_backtrace());
      }
    } else if (kind == EntryKind::TensorDict) {
      const Entry child = td.get(key);
      put_every_leaf(*child.tensordict_unchecked().impl(), index, value, prefix.child(key));
    }
  });
}

// A scalar as a 0-dim tensor that loses nothing (write_at_ casts it to each leaf's dtype).
at::Tensor scalar_operand(const c10::Scalar& value) {
  if (value.isBoolean()) return at::scalar_tensor(value, at::kBool);
  if (value.isIntegral(/*includeBool=*/false)) return at::scalar_tensor(value, at::kLong);
  if (value.isComplex()) return at::scalar_tensor(value, at::kComplexDouble);
  return at::scalar_tensor(value, at::kDouble);
}

}  // namespace

TensorDict& TensorDict::index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices,
                                   const at::Tensor& value) {
  BatchIndex index(indices, batch_size());
  put_every_leaf(*impl_, index, value, detail::KeyChain());
  return *this;
}

TensorDict& TensorDict::index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                                   const at::Tensor& value) {
  return index_put_(c10::ArrayRef<at::indexing::TensorIndex>(indices), value);
}

TensorDict& TensorDict::index_put_(c10::ArrayRef<at::indexing::TensorIndex> indices,
                                   const c10::Scalar& value) {
  BatchIndex index(indices, batch_size());
  put_every_leaf(*impl_, index, scalar_operand(value), detail::KeyChain());
  return *this;
}

TensorDict& TensorDict::index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                                   const c10::Scalar& value) {
  return index_put_(c10::ArrayRef<at::indexing::TensorIndex>(indices), value);
}

}  // namespace tensordict
