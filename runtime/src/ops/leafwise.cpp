// Leaf-by-leaf machinery: collecting leaves, matching two tensordicts by key, rebuilding.

#include "ops/leafwise.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ExpandUtils.h>

#include <tensordict/tensor_dict_impl.h>

#include "detail/format.h"

namespace tensordict {
namespace ops {

void collect_leaves(const TensorDictBase& td, LeafList& out) {
  td.for_each([&](const std::string&, const Entry& e) {
    if (e.is_tensor()) {
      out.push_back(e.tensor_unchecked());
    } else if (e.is_tensordict()) {
      collect_leaves(*e.tensordict_unchecked().impl(), out);
    }
  });
}

namespace {
void collect_keys_into(const TensorDictBase& td, const NestedKey& prefix, std::vector<NestedKey>& out) {
  td.for_each([&](const std::string& key, const Entry& e) {
    NestedKey full = prefix.empty() ? NestedKey(key) : prefix.child(key);
    if (e.is_tensor()) {
      out.push_back(std::move(full));
    } else if (e.is_tensordict()) {
      collect_keys_into(*e.tensordict_unchecked().impl(), full, out);
    }
  });
}

BatchSize level_batch(const TensorDictBase& level, c10::IntArrayRef new_root, size_t old_root_dims) {
  BatchSize batch(new_root.begin(), new_root.end());
  c10::IntArrayRef own = level.batch_size();
  if (own.size() > old_root_dims) batch.append(own.begin() + old_root_dims, own.end());
  return batch;
}

TensorDict rebuild_level(const TensorDictBase& like, const LeafList& results, size_t& next,
                         c10::IntArrayRef new_root, size_t old_root_dims) {
  auto out = TensorDictImpl::make(level_batch(like, new_root, old_root_dims), like.device(),
                                  like.num_entries());
  like.for_each([&](const std::string& key, const Entry& e) {
    switch (e.kind()) {
      case Entry::Kind::Tensor: {
        const at::Tensor& r = results[next++];
        if (r.defined()) out->append_unchecked(key, r);
        break;
      }
      case Entry::Kind::TensorDict:
        out->append_unchecked(key, rebuild_level(*e.tensordict_unchecked().impl(), results, next,
                                                 new_root, old_root_dims));
        break;
      case Entry::Kind::NonTensor:
        out->append_unchecked(key, e);
        break;
      case Entry::Kind::Undefined:
        break;
    }
  });
  return TensorDict(std::move(out));
}
}  // namespace

void collect_keys(const TensorDictBase& td, std::vector<NestedKey>& out) {
  collect_keys_into(td, NestedKey(), out);
}

TensorDict rebuild(const TensorDictBase& like, const LeafList& results,
                   std::optional<c10::IntArrayRef> batch_size, bool nested_extra_dims) {
  size_t next = 0;
  c10::IntArrayRef root = batch_size ? *batch_size : like.batch_size();
  // An old root rank beyond any level's rank drops every extra dim.
  const size_t old_dims = nested_extra_dims ? like.batch_size().size() : SIZE_MAX / 2;
  return rebuild_level(like, results, next, root, old_dims);
}

// ---- Two tensordicts matched by key --------------------------------------------------------

namespace {

std::string key_set_str(const std::vector<std::string>& keys) {
  std::string out = "{";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += ", ";
    out += NestedKey(keys[i]).repr();
  }
  return out + "}";
}

// Walks `a` and `b` together (either may be null on the side a fill-value default fills).
// In the collect phase it appends operand pairs; in the build phase it consumes results.
struct PairWalker {
  explicit PairWalker(const BinaryDefault& d) : def(d) {}
  const BinaryDefault& def;
  MatchedLeaves* collect = nullptr;
  const LeafList* results = nullptr;
  size_t next = 0;
  c10::IntArrayRef new_root;
  size_t a_root_dims = 0;
  size_t b_root_dims = 0;

  [[noreturn]] void throw_mismatch(const TensorDictBase& first, const TensorDictBase& second,
                                   bool first_has_extra, const NestedKey& prefix) {
    std::vector<std::string> extra;
    const TensorDictBase& has = first_has_extra ? first : second;
    const TensorDictBase& lacks = first_has_extra ? second : first;
    has.for_each([&](const std::string& k, const Entry&) {
      if (!lacks.has(k)) extra.push_back(k);
    });
    TD_THROW(KeyError, "keys in tensordicts mismatch. The ", first_has_extra ? "first" : "second",
             " TD has keys ", key_set_str(extra), " that the ", first_has_extra ? "second" : "first",
             " does not have", prefix.empty() ? std::string() : " (in nested TensorDict " + prefix.repr() + ")",
             ".");
  }

  void leaf(const std::string& key, TensorDictImpl* out, const at::Tensor* x, const at::Tensor* y,
            const NestedKey& prefix) {
    if (collect) {
      if (collect->keys) collect->keys->push_back(prefix.empty() ? NestedKey(key) : prefix.child(key));
      collect->lhs.push_back(x ? *x : at::full_like(*y, def.value()));
      collect->rhs.push_back(y ? *y : at::full_like(*x, def.value()));
      return;
    }
    const at::Tensor& r = (*results)[next++];
    if (r.defined()) out->append_unchecked(key, r);
  }

  // Returns the built level (build phase) or an undefined pointer (collect phase).
  c10::intrusive_ptr<TensorDictImpl> walk(const TensorDictBase* a, const TensorDictBase* b,
                                          const NestedKey& prefix) {
    c10::intrusive_ptr<TensorDictImpl> out;
    if (!collect) {
      const TensorDictBase& shape_of = a ? *a : *b;
      out = TensorDictImpl::make(level_batch(shape_of, new_root, a ? a_root_dims : b_root_dims),
                                 shape_of.device(), shape_of.num_entries());
    }
    size_t matched = 0;
    if (a != nullptr) {
      a->for_each([&](const std::string& key, const Entry& ea) {
        Entry eb;
        if (b != nullptr) {
          eb = b->get(key);
          if (eb.defined()) {
            ++matched;
          } else if (def.kind() == BinaryDefault::Kind::None) {
            throw_mismatch(*a, *b, /*first_has_extra=*/true, prefix);
          } else if (def.kind() == BinaryDefault::Kind::Intersection) {
            return;
          }
        }
        entry(key, out.get(), &ea, eb.defined() ? &eb : nullptr, prefix);
      });
    }
    if (b != nullptr && (a == nullptr || matched != b->num_entries())) {
      if (a != nullptr && def.kind() == BinaryDefault::Kind::None) {
        throw_mismatch(*a, *b, /*first_has_extra=*/false, prefix);
      }
      if (def.kind() == BinaryDefault::Kind::Value) {
        b->for_each([&](const std::string& key, const Entry& eb) {
          if (a != nullptr && a->has(key)) return;
          entry(key, out.get(), nullptr, &eb, prefix);
        });
      }
    }
    return out;
  }

  void entry(const std::string& key, TensorDictImpl* out, const Entry* ea, const Entry* eb,
             const NestedKey& prefix) {
    const Entry& any = ea ? *ea : *eb;
    if (ea && eb && ea->kind() != eb->kind() && !(ea->is_non_tensor() || eb->is_non_tensor())) {
      NestedKey full = prefix.empty() ? NestedKey(key) : prefix.child(key);
      TD_THROW(TypeError, "cannot combine the entries at ", full.repr(), ": the first tensordict holds ",
               kind_name(ea->kind()), " and the second ", kind_name(eb->kind()));
    }
    switch (any.kind()) {
      case Entry::Kind::Tensor:
        leaf(key, out, ea ? &ea->tensor_unchecked() : nullptr, eb ? &eb->tensor_unchecked() : nullptr, prefix);
        break;
      case Entry::Kind::TensorDict: {
        NestedKey full = prefix.empty() ? NestedKey(key) : prefix.child(key);
        auto child = walk(ea ? ea->tensordict_unchecked().impl() : nullptr,
                          eb ? eb->tensordict_unchecked().impl() : nullptr, full);
        if (out) out->append_unchecked(key, TensorDict(std::move(child)));
        break;
      }
      case Entry::Kind::NonTensor:
        if (out) out->append_unchecked(key, any);
        break;
      case Entry::Kind::Undefined:
        break;
    }
  }
};

}  // namespace

void match_leaves(const TensorDict& a, const TensorDict& b, const BinaryDefault& default_,
                  MatchedLeaves& out) {
  PairWalker w(default_);
  w.collect = &out;
  w.walk(a.impl(), b.impl(), NestedKey());
}

TensorDict rebuild_pair(const TensorDict& a, const TensorDict& b, const BinaryDefault& default_,
                        const LeafList& results, c10::IntArrayRef batch_size) {
  PairWalker w(default_);
  w.results = &results;
  w.new_root = batch_size;
  w.a_root_dims = a.batch_size().size();
  w.b_root_dims = b.batch_size().size();
  return TensorDict(w.walk(a.impl(), b.impl(), NestedKey()));
}

std::vector<int64_t> broadcast_batch(c10::IntArrayRef a, c10::IntArrayRef b, const char* op) {
  if (a == b) return a.vec();
  try {
    return at::infer_size(a, b);
  } catch (const c10::Error&) {
    TD_THROW(ShapeError, op, ": batch sizes ", detail::size_str(a), " and ", detail::size_str(b),
             " cannot be broadcast together.");
  }
}

// ---- Tensor and scalar operands ---------------------------------------------------------------

AlignedTensor::AlignedTensor(const TensorDict& td, const at::Tensor& other, const char* op)
    : root_dims_(td.batch_dims()), zero_dim_(other.dim() == 0) {
  TD_CHECK(other.defined(), ValueError, op, ": the tensor operand is undefined");
  if (zero_dim_) {
    expanded_ = other;
    batch_ = td.batch_size().vec();
    return;
  }
  try {
    batch_ = at::infer_size(td.batch_size(), other.sizes());
  } catch (const c10::Error&) {
    TD_THROW(ShapeError, op, ": a tensor of shape ", detail::size_str(other.sizes()),
             " cannot be broadcast to the batch size ", detail::size_str(td.batch_size()), ".");
  }
  expanded_ = other.sizes() == c10::IntArrayRef(batch_) ? other : other.expand(batch_);
}

at::Tensor AlignedTensor::operand(const at::Tensor& leaf) const {
  if (zero_dim_) return expanded_;
  const int64_t event_dims = leaf.dim() - root_dims_;
  if (event_dims <= 0) return expanded_;
  c10::SmallVector<int64_t, 8> shape(batch_.begin(), batch_.end());
  shape.append(static_cast<size_t>(event_dims), 1);
  return expanded_.view(shape);
}

const at::Tensor& ScalarOperand::for_leaf(const at::Tensor& leaf) {
  if (value_.isComplex() || value_.isBoolean() || !leaf.device().is_cpu()) return undefined_;
  const at::ScalarType st = leaf.scalar_type();
  if (st == at::kFloat) {
    if (!float_.defined()) float_ = at::scalar_tensor(value_, at::kFloat);
    return float_;
  }
  if (st == at::kDouble) {
    if (!double_.defined()) double_ = at::scalar_tensor(value_, at::kDouble);
    return double_;
  }
  return undefined_;
}

bool needs_autograd(const LeafList& leaves) {
  // Leaves that require grad always take the per-leaf path (with grad mode off it gives the
  // same results as the foreach kernels).
  for (const auto& t : leaves) {
    if (t.requires_grad()) return true;
  }
  return false;
}

void rethrow_leaf_error(const char* op, const NestedKey& key, const c10::Error& e) {
  TD_THROW(RuntimeError, op, " failed for key ", key.repr(), ": ", e.what_without_backtrace());
}

TensorDict keep_lock(TensorDict out, const TensorDict& src) {
  if (src.is_locked()) out.lock_();
  return out;
}

}  // namespace ops

BinaryDefault::BinaryDefault(const char* mode) : kind_(Kind::Intersection) {
  TD_CHECK(mode != nullptr && std::string(mode) == "intersection", ValueError,
           "default must be a value or \"intersection\", got \"", mode ? mode : "", "\"");
}

const at::Tensor& StateDict::at(const std::string& key) const {
  for (const auto& [k, v] : tensors) {
    if (k == key) return v;
  }
  TD_THROW(KeyError, "key \"", key, "\" not found in the state dict");
}

bool StateDict::contains(const std::string& key) const {
  for (const auto& kv : tensors) {
    if (kv.first == key) return true;
  }
  return false;
}

}  // namespace tensordict
