// Leaf-by-leaf machinery: reading the tree, collecting leaves, matching two tensordicts by key,
// rebuilding, and writing in-place changes back.

#include "ops/leafwise.h"

#include <algorithm>
#include <stdexcept>
#include <typeinfo>

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/grad_mode.h>

#include "backends/in_memory/level_builder.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "core/dim_names.h"
#include "core/format.h"
#include "core/forward_ad.h"
#include "core/key_chain.h"
#include "core/strided_view.h"
#include "core/structure_walk.h"
#include "handle/aligned_level.h"
#include "handle/key_path.h"

namespace tensordict {
namespace ops {

// ---- Reading the tree, writing changes back ---------------------------------------------------

namespace {

bool every_level_aliases(const TensorDictBase& level) {
  if (!level.leaves_alias_storage()) return false;
  // A deferred level is a packed result's, whose nested levels are too: it answers unbuilt.
  if (typeid(level) == typeid(TensorDictImpl) && static_cast<const TensorDictImpl&>(level).is_deferred()) return true;
  bool all = true;
  in_memory::for_each_structure_entry(level, [&](const std::string&, const Entry& e) {
    if (all && e.is_tensordict()) all = every_level_aliases(*e.tensordict_unchecked().impl());
  });
  return all;
}

using WriteBacks = std::vector<std::pair<TensorDict, TensorDict>>;

TensorDict substitute(const TensorDict& td, WriteBacks* write_backs) {
  const TensorDictBase& level = *td.impl();
  if (!level.leaves_alias_storage()) {
    TensorDict snapshot = detail::named_snapshot(level);
    if (write_backs) write_backs->emplace_back(td, snapshot);
    return snapshot;
  }
  if (every_level_aliases(level)) return td;
  return detail::map_level(
      level, level.batch_size(), level.device(), [](const std::string&, const at::Tensor& t) { return t; },
      [&](const std::string&, const TensorDict& child) { return std::optional<TensorDict>(substitute(child, write_backs)); },
      [](const std::string&, const NonTensorData& data) { return data; });
}

}  // namespace

TensorDict readable(const TensorDict& td) { return substitute(td, nullptr); }

InPlaceTarget::InPlaceTarget(const TensorDict& td) : tree_(substitute(td, &write_backs_)) {}

void InPlaceTarget::commit() const {
  for (const auto& [level, changed] : write_backs_) level.impl()->write_many_(changed);
}

// ---- Collecting and rebuilding ------------------------------------------------------------------

void collect_leaves(const TensorDictBase& td, LeafList& out) {
  td.for_each([&](const std::string&, const Entry& e) {
    if (e.is_tensor()) {
      out.push_back(e.tensor_unchecked());
    } else if (e.is_tensordict()) {
      collect_leaves(*e.tensordict_unchecked().impl(), out);
    }
  });
}

LeafList leaves_of(const TensorDict& td) {
  LeafList leaves;
  leaves.reserve(32);
  collect_leaves(*td.impl(), leaves);
  return leaves;
}

namespace {
void collect_keys_into(const TensorDictBase& td, const NestedKey& prefix, std::vector<NestedKey>& out) {
  td.for_each([&](const std::string& key, const Entry& e) {
    if (e.is_tensor()) {
      out.push_back(prefix.child(key));
    } else if (e.is_tensordict()) {
      collect_keys_into(*e.tensordict_unchecked().impl(), prefix.child(key), out);
    }
  });
}

// `result(i)`: the i-th result, copied from a list the caller keeps or moved from one it gave up.
TensorDict rebuild_level(const TensorDictBase& like, FunctionRef<at::Tensor(size_t)> result, size_t& next,
                         c10::IntArrayRef new_root, size_t old_root_dims, bool filter_empty) {
  return detail::map_level(
      like, detail::nested_batch(new_root, like.batch_size(), old_root_dims), like.device(),
      [&](const std::string&, const at::Tensor&) { return result(next++); },
      [&](const std::string&, const TensorDict& child) {
        const TensorDictBase& c = *child.impl();
        TensorDict r = rebuild_level(c, result, next, new_root, old_root_dims, filter_empty);
        if (filter_empty && r.num_keys() == 0) return std::optional<TensorDict>();
        return std::optional<TensorDict>(std::move(r));
      },
      [](const std::string&, const NonTensorData& data) { return data; });
}
}  // namespace

void collect_keys(const TensorDictBase& td, std::vector<NestedKey>& out) { collect_keys_into(td, NestedKey(), out); }

namespace {
TensorDict rebuild_from(const TensorDictBase& like, FunctionRef<at::Tensor(size_t)> result,
                        const RebuildOptions& options) {
  size_t next = 0;
  c10::IntArrayRef root = options.batch_size ? *options.batch_size : like.batch_size();
  // An old root rank beyond any level's rank drops every extra dim.
  const size_t old_dims = options.nested_extra_dims ? like.batch_size().size() : SIZE_MAX / 2;
  return rebuild_level(like, result, next, root, old_dims, options.filter_empty);
}
}  // namespace

TensorDict rebuild(const TensorDictBase& like, const LeafList& results, const RebuildOptions& options) {
  return rebuild_from(like, [&](size_t i) { return results[i]; }, options);
}

TensorDict rebuild(const TensorDictBase& like, LeafList&& results, const RebuildOptions& options) {
  return rebuild_from(like, [&](size_t i) { return std::move(results[i]); }, options);
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

using detail::KeyChain;

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
  bool ignore_extra_rhs = false;
  bool filter_empty = false;

  [[noreturn]] void throw_mismatch(const TensorDictBase& first, const TensorDictBase& second, bool first_has_extra,
                                   const KeyChain& prefix) {
    std::vector<std::string> extra;
    const TensorDictBase& has = first_has_extra ? first : second;
    const TensorDictBase& lacks = first_has_extra ? second : first;
    has.for_each_key([&](const std::string& k, EntryKind) {
      if (!lacks.has(k)) extra.push_back(k);
    });
    TD_THROW(KeyError, "keys in tensordicts mismatch. The ", first_has_extra ? "first" : "second", " TD has keys ",
             key_set_str(extra), " that the ", first_has_extra ? "second" : "first", " does not have",
             prefix.empty() ? std::string() : " (in nested TensorDict " + prefix.repr() + ")", ".");
  }

  void leaf(const std::string& key, LevelBuilder* out, const at::Tensor* x, const at::Tensor* y,
            const KeyChain& prefix) {
    if (collect) {
      if (collect->keys) collect->keys->push_back(prefix.child_path(key));
      collect->lhs.push_back(x ? *x : at::full_like(*y, def.value()));
      collect->rhs.push_back(y ? *y : at::full_like(*x, def.value()));
      return;
    }
    const at::Tensor& r = (*results)[next++];
    if (r.defined()) out->append(key, r);
  }

  // Returns the built level (build phase) or nullopt (collect phase).
  std::optional<TensorDict> walk(const TensorDictBase* a, const TensorDictBase* b, const KeyChain& prefix) {
    std::optional<LevelBuilder> out;
    if (!collect) {
      const TensorDictBase& shape_of = a ? *a : *b;
      out.emplace(detail::nested_batch(new_root, shape_of.batch_size(), a ? a_root_dims : b_root_dims),
                  shape_of.device(), shape_of.num_entries());
    }
    LevelBuilder* builder = out ? &*out : nullptr;
    size_t matched = 0;
    if (a != nullptr) {
      // In-memory entries are matched in place (entry_in): no handle copied per key.
      size_t position = 0;  // the key's place in `a`: where a `b` built alike holds it too
      const std::optional<detail::AlignedLevel> b_aligned = b ? std::optional<detail::AlignedLevel>(*b) : std::nullopt;
      a->for_each([&](const std::string& key, const Entry& ea) {
        const size_t at = position++;
        Entry fetched;
        const Entry* eb = nullptr;
        if (b != nullptr) {
          eb = b_aligned->at(key, at, fetched);
          if (eb != nullptr) {
            ++matched;
          } else if (def.kind() == BinaryDefault::Kind::None) {
            throw_mismatch(*a, *b, /*first_has_extra=*/true, prefix);
          } else if (def.kind() == BinaryDefault::Kind::Intersection) {
            return;
          }
        }
        entry(key, builder, &ea, eb, prefix);
      });
    }
    if (b != nullptr && (a == nullptr || matched != b->num_entries())) {
      if (a != nullptr && def.kind() == BinaryDefault::Kind::None && !ignore_extra_rhs) {
        throw_mismatch(*a, *b, /*first_has_extra=*/false, prefix);
      }
      if (def.kind() == BinaryDefault::Kind::Value) {
        b->for_each([&](const std::string& key, const Entry& eb) {
          if (a != nullptr && a->has(key)) return;
          entry(key, builder, nullptr, &eb, prefix);
        });
      }
    }
    if (!out) return std::nullopt;
    return out->finish();
  }

  void entry(const std::string& key, LevelBuilder* out, const Entry* ea, const Entry* eb, const KeyChain& prefix) {
    const Entry& any = ea ? *ea : *eb;
    if (ea && eb && ea->kind() != eb->kind() && !(ea->is_non_tensor() || eb->is_non_tensor())) {
      TD_THROW(TypeError, "cannot combine the entries at ", prefix.child_path(key).repr(), ": the first tensordict holds ",
               kind_name(ea->kind()), " and the second ", kind_name(eb->kind()));
    }
    switch (any.kind()) {
      case Entry::Kind::Tensor:
        leaf(key, out, ea ? &ea->tensor_unchecked() : nullptr, eb ? &eb->tensor_unchecked() : nullptr, prefix);
        break;
      case Entry::Kind::TensorDict: {
        std::optional<TensorDict> child = walk(ea ? ea->tensordict_unchecked().impl() : nullptr,
                                               eb ? eb->tensordict_unchecked().impl() : nullptr, prefix.child(key));
        if (out && !(filter_empty && child->num_keys() == 0)) out->append(key, std::move(*child));
        break;
      }
      case Entry::Kind::NonTensor:
        if (out) out->append(key, any);
        break;
      case Entry::Kind::Undefined:
        break;
    }
  }
};

}  // namespace

void match_leaves(const TensorDict& a, const TensorDict& b, const BinaryDefault& default_, MatchedLeaves& out) {
  PairWalker w(default_);
  w.collect = &out;
  w.ignore_extra_rhs = out.ignore_extra_rhs;
  w.walk(a.impl(), b.impl(), KeyChain());
}

TensorDict rebuild_pair(const TensorDict& a, const TensorDict& b, const BinaryDefault& default_, LeafList results,
                        c10::IntArrayRef batch_size, bool filter_empty) {
  if (default_.kind() == BinaryDefault::Kind::None && a.batch_size() == b.batch_size() &&
      a.batch_size() == batch_size) {
    // Strictly matched (match_leaves raised unless both hold the same keys) at one batch size:
    // the result is shaped like `a` alone, so `b` is not walked a second time.
    RebuildOptions options;
    options.filter_empty = filter_empty;
    return rebuild(*a.impl(), std::move(results), options);
  }
  PairWalker w(default_);
  w.results = &results;
  w.new_root = batch_size;
  w.a_root_dims = a.batch_size().size();
  w.b_root_dims = b.batch_size().size();
  w.filter_empty = filter_empty;
  return *w.walk(a.impl(), b.impl(), KeyChain());
}

namespace {

struct NotZipped {};  // zip_leaves met what the general path handles

// One level of zip_leaves: a's structure (map_level), each leaf paired with b's at its position.
struct LeafZipper {
  FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn;
  bool filter_empty;
  const c10::StorageImpl* first_storage = nullptr;
  size_t leaves = 0;

  TensorDict level(const TensorDictBase& a, const TensorDictBase& b) {
    const detail::AlignedLevel b_aligned(b);
    size_t position = 0;
    TensorDict out = detail::map_level(
        a, a.batch_size(), a.device(),
        [&](const std::string& key, const at::Tensor& x) {
          const Entry* eb = pair_of(b_aligned, key, position++, EntryKind::Tensor);
          const at::Tensor& y = eb->tensor_unchecked();
          if (!x.is_cpu() || !y.is_cpu()) throw NotZipped();  // foreach may pay off there
          // Two first leaves over one storage may be a packed tensordict's (one kernel, which the
          // general path tries): given up before the second leaf is computed.
          const c10::StorageImpl* storage = x.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
          if (++leaves == 1) first_storage = storage;
          else if (leaves == 2 && storage == first_storage) throw NotZipped();
          try {
            return fn(x, y);
          } catch (...) {
            throw NotZipped();  // the general path names the key
          }
        },
        [&](const std::string& key, const TensorDict& child) {
          const Entry* eb = pair_of(b_aligned, key, position++, EntryKind::TensorDict);
          TensorDict r = level(*child.impl(), *eb->tensordict_unchecked().impl());
          if (filter_empty && r.num_keys() == 0) return std::optional<TensorDict>();
          return std::optional<TensorDict>(std::move(r));
        },
        [&](const std::string&, const NonTensorData&) -> NonTensorData { throw NotZipped(); });
    if (position != b.num_entries()) throw NotZipped();  // keys only b has
    return out;
  }

  static const Entry* pair_of(const detail::AlignedLevel& b, const std::string& key, size_t position, EntryKind kind) {
    Entry unused;  // b is in memory or a snapshot of it: nothing is fetched
    const Entry* eb = b.at(key, position, unused);
    if (eb == nullptr || eb->kind() != kind || unused.defined()) throw NotZipped();
    return eb;
  }
};

}  // namespace

namespace {
// The first tensor leaf of `td` (depth first), or nullptr.
const at::Tensor* first_leaf(const TensorDictBase& td) {
  const at::Tensor* found = nullptr;
  td.for_each([&](const std::string&, const Entry& e) {
    if (found != nullptr) return;
    if (e.is_tensor()) found = &e.tensor_unchecked();
    else if (e.is_tensordict()) found = first_leaf(*e.tensordict_unchecked().impl());
  });
  return found;
}
}  // namespace

std::optional<TensorDict> zip_leaves(const TensorDict& a, const TensorDict& b,
                                     FunctionRef<at::Tensor(const at::Tensor&, const at::Tensor&)> fn,
                                     bool filter_empty) {
  if (a.batch_size() != b.batch_size() || !a.impl()->entries_in_memory() || !b.impl()->entries_in_memory())
    return std::nullopt;
  // A first leaf in a larger storage may be part of a packed storage or of a run (one kernel, or
  // one a run, which the general path tries): left to it before the walk, where giving up throws.
  if (const at::Tensor* x = first_leaf(*a.impl());
      x != nullptr && x->has_storage() &&
      x->storage().nbytes() != static_cast<size_t>(x->numel()) * x->element_size())
    return std::nullopt;
  LeafZipper zipper{fn, filter_empty};
  try {
    return zipper.level(*a.impl(), *b.impl());
  } catch (const NotZipped&) {
    return std::nullopt;
  }
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

at::Tensor AlignedTensor::operand_of_rank(int64_t leaf_dims) const {
  if (zero_dim_) return expanded_;
  const int64_t event_dims = leaf_dims - root_dims_;
  if (event_dims <= 0) return expanded_;
  c10::SmallVector<int64_t, 8> shape(batch_.begin(), batch_.end());
  shape.append(static_cast<size_t>(event_dims), 1);
  return expanded_.view(shape);
}

at::Tensor AlignedTensor::group_operand(int64_t leaf_dims) const {
  if (zero_dim_) return expanded_;
  if (!expanded_.is_contiguous() || expanded_.requires_grad() || expanded_.is_inference())
    return operand_of_rank(leaf_dims).unsqueeze(0);
  // [1, batch..., 1 per event dim] with the strides operand_of_rank's view and unsqueeze(0)
  // would give a contiguous operand, built directly: two dispatcher calls less a group.
  c10::SmallVector<int64_t, 8> sizes{1};
  sizes.append(batch_.begin(), batch_.end());
  if (leaf_dims > root_dims_) sizes.append(static_cast<size_t>(leaf_dims - root_dims_), 1);
  c10::SmallVector<int64_t, 8> strides(sizes.size());
  int64_t step = 1;
  for (size_t d = sizes.size(); d-- > 1;) {
    strides[d] = step;
    step *= sizes[d];
  }
  strides[0] = step;  // unsqueeze(0): the size times the stride of the dim it goes before
  return detail::strided_view(expanded_, sizes, strides, expanded_.storage_offset());
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

bool foreach_pays(const LeafList& leaves) {
  return !leaves.empty() && !leaves.front().is_cpu() && !needs_autograd(leaves) && !detail::forward_ad_open();
}

void rethrow_leaf_error(const char* op, FunctionRef<NestedKey()> key) {
  try {
    throw;
  } catch (const c10::Error& e) {
    TD_THROW(RuntimeError, op, " failed for key ", key().repr(), ": ", e.what_without_backtrace());
  } catch (const std::runtime_error& e) {
    if (typeid(e) != typeid(std::runtime_error)) throw;  // ours, or a type of the callable's own
    TD_THROW(RuntimeError, op, " failed for key ", key().repr(), ": ", e.what());
  }
}

bool foreach_inplace_safe(const LeafList& self, const LeafList& other) {
  if (!foreach_pays(self) || needs_autograd(other)) return false;
  for (size_t i = 0; i < self.size(); ++i) {
    const at::Tensor& x = self[i];
    const at::Tensor& y = other[i];
    if (x.scalar_type() != y.scalar_type() || !at::isFloatingType(x.scalar_type()) || x.sizes() != y.sizes() ||
        x.device() != y.device()) {
      return false;
    }
  }
  return true;
}

TensorDict keep_lock(TensorDict out, const TensorDict& src) {
  if (src.is_locked() && !out.is_locked()) out.lock_();  // one built locked is already (nested levels too)
  return out;
}

}  // namespace ops
}  // namespace tensordict
