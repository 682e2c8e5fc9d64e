#pragma once
// The steps of the random op test (tests/unit/op_differential_test.cpp): each op run on the
// tensordict and on its model, and the program that runs them. Shared with the same test over
// Redis stores (tests/backends/redis/store_differential_test.cpp), which sets Program::to_store.
#include "support/catch_torch.h"
#include "unit/op_differential_trees.h"

#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/errors.h>
#include <tensordict/ops.h>
#include <tensordict/tensordict.h>

namespace op_differential {

using at::indexing::Slice;

// ---- Ops ----------------------------------------------------------------------------------------

// An out-of-place op: the result against the model, the operand unchanged; half the time the
// result becomes the next op's operand (chains of results).
inline bool out_of_place(Program& p, const char* name, const TensorDict& result, Model expected, bool adopt = true) {
  if (!same(p, result, expected, name) || !same_order(p, result, p.a, name) || !same(p, p.a, p.m, "the operand after the op"))
    return false;
  if (adopt && p.coin()) {
    p.a = result;
    p.m = std::move(expected);
    p.log << " (adopted)";
  }
  return true;
}

using LeafFn = std::function<at::Tensor(const at::Tensor&)>;
using ZipFn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;

inline bool unary(Program& p, const char* name, const std::function<TensorDict(const TensorDict&)>& op, const LeafFn& leaf,
           bool exact = true) {
  p.log << "\n  " << name;
  return out_of_place(p, name, op(p.a), map_model(p.m, leaf, exact));
}

inline bool binary(Program& p, const char* name, const std::function<TensorDict(const TensorDict&, const TensorDict&)>& op,
            const ZipFn& leaf, bool adopt = true, bool exact = true) {
  p.log << "\n  " << name;
  const Model mb = random_like(p.m);
  const TensorDict b = in_some_state(p, mb, "b");
  return out_of_place(p, name, op(p.a, b), zip_model(p.m, mb, leaf, exact), adopt) && same(p, b, mb, "b after the op");
}

// An in-place op: `a` against the model after it.
inline bool in_place(Program& p, const char* name, const std::function<void(TensorDict&)>& op, const LeafFn& leaf,
              bool exact = true) {
  p.log << "\n  " << name;
  op(p.a);
  p.m = map_model(p.m, leaf, exact);
  return same(p, p.a, p.m, name);
}

inline bool in_place_td(Program& p, const char* name, const std::function<void(TensorDict&, const TensorDict&)>& op,
                 const ZipFn& leaf, bool exact = true) {
  p.log << "\n  " << name;
  const Model mb = random_like(p.m);
  const TensorDict b = in_some_state(p, mb, "b");
  op(p.a, b);
  p.m = zip_model(p.m, mb, leaf, exact);
  return same(p, p.a, p.m, name) && same(p, b, mb, "b after the op");
}

// A reduction over every leaf (`reduce`): against the model's leaves flattened and concatenated.
inline bool reduction(Program& p, const char* name, const std::function<at::Tensor(const TensorDict&)>& op, const LeafFn& fn) {
  if (p.m.leaves.empty()) return true;
  p.log << "\n  " << name;
  std::vector<at::Tensor> flat;
  for (const auto& kv : p.m.leaves) flat.push_back(kv.second.value.reshape({-1}));
  const at::Tensor expected = fn(at::cat(flat));
  const at::Tensor got = op(p.a);
  // The dtype too: every leaf's, empty ones included, takes part in the result's (cat promotes).
  if (got.scalar_type() != expected.scalar_type() ||
      !at::allclose(got.to(at::kDouble), expected.to(at::kDouble), 1e-5, 1e-4, /*equal_nan=*/true)) {
    FAIL_CHECK(name << " " << got << ", expected " << expected << "\n" << p.where());
    return false;
  }
  return same(p, p.a, p.m, "the operand after a reduction");
}

// A write refused on a locked tensordict: LockedError and nothing changed; else `write` and the
// model's `apply`.
inline bool structural(Program& p, const char* name, const std::function<void(TensorDict&)>& write,
                const std::function<void(Model&)>& apply) {
  p.log << "\n  " << name;
  if (p.a.is_locked()) {
    CHECK_THROWS_AS(write(p.a), LockedError);
    return same(p, p.a, p.m, name);
  }
  write(p.a);
  apply(p.m);
  return same(p, p.a, p.m, name);
}

// Whether `key`'s first parts are `prefix`'s (`key` itself, or a key below it).
inline bool starts_with(const NestedKey& key, const NestedKey& prefix) {
  return key.size() >= prefix.size() && std::equal(prefix.parts().begin(), prefix.parts().end(), key.parts().begin());
}

// Whether get() hands out the leaf itself: a lazy stack's get stacks its members' leaves into a
// new tensor (Python's), and an HDF5 file's reads a copy, so a change through either reaches
// nothing stored.
// A Redis store's get decodes a copy too (unit_tests links no store library, so the store is
// known by its type name).
inline bool is_store(const TensorDict& td) { return std::string_view(td.impl()->type_name()) == "TensorDictStore"; }
inline bool leaves_are_handles(const TensorDict& td) {
  return !LazyStackedTensorDict::is_lazy_stack(td) && !is_h5(td) && !is_store(td);
}

inline const NestedKey& some_key(Program& p) {
  auto it = p.m.leaves.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(p.pick(p.m.leaves.size())));
  return it->first;
}

// `t`'s shape with its `dims` batch dims merged into `rows`.
inline std::vector<int64_t> feature_shape(const at::Tensor& t, int64_t rows, size_t dims) {
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), t.sizes().begin() + static_cast<int64_t>(dims), t.sizes().end());
  return shape;
}

// A batch-shaped mask viewed with `t`'s feature dims as ones, so that it broadcasts over them.
inline at::Tensor batch_mask(const at::Tensor& mask, const at::Tensor& t) {
  std::vector<int64_t> shape(mask.sizes().begin(), mask.sizes().end());
  shape.resize(static_cast<size_t>(t.dim()), 1);
  return mask.view(shape);
}

// A leaf that requires grad, then `a * 2.5`, and with grad mode off `mul_(0.5)` too. In grad mode
// only the result's leaf over it requires grad (autograd takes the per-leaf path); with it off
// none does (a fast path may take the tree) and the in-place op writes that leaf like the others.
// The leaf stops requiring grad afterwards, so that in-place ops stay legal.
inline bool with_leaf_requiring_grad(Program& p, bool grad_mode) {
  if (p.m.leaves.empty() || !leaves_are_handles(p.a)) return true;
  const NestedKey& k = some_key(p);
  at::Tensor leaf = p.a.get(k);
  if (!leaf.is_floating_point()) return true;
  p.log << "\n  get(" << k.repr() << ").requires_grad_(), " << (grad_mode ? "a * 2.5" : "no_grad: a * 2.5, mul_(0.5)");
  leaf.requires_grad_(true);
  bool ok = true;
  {
    const at::AutoGradMode mode(grad_mode);
    const TensorDict result = p.a * 2.5;
    for (const NestedKey& r : result.keys(true, true)) {
      const bool tracked = grad_mode && r == k;
      if (result.get(r).requires_grad() != tracked) {
        FAIL_CHECK("a * 2.5: leaf " << r.repr() << (tracked ? " does not require" : " requires") << " grad\n" << p.where());
        ok = false;
      }
    }
    ok = ok && same(p, result.detach(), map_model(p.m, [](const at::Tensor& t) { return t * 2.5; }, true), "a * 2.5");
    if (ok && !grad_mode)
      ok = in_place(p, "mul_(0.5)", [](TensorDict& a) { a.mul_(0.5); }, [](const at::Tensor& t) { return t * 0.5; });
  }
  leaf.requires_grad_(false);
  return ok;
}

// One random op on p.a; false on a mismatch (already reported).
inline bool step(Program& p) {
  const size_t dims = p.m.batch.size();
  const bool rows = dims >= 1 && p.m.batch[0] > 0;
  switch (p.pick(59)) {
    case 0: return unary(p, "exp", [](const TensorDict& a) { return a.exp(); }, [](const at::Tensor& t) { return t.exp(); }, false);
    case 1: return unary(p, "abs", [](const TensorDict& a) { return a.abs(); }, [](const at::Tensor& t) { return t.abs(); });
    case 2: return unary(p, "neg", [](const TensorDict& a) { return a.neg(); }, [](const at::Tensor& t) { return t.neg(); });
    case 3: return unary(p, "clone", [](const TensorDict& a) { return a.clone(); }, [](const at::Tensor& t) { return t.clone(); });
    case 4:
      return unary(p, "clamp", [](const TensorDict& a) { return a.clamp(-0.5, 0.5); },
                   [](const at::Tensor& t) { return t.clamp(-0.5, 0.5); });
    case 5: return unary(p, "a * 2.5", [](const TensorDict& a) { return a * 2.5; }, [](const at::Tensor& t) { return t * 2.5; });
    case 6: return unary(p, "a + 1", [](const TensorDict& a) { return a + 1; }, [](const at::Tensor& t) { return t + 1; });
    case 7:
      return unary(p, "to(double)", [](const TensorDict& a) { return a.to(at::kDouble); },
                   [](const at::Tensor& t) { return t.to(at::kDouble); });
    case 8:
      return binary(p, "a + b", [](const TensorDict& a, const TensorDict& b) { return a + b; },
                    [](const at::Tensor& x, const at::Tensor& y) { return x + y; });
    case 9:
      return binary(p, "a - b", [](const TensorDict& a, const TensorDict& b) { return a - b; },
                    [](const at::Tensor& x, const at::Tensor& y) { return x - y; });
    case 10:
      return binary(p, "a * b", [](const TensorDict& a, const TensorDict& b) { return a * b; },
                    [](const at::Tensor& x, const at::Tensor& y) { return x * y; });
    case 11: {
      // Equal or not in one leaf: eq leaf by leaf, and all() over every leaf.
      p.log << "\n  a.eq(b), all()";
      Model mb = map_model(p.m, [](const at::Tensor& t) { return t.clone(); }, true);
      if (!mb.leaves.empty() && p.coin()) {
        at::Tensor& v = mb.leaves[some_key(p)].value;
        v = v.contiguous();  // a re-strided leaf's clone keeps its strides
        if (v.numel() > 0) v.view(-1)[0] += 1;
      }
      const TensorDict b = in_some_state(p, mb, "b");
      const TensorDict eq = p.a.eq(b);
      const Model expected = zip_model(p.m, mb, [](const at::Tensor& x, const at::Tensor& y) { return x.eq(y); }, true);
      bool all = true;
      for (const auto& [k, leaf] : expected.leaves) all = all && leaf.value.all().item<bool>();
      CHECK(eq.all() == all);
      CHECK((p.a == b).all() == all);  // the comparison's own all(), which builds no tensordict
      CHECK((p.a != b).any() == !all);
      return out_of_place(p, "a.eq(b)", eq, expected, /*adopt=*/false);
    }
    case 12:
      return reduction(p, "sum(reduce)", [](const TensorDict& a) { return a.sum(reduce); },
                       [](const at::Tensor& t) { return t.sum(); });
    case 13: {
      if (dims >= 3) return true;
      p.log << "\n  stack({a, b})";
      const Model mb = random_like(p.m);
      const TensorDict b = in_some_state(p, mb, "b");
      Model expected = zip_model(p.m, mb, [](const at::Tensor& x, const at::Tensor& y) { return at::stack({x, y}); }, true);
      expected.batch.insert(expected.batch.begin(), 2);
      return out_of_place(p, "stack", stack({p.a, b}), std::move(expected));
    }
    case 14: {
      if (dims < 1) return true;
      p.log << "\n  cat({a, b})";
      const Model mb = random_like(p.m);
      const TensorDict b = in_some_state(p, mb, "b");
      Model expected = zip_model(p.m, mb, [](const at::Tensor& x, const at::Tensor& y) { return at::cat({x, y}); }, true);
      expected.batch[0] *= 2;
      return out_of_place(p, "cat", cat({p.a, b}), std::move(expected));
    }
    case 15: {
      if (dims >= 3) return true;
      p.log << "\n  unsqueeze(0)";
      Model expected = map_model(p.m, [](const at::Tensor& t) { return t.unsqueeze(0); }, true);
      expected.batch.insert(expected.batch.begin(), 1);
      return out_of_place(p, "unsqueeze(0)", p.a.unsqueeze(0), std::move(expected));
    }
    case 16: {
      if (!rows) return true;
      const int64_t i = static_cast<int64_t>(p.pick(static_cast<size_t>(p.m.batch[0])));
      p.log << "\n  index({" << i << "})";
      Model expected = map_model(p.m, [i](const at::Tensor& t) { return t.select(0, i); }, true);
      expected.batch.erase(expected.batch.begin());
      return out_of_place(p, "index(int)", p.a.index({i}), std::move(expected));
    }
    case 17: {
      if (dims < 1) return true;
      // A lazy stack sliced to no member lists no key (Python's: the keys are its members'
      // intersection), where a dense tensordict keeps its leaves with no rows.
      const bool lazy = LazyStackedTensorDict::is_lazy_stack(p.a);
      if (lazy && !rows) return true;
      const int64_t k = static_cast<int64_t>(lazy + p.pick(static_cast<size_t>(p.m.batch[0]) + !lazy));
      p.log << "\n  index({Slice(0, " << k << ")})";
      Model expected = map_model(p.m, [k](const at::Tensor& t) { return t.slice(0, 0, k); }, true);
      expected.batch[0] = k;
      return out_of_place(p, "index(slice)", p.a.index({Slice(0, k)}), std::move(expected));
    }
    case 18: {
      p.log << "\n  flatten_keys";
      Model expected{p.m.batch, {}};
      for (const auto& [k, leaf] : p.m.leaves) expected.leaves[NestedKey(k.join("."))] = leaf;
      const TensorDict flat = p.a.flatten_keys(".");
      if (!same(p, flat, expected, "flatten_keys")) return false;
      if (p.coin()) {
        p.a = flat;
        p.m = std::move(expected);
        p.log << " (adopted)";
      }
      return true;
    }
    case 19: return in_place(p, "add_(0.5)", [](TensorDict& a) { a.add_(0.5); }, [](const at::Tensor& t) { return t + 0.5; });
    case 20: return in_place(p, "mul_(-2)", [](TensorDict& a) { a.mul_(-2); }, [](const at::Tensor& t) { return t * -2; });
    case 21: return in_place(p, "abs_", [](TensorDict& a) { a.abs_(); }, [](const at::Tensor& t) { return t.abs(); });
    case 22: return in_place(p, "zero_", [](TensorDict& a) { a.zero_(); }, [](const at::Tensor& t) { return at::zeros_like(t); });
    case 23:
      return in_place_td(p, "add_(b)", [](TensorDict& a, const TensorDict& b) { a.add_(b); },
                         [](const at::Tensor& x, const at::Tensor& y) { return x + y; });
    case 24:
      return in_place_td(p, "lerp_(b, 0.25)", [](TensorDict& a, const TensorDict& b) { a.lerp_(b, 0.25); },
                         [](const at::Tensor& x, const at::Tensor& y) { return x.lerp(y, 0.25); }, false);
    case 25:
      return in_place_td(p, "update_(b)", [](TensorDict& a, const TensorDict& b) { a.update_(b); },
                         [](const at::Tensor&, const at::Tensor& y) { return y.clone(); });
    case 26: {
      const Model mb = random_like(p.m);
      p.log << "\n  update(b)";
      const TensorDict b = in_some_state(p, mb, "b");
      return structural(p, "update(b)", [&](TensorDict& a) { a.update(b); }, [&](Model& m) { m = mb; });
    }
    case 27: {
      if (!rows) return true;
      p.log << "\n  index_put_({Slice(0, 1)}, b[:1])";
      const Model mb = random_like(p.m);
      const TensorDict b = in_some_state(p, mb, "b");
      p.a.index_put_({Slice(0, 1)}, b.index({Slice(0, 1)}));
      for (auto& [k, leaf] : p.m.leaves) leaf.value.slice(0, 0, 1).copy_(mb.leaves.at(k).value.slice(0, 0, 1));
      return same(p, p.a, p.m, "index_put_");
    }
    case 28: {
      // A leaf read and changed in place through its handle: the tensordict sees it.
      if (p.m.leaves.empty() || !leaves_are_handles(p.a)) return true;
      const NestedKey& k = some_key(p);
      p.log << "\n  get(" << k.repr() << ").mul_(3)";
      p.a.get(k).mul_(3);
      p.m.leaves[k].value.mul_(3);
      return same(p, p.a, p.m, "a leaf changed in place");
    }
    case 29: {
      // A leaf read and pointed at other memory (set_): the leaf no longer views the storage a
      // fast path would run over.
      if (p.m.leaves.empty() || !leaves_are_handles(p.a)) return true;
      const NestedKey& k = some_key(p);
      p.log << "\n  get(" << k.repr() << ").set_(fresh)";
      const at::Tensor fresh = at::randn_like(p.m.leaves[k].value, at::MemoryFormat::Contiguous);
      p.a.get(k).set_(fresh);
      p.m.leaves[k].value = fresh.clone();
      return same(p, p.a, p.m, "a leaf set_ to other memory");
    }
    case 30: {
      at::Tensor value = random_leaf(p, p.m.batch, at::kFloat);
      NestedKey key("new" + std::to_string(p.pick(2)));
      if (!p.m.leaves.empty()) {
        const NestedKey& other = some_key(p);
        if (other.is_nested() && p.coin()) key = NestedKey({other.front(), "new"});  // into a nested level
      }
      // `set` of a key a file already holds, through an indexed view of it, writes the selected
      // elements (Python's _SubTensorDict): a replacement of another shape would broadcast.
      const auto existing = p.m.leaves.find(key);
      if (existing != p.m.leaves.end() && is_h5(p.a))
        value = at::randn_like(existing->second.value, at::MemoryFormat::Contiguous);
      p.log << "\n  set(" << key.repr() << ")";
      // A key that holds a nested level cannot take a leaf: only paths through levels or to leaves.
      for (const auto& kv : p.m.leaves)
        if (kv.first.size() > key.size() && starts_with(kv.first, key))
          return true;
      for (const auto& kv : p.m.leaves)
        if (kv.first.size() < key.size() && starts_with(key, kv.first))
          return true;
      return structural(p, "set", [&](TensorDict& a) { a.set(key, value); },
                        [&](Model& m) { m.leaves[key] = {value.clone(), true}; });
    }
    case 31: {
      if (p.m.leaves.size() < 2) return true;
      const NestedKey key = some_key(p);
      // The last leaf of a level: erase the level, so both operands of a binary op keep one structure.
      NestedKey target = key;
      if (key.is_nested()) {
        const NestedKey parent(std::vector<std::string>(key.parts().begin(), key.parts().end() - 1));
        size_t siblings = 0;
        for (const auto& kv : p.m.leaves)
          if (kv.first.size() > parent.size() && starts_with(kv.first, parent))
            ++siblings;
        if (siblings == 1) target = NestedKey(std::vector<std::string>{key.front()});
      }
      p.log << "\n  erase(" << target.repr() << ")";
      return structural(p, "erase", [&](TensorDict& a) { a.erase(target); }, [&](Model& m) {
        for (auto it = m.leaves.begin(); it != m.leaves.end();) {
          const bool under = starts_with(it->first, target);
          it = under ? m.leaves.erase(it) : std::next(it);
        }
      });
    }
    case 32:
      p.log << (p.a.is_locked() ? "\n  unlock_" : "\n  lock_");
      if (p.a.is_locked()) p.a.unlock_();
      else p.a.lock_();
      return same(p, p.a, p.m, "lock_ / unlock_");
    case 33: {
      // A contiguous leaf re-strided in place over the same elements (column-major): the same
      // storage, offset and sizes, another order. A fast path must not take it for the leaf it made.
      if (p.m.leaves.empty() || !leaves_are_handles(p.a)) return true;
      const NestedKey& k = some_key(p);
      at::Tensor t = p.a.get(k);
      if (t.dim() < 2 || t.numel() < 2 || !t.is_contiguous()) return true;
      p.log << "\n  get(" << k.repr() << ").as_strided_(column-major)";
      std::vector<int64_t> strides(static_cast<size_t>(t.dim()));
      int64_t stride = 1;
      for (size_t d = 0; d < strides.size(); ++d) strides[d] = stride, stride *= t.size(static_cast<int64_t>(d));
      const at::Tensor expected = t.as_strided(t.sizes(), strides, t.storage_offset()).clone();
      t.as_strided_(t.sizes(), strides, t.storage_offset());
      p.m.leaves[k].value = expected;
      return same(p, p.a, p.m, "a leaf re-strided in place");
    }
    case 34: return in_place(p, "fill_(1.5)", [](TensorDict& a) { a.fill_(1.5); }, [](const at::Tensor& t) { return at::full_like(t, 1.5); });
    case 35:
      return in_place(p, "clamp_(-0.5, 0.5)", [](TensorDict& a) { a.clamp_(-0.5, 0.5); },
                      [](const at::Tensor& t) { return t.clamp(-0.5, 0.5); });
    case 36: return unary(p, "a / 4", [](const TensorDict& a) { return a / 4; }, [](const at::Tensor& t) { return t / 4; });
    case 37:
      return binary(p, "a.gt(b)", [](const TensorDict& a, const TensorDict& b) { return a.gt(b); },
                    [](const at::Tensor& x, const at::Tensor& y) { return x.gt(y); }, /*adopt=*/false);
    case 38:
      return in_place_td(p, "sub_(b)", [](TensorDict& a, const TensorDict& b) { a.sub_(b); },
                         [](const at::Tensor& x, const at::Tensor& y) { return x - y; });
    case 39:
      return reduction(p, "mean(reduce)", [](const TensorDict& a) { return a.mean(reduce); },
                       [](const at::Tensor& t) { return t.mean(); });
    case 40: return with_leaf_requiring_grad(p, /*grad_mode=*/true);
    case 41: {
      if (!rows) return true;
      const at::Tensor mask = at::rand({p.m.batch[0]}) < 0.5;
      if (LazyStackedTensorDict::is_lazy_stack(p.a) && !mask.any().item<bool>()) return true;  // as a slice to no row
      p.log << "\n  index({mask})";
      Model expected = map_model(p.m, [&](const at::Tensor& t) { return t.index({mask}); }, true);
      expected.batch[0] = mask.sum().item<int64_t>();
      return out_of_place(p, "index(mask)", p.a.index({mask}), std::move(expected));
    }
    case 42: {
      if (!rows) return true;
      // Repeated rows of a lazy stack are one member, of a file's view one row: written through
      // one, both change. Those get distinct rows; dense results copy, repeats and all.
      const bool views = !leaves_are_handles(p.a);
      if (views && LazyStackedTensorDict::is_lazy_stack(p.a) && p.m.batch[0] == 0) return true;
      const int64_t n = static_cast<int64_t>(views ? 1 + p.pick(static_cast<size_t>(p.m.batch[0])) : p.pick(5));
      const at::Tensor idx = views ? at::randperm(p.m.batch[0]).slice(0, 0, n) : at::randint(p.m.batch[0], {n}, at::kLong);
      p.log << "\n  index({long tensor})";
      Model expected = map_model(p.m, [&](const at::Tensor& t) { return t.index_select(0, idx); }, true);
      expected.batch[0] = idx.numel();
      return out_of_place(p, "index(long)", p.a.index({idx}), std::move(expected));
    }
    case 43: {
      if (dims < 2) return true;
      p.log << "\n  permute(1, 0, ...)";
      std::vector<int64_t> order{1, 0};
      for (int64_t d = 2; d < static_cast<int64_t>(dims); ++d) order.push_back(d);
      Model expected = map_model(p.m, [](const at::Tensor& t) { return t.transpose(0, 1); }, true);
      std::swap(expected.batch[0], expected.batch[1]);
      return out_of_place(p, "permute", p.a.permute(order), std::move(expected));
    }
    case 44: {
      if (dims < 1) return true;
      int64_t rows_total = 1;
      for (int64_t b : p.m.batch) rows_total *= b;
      p.log << "\n  reshape({-1})";
      Model expected = map_model(p.m, [&](const at::Tensor& t) { return t.reshape(feature_shape(t, rows_total, dims)); }, true);
      expected.batch = {rows_total};
      return out_of_place(p, "reshape", p.a.reshape({rows_total}), std::move(expected));
    }
    case 45: {
      if (!rows) return true;
      const int64_t i = static_cast<int64_t>(p.pick(static_cast<size_t>(p.m.batch[0])));
      p.log << "\n  update_at_(b[" << i << "], {" << i << "})";
      Model rows_model = map_model(p.m, [i](const at::Tensor& t) { return t.select(0, i); }, true);
      rows_model.batch.erase(rows_model.batch.begin());
      const Model mb = random_like(rows_model);
      const TensorDict b = in_some_state(p, mb, "b");
      p.a.update_at_(b, {i});
      for (auto& [k, leaf] : p.m.leaves) leaf.value.select(0, i).copy_(mb.leaves.at(k).value);
      return same(p, p.a, p.m, "update_at_");
    }
    case 46: {
      const at::Tensor mask = at::rand(p.m.batch) < 0.5;
      p.log << "\n  masked_fill(mask, 0.5)";
      return unary(p, "masked_fill", [&](const TensorDict& a) { return a.masked_fill(mask, 0.5); },
                   [&](const at::Tensor& t) { return t.masked_fill(batch_mask(mask, t), 0.5); });
    }
    case 47: {
      const at::Tensor cond = at::rand(p.m.batch) < 0.5;
      return binary(p, "where(cond, b)", [&](const TensorDict& a, const TensorDict& b) { return a.where(cond, b); },
                    [&](const at::Tensor& x, const at::Tensor& y) { return at::where(batch_mask(cond, x), x, y); });
    }
    case 48:
      return unary(p, "apply(3t - 1)", [](const TensorDict& a) { return a.apply([](const at::Tensor& t) { return t * 3 - 1; }); },
                   [](const at::Tensor& t) { return t * 3 - 1; });
    case 49: {
      if (p.m.leaves.empty()) return true;
      const NestedKey key = some_key(p);
      const bool keep = p.coin();
      p.log << "\n  " << (keep ? "select(" : "exclude(") << key.repr() << ")";
      Model expected = p.m;
      for (auto it = expected.leaves.begin(); it != expected.leaves.end();) it = (it->first == key) != keep ? expected.leaves.erase(it) : std::next(it);
      const TensorDict result = keep ? p.a.select({key}) : p.a.exclude({key});
      return same(p, result, expected, keep ? "select" : "exclude") && same(p, p.a, p.m, "the operand after the op");
    }
    case 50: return with_leaf_requiring_grad(p, /*grad_mode=*/false);
    // Ternary ops, the second operand twice (a vectorized kernel and its scalar tail may round
    // apart: not bit for bit).
    case 51:
      return in_place_td(p, "addcmul_(b, b, 0.5)", [](TensorDict& a, const TensorDict& b) { a.addcmul_(b, b, 0.5); },
                         [](const at::Tensor& x, const at::Tensor& y) { return x.addcmul(y, y, 0.5); }, false);
    case 52:
      return binary(p, "addcmul(b, b, -2)", [](const TensorDict& a, const TensorDict& b) { return a.addcmul(b, b, -2); },
                    [](const at::Tensor& x, const at::Tensor& y) { return x.addcmul(y, y, -2); }, true, false);
    // Reductions per leaf (Note [Shape groups]): over the first batch dim, and over every dim.
    case 53: {
      if (dims == 0) return true;
      p.log << "\n  sum(0)";
      Model expected = map_model(p.m, [](const at::Tensor& t) { return t.sum(0); }, false);
      expected.batch.erase(expected.batch.begin());
      return out_of_place(p, "sum(0)", p.a.sum(0), std::move(expected), /*adopt=*/false);
    }
    case 54: {
      p.log << "\n  mean()";
      Model expected = map_model(p.m, [](const at::Tensor& t) { return t.mean(); }, false);
      expected.batch.clear();
      return out_of_place(p, "mean()", p.a.mean(), std::move(expected), /*adopt=*/false);
    }
    case 55: {
      // A batch-shaped mask (Note [Shape groups] writes a group of leaves at once).
      if (dims == 0) return true;
      const at::Tensor mask = at::rand({p.m.batch[0]}).gt(0.5);
      const auto covering = [mask](const at::Tensor& t) {
        std::vector<int64_t> shape(static_cast<size_t>(t.dim()), 1);
        shape[0] = mask.size(0);
        return mask.view(shape);
      };
      return in_place(p, "masked_fill_", [&](TensorDict& a) { a.masked_fill_(mask, -3.0); },
                      [&](const at::Tensor& t) { return t.masked_fill(covering(t), -3.0); });
    }
    case 56: {
      // A tensor of the batch shape, in place (Note [Shape groups] writes a group at once).
      const at::Tensor w = at::rand(p.m.batch) + 0.5;
      const auto covering = [w](const at::Tensor& t) {
        std::vector<int64_t> shape(w.sizes().begin(), w.sizes().end());
        shape.resize(static_cast<size_t>(t.dim()), 1);
        return w.view(shape);
      };
      return in_place(p, "mul_(w)", [&](TensorDict& a) { a.mul_(w); },
                      [&](const at::Tensor& t) { return t * covering(t); });
    }
    case 57: {
      // detach (one detach a storage over a consolidated tree, else each leaf's built directly):
      // the same values, each leaf over its operand leaf's bytes and version counter, no grad.
      p.log << "\n  detach";
      const TensorDict d = p.a.detach();
      if (leaves_are_handles(p.a) && !p.m.leaves.empty()) {
        const NestedKey& k = some_key(p);
        const at::Tensor leaf = p.a.get(k), got = d.get(k);
        if (got.data_ptr() != leaf.data_ptr() || got.requires_grad()) {
          FAIL_CHECK("detach: leaf " << k.repr() << " is not its operand's bytes without grad\n" << p.where());
          return false;
        }
        if (!leaf.is_inference()) {
          const int64_t before = leaf._version();
          got.unsafeGetTensorImpl()->bump_version();  // what a write through it does
          if (leaf._version() == before) {
            FAIL_CHECK("detach: leaf " << k.repr() << " has a version counter of its own\n" << p.where());
            return false;
          }
        }
      }
      return out_of_place(p, "detach", d, p.m);
    }
    default:
      p.log << "\n  read some leaves";
      read_some(p, p.a);
      return same(p, p.a, p.m, "reads");
  }
}

inline void run(uint32_t seed, int steps, const std::string& directory,
         std::function<TensorDict(const TensorDict&, bool)> to_store = nullptr) {
  Program p(seed);
  p.directory = directory;
  p.to_store = std::move(to_store);
  at::manual_seed(seed);
  p.m = random_model(p);
  p.a = in_some_state(p, p.m, "a");
  if (!same(p, p.a, p.m, "the start")) return;
  for (int i = 0; i < steps; ++i) {
    try {
      if (!step(p)) return;
    } catch (const NotImplementedError& e) {
      // A backend that cannot do an op (a write through an indexed view of a file) refuses it
      // whole: nothing changed.
      p.log << " -> refused: " << e.what();
      if (!same(p, p.a, p.m, "after a refused op")) return;
    } catch (const StorageError& e) {
      // So does a store laid out by rows asked to add or remove a leaf, once unlocked.
      if (std::string_view(e.what()).find("per-row records") == std::string_view::npos) {
        FAIL_CHECK("unexpected exception: " << e.what() << "\n" << p.where());
        return;
      }
      p.log << " -> refused: " << e.what();
      if (!same(p, p.a, p.m, "after a refused op")) return;
    } catch (const std::exception& e) {
      FAIL_CHECK("unexpected exception: " << e.what() << "\n" << p.where());
      return;
    }
  }
}

inline uint32_t env_or(const char* name, uint32_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? static_cast<uint32_t>(std::strtoul(v, nullptr, 10)) : fallback;
}

}  // namespace op_differential
