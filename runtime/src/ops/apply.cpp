// apply / apply_ / named_apply (semantics 1.11) and the masking family: where, masked_fill,
// masked_select, gather (semantics 1.10).

#include <ATen/ATen.h>

#include <tensordict/ops.h>
#include <tensordict/tensor_dict_impl.h>

#include "detail/format.h"
#include "detail/validate.h"
#include "ops/leafwise.h"

namespace tensordict {

using namespace ops;
using detail::size_str;

namespace {

// The callable every apply form reduces to: the leaf's key (only when `wants_key`), the leaf,
// and the matching leaves of the other tensordicts.
using ApplyFn = FunctionRef<at::Tensor(const NestedKey* key, const at::Tensor& leaf, c10::ArrayRef<at::Tensor> others)>;

struct Applier {
  ApplyFn fn;
  const ApplyOptions& options;
  bool wants_key;
  std::optional<c10::IntArrayRef> new_root;
  size_t old_root_dims;

  at::Tensor other_leaf(const TensorDictBase* other, size_t which, const std::string& key, const NestedKey* full,
                        const NestedKey& prefix) const {
    Entry e = other ? other->get(key) : Entry();
    if (e.is_tensor()) return e.tensor_unchecked();
    if (!e.defined() && options.default_value) return *options.default_value;
    NestedKey name = full ? *full : (prefix.empty() ? NestedKey(key) : prefix.child(key));
    if (!e.defined()) {
      TD_THROW(KeyError, "key ", name.repr(), " not found in the tensordict #", which + 1,
               " passed to apply, and no default value was provided.");
    }
    TD_THROW(TypeError, "apply: the entry ", name.repr(), " of tensordict #", which + 1, " holds ",
             kind_name(e.kind()), ", not a tensor");
  }

  // Builds the result level, or returns nullopt when it must be filtered out.
  std::optional<TensorDict> level(const TensorDictBase& td, c10::ArrayRef<const TensorDictBase*> others,
                                  const NestedKey& prefix) const {
    BatchSize batch;
    if (new_root) {
      batch.assign(new_root->begin(), new_root->end());
    } else {
      batch.assign(td.batch_size().begin(), td.batch_size().end());
    }
    auto out = TensorDictImpl::make(batch, td.device(), td.num_entries());
    c10::SmallVector<at::Tensor, 4> args(others.size());
    c10::SmallVector<const TensorDictBase*, 4> child_others(others.size());
    td.for_each([&](const std::string& key, const Entry& e) {
      switch (e.kind()) {
        case Entry::Kind::Tensor: {
          std::optional<NestedKey> full;
          if (wants_key) full = prefix.empty() ? NestedKey(key) : prefix.child(key);
          for (size_t j = 0; j < others.size(); ++j) {
            args[j] = other_leaf(others[j], j, key, full ? &*full : nullptr, prefix);
          }
          at::Tensor r;
          try {
            r = fn(full ? &*full : nullptr, e.tensor_unchecked(), args);
          } catch (const c10::Error& err) {
            rethrow_leaf_error("apply", full ? *full : (prefix.empty() ? NestedKey(key) : prefix.child(key)), err);
          }
          if (!r.defined()) break;
          c10::IntArrayRef shape = r.sizes();
          if (shape.size() < batch.size() || shape.slice(0, batch.size()) != c10::IntArrayRef(batch)) {
            NestedKey name = prefix.empty() ? NestedKey(key) : prefix.child(key);
            TD_THROW(ShapeError, "apply: the result for key ", name.repr(), " has shape ", size_str(shape),
                     " whose leading dims do not match the batch size ", size_str(batch),
                     "; pass ApplyOptions::batch_size for a new batch size.");
          }
          out->append_unchecked(key, std::move(r));
          break;
        }
        case Entry::Kind::TensorDict: {
          const TensorDictBase& child = *e.tensordict_unchecked().impl();
          for (size_t j = 0; j < others.size(); ++j) {
            Entry oe = others[j] ? others[j]->get(key) : Entry();
            if (oe.is_tensordict()) {
              child_others[j] = oe.tensordict_unchecked().impl();
            } else if (!oe.defined() && options.default_value) {
              child_others[j] = nullptr;  // every leaf below gets the default
            } else {
              NestedKey name = prefix.empty() ? NestedKey(key) : prefix.child(key);
              TD_THROW(KeyError, "key ", name.repr(), " not found as a TensorDict in the tensordict #", j + 1,
                       " passed to apply, and no default value was provided.");
            }
          }
          NestedKey child_prefix = prefix.empty() ? NestedKey(key) : prefix.child(key);
          std::optional<TensorDict> r = level(child, child_others, child_prefix);
          if (r) out->append_unchecked(key, std::move(*r));
          break;
        }
        case Entry::Kind::NonTensor:
          out->append_unchecked(key, e);  // non-tensor data passes through
          break;
        case Entry::Kind::Undefined:
          break;
      }
    });
    if (out->num_entries() == 0 && !prefix.empty()) {
      const bool drop = options.filter_empty.has_value() ? *options.filter_empty : td.num_entries() > 0;
      if (drop) return std::nullopt;
    }
    return TensorDict(std::move(out));
  }
};

// Python's out=: checks `out`, then runs `compute` with the batch size of `out` (the results
// are validated against it) and sets the results into `out` level by level.
TensorDict apply_into(const ApplyOptions& options, FunctionRef<TensorDict(const ApplyOptions&)> compute) {
  TensorDict& out = *options.out;
  detail::check_unlocked(*out.impl());
  TD_CHECK(!options.batch_size || c10::IntArrayRef(*options.batch_size) == out.batch_size(), RuntimeError,
           "batch_size and out.batch_size must be equal when both are provided (got ",
           size_str(*options.batch_size), " and ", size_str(out.batch_size()), ").");
  ApplyOptions inner = options;
  inner.out = nullptr;
  inner.batch_size = out.batch_size().vec();
  inner.propagate_lock = false;
  out.update(compute(inner));
  return out;
}

TensorDict run_apply(const TensorDict& td, c10::ArrayRef<TensorDict> others, ApplyFn fn,
                     const ApplyOptions& options, bool wants_key) {
  if (options.out) {
    return apply_into(options, [&](const ApplyOptions& inner) { return run_apply(td, others, fn, inner, wants_key); });
  }
  std::optional<c10::IntArrayRef> new_root;
  if (options.batch_size) new_root = c10::IntArrayRef(*options.batch_size);
  Applier applier{fn, options, wants_key, new_root, td.batch_size().size()};
  c10::SmallVector<const TensorDictBase*, 4> other_impls;
  for (const auto& o : others) other_impls.push_back(o.impl());
  std::optional<TensorDict> out = applier.level(*td.impl(), other_impls, NestedKey());
  TensorDict result = out ? *out : TensorDict::empty_with(new_root ? *new_root : td.batch_size(), td.device());
  if (options.propagate_lock && td.is_locked()) result.lock_();
  return result;
}

// call_on_nested: `fn` maps every first-level entry (with the others' entries at its key) to
// the new entry, which is checked against the result's batch size like a `set`.
TensorDict run_apply_on_entries(const TensorDict& td, c10::ArrayRef<TensorDict> others,
                                FunctionRef<Entry(c10::ArrayRef<Entry>)> fn, const ApplyOptions& options) {
  if (options.out) {
    return apply_into(options,
                      [&](const ApplyOptions& inner) { return run_apply_on_entries(td, others, fn, inner); });
  }
  c10::IntArrayRef batch = options.batch_size ? c10::IntArrayRef(*options.batch_size) : td.batch_size();
  auto out = TensorDictImpl::make(batch, td.device(), td.impl()->num_entries());
  std::vector<Entry> args(others.size() + 1);
  td.impl()->for_each([&](const std::string& key, const Entry& e) {
    args[0] = e;
    for (size_t j = 0; j < others.size(); ++j) {
      args[j + 1] = others[j].impl()->get(key);
      if (args[j + 1].defined()) continue;
      TD_CHECK(options.default_value.has_value(), KeyError, "key ", NestedKey(key).repr(),
               " not found in the tensordict #", j + 1, " passed to apply, and no default value was provided.");
      // An undefined default tensor stands for Python's None: the callable gets an empty Entry.
      args[j + 1] = options.default_value->defined() ? Entry(*options.default_value) : Entry();
    }
    Entry r;
    try {
      r = fn(args);
    } catch (const c10::Error& err) {
      rethrow_leaf_error("apply", NestedKey(key), err);
    }
    if (r.defined()) out->append_unchecked(key, detail::prepare_entry(*out, key, std::move(r)));
  });
  TensorDict result(std::move(out));
  if (options.propagate_lock && td.is_locked()) result.lock_();
  return result;
}

// In place: every result is copied into the leaf's storage through the backend's write_.
void run_apply_(TensorDict& td, c10::ArrayRef<TensorDict> others, ApplyFn fn) {
  struct Writer {
    ApplyFn fn;
    void level(TensorDictBase& td, c10::ArrayRef<const TensorDictBase*> others, const NestedKey& prefix) {
      std::vector<std::pair<std::string, at::Tensor>> writes;
      std::vector<std::pair<TensorDictBase*, NestedKey>> children;
      std::vector<std::vector<const TensorDictBase*>> child_others;
      c10::SmallVector<at::Tensor, 4> args(others.size());
      td.for_each([&](const std::string& key, const Entry& e) {
        NestedKey full = prefix.empty() ? NestedKey(key) : prefix.child(key);
        if (e.is_tensor()) {
          for (size_t j = 0; j < others.size(); ++j) {
            Entry oe = others[j]->get(key);
            TD_CHECK(oe.is_tensor(), KeyError, "key ", full.repr(), " not found as a tensor in the tensordict #", j + 1,
                     " passed to apply_.");
            args[j] = oe.tensor_unchecked();
          }
          at::Tensor r;
          try {
            r = fn(&full, e.tensor_unchecked(), args);
          } catch (const c10::Error& err) {
            rethrow_leaf_error("apply_", full, err);
          }
          if (r.defined()) writes.emplace_back(key, std::move(r));
        } else if (e.is_tensordict()) {
          std::vector<const TensorDictBase*> sub;
          for (size_t j = 0; j < others.size(); ++j) {
            Entry oe = others[j]->get(key);
            TD_CHECK(oe.is_tensordict(), KeyError, "key ", full.repr(), " not found as a TensorDict in the tensordict #",
                     j + 1, " passed to apply_.");
            sub.push_back(oe.tensordict_unchecked().impl());
          }
          children.emplace_back(e.tensordict_unchecked().impl(), std::move(full));
          child_others.push_back(std::move(sub));
        }
      });
      for (auto& [key, value] : writes) {
        try {
          td.write_(key, value);
        } catch (const c10::Error& err) {
          rethrow_leaf_error("apply_", prefix.empty() ? NestedKey(key) : prefix.child(key), err);
        }
      }
      for (size_t i = 0; i < children.size(); ++i) level(*children[i].first, child_others[i], children[i].second);
    }
  };
  std::vector<const TensorDictBase*> other_impls;
  for (const auto& o : others) other_impls.push_back(o.impl());
  Writer{fn}.level(*td.impl(), other_impls, NestedKey());
}

}  // namespace

TensorDict TensorDict::apply(FunctionRef<at::Tensor(const at::Tensor&)> fn, const ApplyOptions& options) const {
  return run_apply(*this, {}, [&](const NestedKey*, const at::Tensor& x, c10::ArrayRef<at::Tensor>) { return fn(x); },
                   options, false);
}

TensorDict TensorDict::apply(FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn, const TensorDict& other,
                             const ApplyOptions& options) const {
  return run_apply(
      *this, c10::ArrayRef<TensorDict>(other),
      [&](const NestedKey*, const at::Tensor& x, c10::ArrayRef<at::Tensor> o) { return fn(x, o[0]); }, options, false);
}

TensorDict TensorDict::apply(FunctionRef<at::Tensor(c10::ArrayRef<at::Tensor>)> fn, const std::vector<TensorDict>& others,
                             const ApplyOptions& options) const {
  std::vector<at::Tensor> all(others.size() + 1);
  return run_apply(
      *this, others,
      [&](const NestedKey*, const at::Tensor& x, c10::ArrayRef<at::Tensor> o) {
        all[0] = x;
        for (size_t j = 0; j < o.size(); ++j) all[j + 1] = o[j];
        return fn(all);
      },
      options, false);
}

TensorDict TensorDict::apply(CallOnNested, FunctionRef<Entry(const Entry&)> fn, const ApplyOptions& options) const {
  return run_apply_on_entries(*this, {}, [&](c10::ArrayRef<Entry> e) { return fn(e[0]); }, options);
}

TensorDict TensorDict::apply(CallOnNested, FunctionRef<Entry(c10::ArrayRef<Entry>)> fn,
                             const std::vector<TensorDict>& others, const ApplyOptions& options) const {
  return run_apply_on_entries(*this, others, fn, options);
}

TensorDict& TensorDict::apply_(FunctionRef<at::Tensor(const at::Tensor&)> fn) {
  run_apply_(*this, {}, [&](const NestedKey*, const at::Tensor& x, c10::ArrayRef<at::Tensor>) { return fn(x); });
  return *this;
}

TensorDict& TensorDict::apply_(FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn, const TensorDict& other) {
  run_apply_(*this, c10::ArrayRef<TensorDict>(other),
             [&](const NestedKey*, const at::Tensor& x, c10::ArrayRef<at::Tensor> o) { return fn(x, o[0]); });
  return *this;
}

TensorDict TensorDict::named_apply(FunctionRef<at::Tensor(const NestedKey&, const at::Tensor&)> fn, bool nested_keys,
                                   const ApplyOptions& options) const {
  return run_apply(
      *this, {},
      [&](const NestedKey* key, const at::Tensor& x, c10::ArrayRef<at::Tensor>) {
        if (nested_keys) return fn(*key, x);
        return fn(NestedKey(key->back()), x);
      },
      options, true);
}

// ---- where / masked_fill / masked_select / gather ------------------------------------------------

namespace {

// `mask` viewed with trailing singleton dims so it covers the leading dims of `leaf`.
at::Tensor right_expand(const at::Tensor& mask, const at::Tensor& leaf) {
  const int64_t extra = leaf.dim() - mask.dim();
  if (extra <= 0) return mask;
  c10::SmallVector<int64_t, 8> shape(mask.sizes().begin(), mask.sizes().end());
  shape.append(static_cast<size_t>(extra), 1);
  return mask.view(shape);
}

void check_batch_prefix(const TensorDict& td, const at::Tensor& mask, const char* op) {
  TD_CHECK(mask.defined(), ValueError, op, ": the mask is undefined");
  TD_CHECK(mask.dim() <= td.batch_dims() && mask.sizes() == td.batch_size().slice(0, mask.dim()), ShapeError, op,
           ": the mask of shape ", size_str(mask.sizes()), " must match the leading batch dims of batch size ",
           size_str(td.batch_size()), ".");
}

void check_bool(const at::Tensor& mask, const char* op) {
  TD_CHECK(mask.scalar_type() == at::kBool, TypeError, op, ": expected a bool mask, got ", mask.scalar_type());
}

}  // namespace

TensorDict TensorDict::where(const at::Tensor& condition, const TensorDict& other,
                             const std::optional<c10::Scalar>& pad) const {
  check_batch_prefix(*this, condition, "where");
  BinaryDefault def = pad ? BinaryDefault(*pad) : BinaryDefault();
  MatchedLeaves m;
  try {
    match_leaves(*this, other, def, m);
  } catch (const KeyError& e) {
    TD_THROW(KeyError, e.message(), " where() needs the same keys on both sides unless a pad value is given.");
  }
  std::vector<int64_t> batch = broadcast_batch(batch_size(), other.batch_size(), "where");
  LeafList results(m.lhs.size());
  size_t i = 0;
  try {
    for (; i < results.size(); ++i) results[i] = at::where(right_expand(condition, m.lhs[i]), m.lhs[i], m.rhs[i]);
  } catch (const c10::Error& e) {
    std::vector<NestedKey> keys;
    MatchedLeaves again;
    again.keys = &keys;
    match_leaves(*this, other, def, again);
    rethrow_leaf_error("where", keys[i], e);
  }
  return rebuild_pair(*this, other, def, results, batch);
}

TensorDict TensorDict::where(const at::Tensor& condition, const at::Tensor& other) const {
  check_batch_prefix(*this, condition, "where");
  AlignedTensor aligned(*this, other, "where");
  LeafList leaves;
  collect_leaves(*impl(), leaves);
  LeafList results(leaves.size());
  for_each_index(*impl(), leaves.size(), "where", [&](size_t i) {
    results[i] = at::where(right_expand(condition, leaves[i]), leaves[i], aligned.operand(leaves[i]));
  });
  return ops::rebuild(*impl(), results, c10::IntArrayRef(aligned.batch_size()));
}

TensorDict TensorDict::where(const at::Tensor& condition, const c10::Scalar& other) const {
  check_batch_prefix(*this, condition, "where");
  LeafList leaves;
  collect_leaves(*impl(), leaves);
  LeafList results(leaves.size());
  for_each_index(*impl(), leaves.size(), "where", [&](size_t i) {
    results[i] = at::where(right_expand(condition, leaves[i]), leaves[i], other);
  });
  return ops::rebuild(*impl(), results);
}

TensorDict where(const at::Tensor& condition, const TensorDict& input, const TensorDict& other,
                 const std::optional<c10::Scalar>& pad) {
  return input.where(condition, other, pad);
}

TensorDict where(const at::Tensor& condition, const TensorDict& input, const c10::Scalar& other) {
  return input.where(condition, other);
}

TensorDict TensorDict::masked_fill(const at::Tensor& mask, const c10::Scalar& value) const {
  check_batch_prefix(*this, mask, "masked_fill");
  check_bool(mask, "masked_fill");
  LeafList leaves;
  collect_leaves(*impl(), leaves);
  LeafList results(leaves.size());
  for_each_index(*impl(), leaves.size(), "masked_fill",
                 [&](size_t i) { results[i] = leaves[i].masked_fill(right_expand(mask, leaves[i]), value); });
  return ops::rebuild(*impl(), results);
}

TensorDict& TensorDict::masked_fill_(const at::Tensor& mask, const c10::Scalar& value) {
  check_batch_prefix(*this, mask, "masked_fill_");
  check_bool(mask, "masked_fill_");
  LeafList leaves;
  collect_leaves(*impl(), leaves);
  for_each_index(*impl(), leaves.size(), "masked_fill_",
                 [&](size_t i) { leaves[i].masked_fill_(right_expand(mask, leaves[i]), value); });
  return *this;
}

TensorDict TensorDict::masked_select(const at::Tensor& mask) const {
  check_batch_prefix(*this, mask, "masked_select");
  check_bool(mask, "masked_select");
  return index({mask});
}

TensorDict TensorDict::gather(int64_t dim, const at::Tensor& index) const {
  const int64_t n = batch_dims();
  TD_CHECK(n > 0, RuntimeError, "gather: the tensordict has no batch dims");
  TD_CHECK(dim >= -n && dim < n, IndexError, "gather: dim ", dim, " is not a batch dim of batch size ",
           size_str(batch_size()));
  if (dim < 0) dim += n;
  TD_CHECK(index.dim() == n, ShapeError, "gather: the index must have as many dims as the batch (", n,
           "), got shape ", size_str(index.sizes()));
  TD_CHECK(index.scalar_type() == at::kLong, TypeError, "gather: expected an int64 index, got ", index.scalar_type());
  LeafList leaves;
  collect_leaves(*impl(), leaves);
  LeafList results(leaves.size());
  for_each_index(*impl(), leaves.size(), "gather", [&](size_t i) {
    const at::Tensor& x = leaves[i];
    std::vector<int64_t> shape(index.sizes().begin(), index.sizes().end());
    shape.insert(shape.end(), x.sizes().begin() + n, x.sizes().end());
    results[i] = at::gather(x, dim, right_expand(index, x).expand(shape));
  });
  return ops::rebuild(*impl(), results, index.sizes());
}

}  // namespace tensordict
