// TensorDictBase: the defaults of the backend hooks (tensor_dict_base.h). Each is correct for
// any backend; one whose reads are copies (StoragePolicy::leaves_alias_storage false) reads
// through snapshot() and writes through write_(). put_at_'s default is in handle/indexing.cpp,
// next to index_put_, whose rules it implements.

#include <tensordict/tensor_dict_base.h>

#include <algorithm>

#include <ATen/ATen.h>

#include <tensordict/batch_index.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/in_memory.h"
#include "core/dim_names.h"
#include "core/format.h"
#include "core/plain_copy.h"
#include "core/structure_walk.h"

namespace tensordict {

namespace {
// "cuda" names the current CUDA device: kept as "cuda:N", the device its tensors report, so that
// comparing a leaf's device with the tensordict's holds (Python's to("cuda") gives cuda:0 too).
std::optional<at::Device> with_index(std::optional<at::Device> device) {
  if (!device || device->has_index() || device->is_cpu() || device->type() == at::kMeta) return device;
  try {
    return at::empty({0}, at::TensorOptions().device(*device)).device();
  } catch (const c10::Error&) {
    return device;  // no such device here: the first leaf moved there reports the error
  }
}
}  // namespace

TensorDictBase::TensorDictBase(c10::IntArrayRef batch_size, std::optional<at::Device> device, StoragePolicy policy)
    : batch_size_(batch_size.begin(), batch_size.end()), device_(with_index(device)), policy_(policy) {}

TensorDictBase::~TensorDictBase() = default;

void TensorDictBase::release_resources() { lock_parents_.clear(); }

void TensorDictBase::unsupported(const char* what, const char* why) const {
  TD_THROW(NotImplementedError, type_name(), " cannot ", what, ": ", why);
}

// ---- Reads ----------------------------------------------------------------------------------

const Entry* TensorDictBase::peek(std::string_view) const { return nullptr; }
const Entry* TensorDictBase::peek_at(std::string_view key, size_t) const { return peek(key); }

void TensorDictBase::insert_or_assign_at(std::string_view key, size_t, Entry value) {
  insert_or_assign(key, std::move(value));
}

EntryKind TensorDictBase::kind(std::string_view key) const { return get(key).kind(); }

void TensorDictBase::for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const {
  for_each([&](const std::string& key, const Entry& entry) { fn(key, entry.kind()); });
}

void TensorDictBase::for_each_key_nesting(FunctionRef<void(const std::string&, bool)> fn) const {
  for_each_key([&](const std::string& key, EntryKind kind) { fn(key, kind == EntryKind::TensorDict); });
}

TensorDict TensorDictBase::snapshot() const {
  return detail::map_level(
      *this, batch_size_, device_, [](const std::string&, const at::Tensor& t) { return t; },
      [](const std::string&, const TensorDict& child) { return std::optional<TensorDict>(child.impl()->snapshot()); },
      [](const std::string&, const NonTensorData& data) { return data; });
}

LeafMeta TensorDictBase::leaf_meta(std::string_view key) const {
  const at::Tensor t = get(key).tensor();
  return LeafMeta{BatchSize(t.sizes().begin(), t.sizes().end()), t.scalar_type(), t.device()};
}

std::string TensorDictBase::missing_key_note(std::string_view) const { return {}; }

void TensorDictBase::repr_parts(std::vector<std::string>&) const {}

// ---- Writes ---------------------------------------------------------------------------------

void TensorDictBase::write_(std::string_view key, const at::Tensor& value) {
  if (!leaves_alias_storage()) {
    unsupported("write a leaf in place", "the backend does not implement write_()");
  }
  Entry dest = get(key);
  dest.mutable_tensor().copy_(value);
}

void TensorDictBase::write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) {
  Entry dest = get(key);
  index.assign(dest.tensor(), value);
  // A copy was changed: it goes back whole.
  if (!leaves_alias_storage()) write_(key, dest.tensor_unchecked());
}

void TensorDictBase::write_non_tensor_(std::string_view key, const NonTensorData& value) {
  insert_or_assign(key, Entry(value));
}

void TensorDictBase::write_many_(const TensorDict& values) {
  // Where entries live in memory and alias the storage, each is found in place (first at the
  // position `values` lists it) and copied into, which is what write_ does after a lookup.
  const bool in_place = entries_in_memory() && leaves_alias_storage();
  size_t position = 0;
  values.impl()->for_each([&](const std::string& key, const Entry& entry) {
    const Entry* here = in_place ? peek_at(key, position) : nullptr;
    ++position;
    if (entry.is_tensor()) {
      if (here != nullptr && here->is_tensor()) {
        detail::copy_leaf_(here->tensor_unchecked(), entry.tensor_unchecked());
      } else {
        write_(key, entry.tensor_unchecked());
      }
    } else if (entry.is_tensordict()) {
      const TensorDict& values_below = entry.tensordict_unchecked();
      if (values_below.is_empty()) return;  // nothing to write there
      Entry child;  // the nested level where it is not found in place
      if (here == nullptr) {
        child = get(key);
        here = &child;
      }
      TD_CHECK(here->is_tensordict(), KeyError, type_name(), ": no nested tensordict at ", NestedKey(key).repr(),
               " to write into");
      here->tensordict_unchecked().impl()->write_many_(values_below);
    }
  });
}

// ---- Structure --------------------------------------------------------------------------------

bool TensorDictBase::erase_if_present(std::string_view key) {
  if (!has(key)) return false;
  erase(key);
  return true;
}

void TensorDictBase::clear() {
  for (const std::string& key : keys()) erase(key);
}

void TensorDictBase::move_to_end(std::string_view key) {
  Entry entry = get(key);
  erase(key);
  insert_or_assign(key, std::move(entry));
}

TensorDict TensorDictBase::make_child(std::string_view /*key*/, c10::IntArrayRef batch_size) const {
  return TensorDict(in_memory::make_level(batch_size, device_));
}

void TensorDictBase::set_batch_size(c10::IntArrayRef batch_size) {
  batch_size_.assign(batch_size.begin(), batch_size.end());
}

TensorDict TensorDictBase::index_ragged(c10::ArrayRef<at::indexing::TensorIndex>) const {
  TD_THROW(IndexError, type_name(), " has a ragged batch size ", detail::size_str(batch_size_),
           " but cannot index per member");
}

void TensorDictBase::put_ragged_(c10::ArrayRef<at::indexing::TensorIndex>, const TensorDict&) {
  TD_THROW(IndexError, type_name(), " has a ragged batch size ", detail::size_str(batch_size_),
           " but cannot write per member");
}

TensorDict TensorDictBase::index(const BatchIndex& index) const {
  if (!leaves_alias_storage()) return detail::named_snapshot(*this).impl()->index(index);
  // A nested level may have more batch dims than the indexed root: those follow unchanged.
  const BatchSize out_batch =
      detail::nested_batch(index.result_batch_size(), batch_size_, static_cast<size_t>(index.source_batch_dims()));
  return detail::map_level(
      *this, out_batch, device_, [&](const std::string&, const at::Tensor& t) { return index.apply(t); },
      [&](const std::string&, const TensorDict& child) { return std::optional<TensorDict>(child.impl()->index(index)); },
      [&](const std::string&, const NonTensorData& data) {
        return data.is_stack() ? data.with_ids(index.apply(data.ids())) : data;
      });
}

TensorDict TensorDictBase::map_batch(c10::IntArrayRef new_batch_size,
                                     FunctionRef<at::Tensor(const at::Tensor&)> fn) const {
  if (!leaves_alias_storage()) {
    TensorDict out = detail::named_snapshot(*this).impl()->map_batch(new_batch_size, fn);
    if (locked_) out.lock_();
    return out;
  }
  const size_t old_dims = batch_size_.size();
  TensorDict out = detail::map_level(
      *this, new_batch_size, device_, [&](const std::string&, const at::Tensor& t) { return fn(t); },
      [&](const std::string&, const TensorDict& child) {
        // A nested tensordict may have more batch dims than its parent: it keeps the extra ones.
        const TensorDictBase* c = child.impl();
        return std::optional<TensorDict>(c->map_batch(detail::nested_batch(new_batch_size, c->batch_size(), old_dims), fn));
      },
      [&](const std::string&, const NonTensorData& data) { return data.is_stack() ? data.with_ids(fn(data.ids())) : data; });
  out.impl()->set_locked(locked_);
  return out;
}

namespace {

// What rearrange_batch does to every leaf's leading `old_dims` dims, worked out once from
// `source` (it does not depend on the leaf): the dropped dims squeezed (highest first), the kept
// ones permuted into place (no permute for the identity), the new ones unsqueezed. Per leaf that
// leaves the view ops alone: `unsqueeze(0)` is one `unsqueeze` a leaf, as the hand-written loop.
class BatchRearrangement {
 public:
  BatchRearrangement(c10::IntArrayRef source, int64_t old_dims) {
    c10::SmallVector<int64_t, 8> compact(static_cast<size_t>(old_dims), -1);  // old dim -> kept position
    for (int64_t s : source) {
      if (s >= 0) compact[static_cast<size_t>(s)] = 0;
    }
    for (auto& c : compact) {
      if (c == 0) c = kept_++;
    }
    for (int64_t d = old_dims - 1; d >= 0; --d) {
      if (compact[static_cast<size_t>(d)] < 0) squeeze_.push_back(d);
    }
    bool identity = true;
    for (int64_t s : source) {
      if (s < 0) continue;
      identity = identity && compact[static_cast<size_t>(s)] == static_cast<int64_t>(perm_.size());
      perm_.push_back(compact[static_cast<size_t>(s)]);
    }
    if (identity) perm_.clear();
    for (size_t j = 0; j < source.size(); ++j) {
      if (source[j] < 0) unsqueeze_.push_back(static_cast<int64_t>(j));
    }
  }

  at::Tensor apply(const at::Tensor& t) const {
    // The first view op reads `t` itself: a copy of the handle first would cost each leaf an
    // atomic increment and decrement more than the hand-written loop.
    at::Tensor x;
    const auto last = [&]() -> const at::Tensor& { return x.defined() ? x : t; };
    for (int64_t d : squeeze_) x = last().squeeze(d);
    if (!perm_.empty()) {
      c10::SmallVector<int64_t, 16> full(perm_.begin(), perm_.end());
      for (int64_t d = kept_; d < last().dim(); ++d) full.push_back(d);  // the leaf's own dims stay last
      x = last().permute(full);
    }
    for (int64_t j : unsqueeze_) x = last().unsqueeze(j);
    if (x.defined()) return x;  // moved out, not copied
    return t;
  }

 private:
  c10::SmallVector<int64_t, 8> squeeze_;
  c10::SmallVector<int64_t, 8> perm_;
  c10::SmallVector<int64_t, 8> unsqueeze_;
  int64_t kept_ = 0;
};

}  // namespace

TensorDict TensorDictBase::rearrange_batch(c10::IntArrayRef source) const {
  BatchSize new_batch;
  for (int64_t s : source) new_batch.push_back(s < 0 ? 1 : batch_size_[static_cast<size_t>(s)]);
  const BatchRearrangement rearrangement(source, batch_dims());
  return map_batch(new_batch, [&](const at::Tensor& t) { return rearrangement.apply(t); });
}

TensorDict TensorDictBase::map_leaves(FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                      std::optional<at::Device> device) const {
  if (!leaves_alias_storage()) return detail::named_snapshot(*this).impl()->map_leaves(fn, device);
  return detail::map_level(
      *this, batch_size_, device, [&](const std::string&, const at::Tensor& t) { return fn(t); },
      [&](const std::string&, const TensorDict& child) {
        return std::optional<TensorDict>(child.impl()->map_leaves(fn, device));
      },
      [](const std::string&, const NonTensorData& data) { return data; });
}

// ---- Lock parents -----------------------------------------------------------------------------

void TensorDictBase::add_lock_parent(const c10::intrusive_ptr<TensorDictBase>& parent) {
  lock_parents_.emplace_back(parent);
}

void TensorDictBase::remove_lock_parent(TensorDictBase* parent) {
  lock_parents_.erase(std::remove_if(lock_parents_.begin(), lock_parents_.end(),
                                     [&](const c10::weak_intrusive_ptr<TensorDictBase>& w) {
                                       auto p = w.lock();
                                       return !p || p.get() == parent;
                                     }),
                      lock_parents_.end());
}

bool TensorDictBase::has_locked_parent() const {
  for (const auto& w : lock_parents_) {
    auto p = w.lock();
    if (p && p->is_locked()) return true;
  }
  return false;
}

}  // namespace tensordict
