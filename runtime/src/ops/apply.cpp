// apply / apply_ / named_apply (semantics 1.11).

#include <ATen/ATen.h>

#include <tensordict/ops.h>

#include "backends/in_memory/level_builder.h"
#include "core/format.h"
#include "core/key_chain.h"
#include "core/plain_copy.h"
#include "core/validate.h"
#include "handle/key_path.h"
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

  at::Tensor other_leaf(const TensorDictBase* other, size_t which, const std::string& key, size_t position,
                        const detail::KeyChain& prefix) const {
    Entry holder;
    const Entry* e = other ? detail::entry_in(*other, key, holder, position) : nullptr;
    if (e != nullptr && e->is_tensor()) return e->tensor_unchecked();
    if (e == nullptr && options.default_value) return *options.default_value;
    const NestedKey name = prefix.child_path(key);
    if (e == nullptr) {
      TD_THROW(KeyError, "key ", name.repr(), " not found in the tensordict #", which + 1,
               " passed to apply, and no default value was provided.");
    }
    TD_THROW(TypeError, "apply: the entry ", name.repr(), " of tensordict #", which + 1, " holds ",
             kind_name(e->kind()), ", not a tensor");
  }

  // Builds the result level, or returns nullopt when it must be filtered out.
  std::optional<TensorDict> level(const TensorDictBase& td, c10::ArrayRef<const TensorDictBase*> others,
                                  const detail::KeyChain& prefix) const {
    BatchSize batch;
    if (new_root) {
      batch.assign(new_root->begin(), new_root->end());
    } else {
      batch.assign(td.batch_size().begin(), td.batch_size().end());
    }
    LevelBuilder out(batch, td.device(), td.num_entries());
    c10::SmallVector<at::Tensor, 4> args(others.size());
    c10::SmallVector<const TensorDictBase*, 4> child_others(others.size());
    size_t position = 0;
    td.for_each([&](const std::string& key, const Entry& e) {
      const size_t at = position++;
      switch (e.kind()) {
        case Entry::Kind::Tensor: {
          std::optional<NestedKey> full;  // only for a callable that takes the key
          if (wants_key) full = prefix.child_path(key);
          for (size_t j = 0; j < others.size(); ++j) args[j] = other_leaf(others[j], j, key, at, prefix);
          at::Tensor r;
          try {
            r = fn(full ? &*full : nullptr, e.tensor_unchecked(), args);
          } catch (...) {
            rethrow_leaf_error("apply", [&] { return prefix.child_path(key); });
          }
          if (!r.defined()) break;
          c10::IntArrayRef shape = r.sizes();
          if (shape.size() < batch.size() || shape.slice(0, batch.size()) != c10::IntArrayRef(batch)) {
            TD_THROW(ShapeError, "apply: the result for key ", prefix.child_path(key).repr(), " has shape ",
                     size_str(shape), " whose leading dims do not match the batch size ", size_str(batch),
                     "; pass ApplyOptions::batch_size for a new batch size.");
          }
          out.append(key, std::move(r));
          break;
        }
        case Entry::Kind::TensorDict: {
          const TensorDictBase& child = *e.tensordict_unchecked().impl();
          // A fetched level (entries not in memory) stays alive while its leaves are read.
          c10::SmallVector<Entry, 4> holders(others.size());
          for (size_t j = 0; j < others.size(); ++j) {
            const Entry* oe = others[j] ? detail::entry_in(*others[j], key, holders[j], at) : nullptr;
            if (oe != nullptr && oe->is_tensordict()) {
              child_others[j] = oe->tensordict_unchecked().impl();
            } else if (oe == nullptr && options.default_value) {
              child_others[j] = nullptr;  // every leaf below gets the default
            } else {
              TD_THROW(KeyError, "key ", prefix.child_path(key).repr(), " not found as a TensorDict in the tensordict #",
                       j + 1, " passed to apply, and no default value was provided.");
            }
          }
          std::optional<TensorDict> r = level(child, child_others, prefix.child(key));
          if (r) out.append(key, std::move(*r));
          break;
        }
        case Entry::Kind::NonTensor:
          out.append(key, e);  // non-tensor data passes through
          break;
        case Entry::Kind::Undefined:
          break;
      }
    });
    if (out.size() == 0 && !prefix.empty()) {
      const bool drop = options.filter_empty.has_value() ? *options.filter_empty : td.num_entries() > 0;
      if (drop) return std::nullopt;
    }
    return out.finish();
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
  const TensorDict src = readable(td);
  std::vector<TensorDict> other_trees;
  c10::SmallVector<const TensorDictBase*, 4> other_impls;
  for (const auto& o : others) other_trees.push_back(readable(o));
  for (const auto& o : other_trees) other_impls.push_back(o.impl());
  std::optional<TensorDict> out = applier.level(*src.impl(), other_impls, detail::KeyChain());
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
  LevelBuilder out(batch, td.device(), td.impl()->num_entries());
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
    } catch (...) {
      rethrow_leaf_error("apply", [&] { return NestedKey(key); });
    }
    if (r.defined()) out.append(key, detail::prepare_entry(out.level(), key, std::move(r)));
  });
  TensorDict result = out.finish();
  if (options.propagate_lock && td.is_locked()) result.lock_();
  return result;
}

// In place: every result is copied into its leaf (the stored tensor, or a copy the target
// writes back), so results are cast to the leaf's dtype as at::Tensor::copy_ does.
void run_apply_(const TensorDict& td, c10::ArrayRef<TensorDict> others, ApplyFn fn) {
  InPlaceTarget target(td);
  std::vector<TensorDict> other_trees;
  for (const auto& o : others) other_trees.push_back(readable(o));
  // The callable is given no key (apply_ takes none), so none is made unless an error names it.
  struct Writer {
    ApplyFn fn;
    void level(const TensorDictBase& td, c10::ArrayRef<const TensorDictBase*> others,
               const detail::KeyChain& prefix) {
      c10::SmallVector<at::Tensor, 4> args(others.size());
      c10::SmallVector<Entry, 4> holders(others.size());  // the others' entries, where fetched
      size_t position = 0;
      td.for_each([&](const std::string& key, const Entry& e) {
        const size_t at = position++;
        if (e.is_tensor()) {
          for (size_t j = 0; j < others.size(); ++j) {
            const Entry* oe = detail::entry_in(*others[j], key, holders[j], at);
            TD_CHECK(oe != nullptr && oe->is_tensor(), KeyError, "key ", prefix.child_path(key).repr(),
                     " not found as a tensor in the tensordict #", j + 1, " passed to apply_.");
            args[j] = oe->tensor_unchecked();
          }
          try {
            at::Tensor r = fn(nullptr, e.tensor_unchecked(), args);
            if (r.defined() && !r.is_same(e.tensor_unchecked())) detail::copy_leaf_(e.tensor_unchecked(), r);
          } catch (...) {
            rethrow_leaf_error("apply_", [&] { return prefix.child_path(key); });
          }
        } else if (e.is_tensordict()) {
          c10::SmallVector<const TensorDictBase*, 4> sub(others.size());
          for (size_t j = 0; j < others.size(); ++j) {
            const Entry* oe = detail::entry_in(*others[j], key, holders[j], at);
            TD_CHECK(oe != nullptr && oe->is_tensordict(), KeyError, "key ", prefix.child_path(key).repr(),
                     " not found as a TensorDict in the tensordict #", j + 1, " passed to apply_.");
            sub[j] = oe->tensordict_unchecked().impl();
          }
          level(*e.tensordict_unchecked().impl(), sub, prefix.child(key));
        }
      });
    }
  };
  std::vector<const TensorDictBase*> other_impls;
  for (const auto& o : other_trees) other_impls.push_back(o.impl());
  Writer{fn}.level(*target.tree().impl(), other_impls, detail::KeyChain());
  target.commit();
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


}  // namespace tensordict
