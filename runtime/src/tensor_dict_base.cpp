#include <tensordict/tensor_dict_base.h>

#include <algorithm>

#include <ATen/ATen.h>

#include <tensordict/batch_index.h>
#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/tensor_dict_impl.h>

namespace tensordict {

TensorDictBase::TensorDictBase(c10::IntArrayRef batch_size, std::optional<at::Device> device)
    : batch_size_(batch_size.begin(), batch_size.end()), device_(device) {}

TensorDictBase::~TensorDictBase() = default;

TensorDict TensorDictBase::make_child(std::string_view /*key*/,
                                      c10::IntArrayRef batch_size) const {
  return TensorDict(c10::make_intrusive<TensorDictImpl>(batch_size, device_));
}

void TensorDictBase::write_(std::string_view key, const at::Tensor& value) {
  Entry dest = get(key);
  dest.mutable_tensor().copy_(value);
}

void TensorDictBase::write_at_(std::string_view key, const BatchIndex& index,
                               const at::Tensor& value) {
  Entry dest = get(key);
  index.assign(dest.tensor(), value);
}

void TensorDictBase::set_batch_size(c10::IntArrayRef batch_size) {
  batch_size_.assign(batch_size.begin(), batch_size.end());
}

TensorDict TensorDictBase::index(const BatchIndex& index) const {
  // A nested level may have more batch dims than the indexed root: those follow unchanged.
  BatchSize out_batch(index.result_batch_size().begin(), index.result_batch_size().end());
  if (static_cast<int64_t>(batch_size_.size()) > index.source_batch_dims()) {
    out_batch.append(batch_size_.begin() + index.source_batch_dims(), batch_size_.end());
  }
  auto out = TensorDictImpl::make(out_batch, device_, num_entries());
  for_each([&](const std::string& key, const Entry& entry) {
    switch (entry.kind()) {
      case Entry::Kind::Tensor:
        out->append_unchecked(key, index.apply(entry.tensor_unchecked()));
        break;
      case Entry::Kind::TensorDict:
        out->append_unchecked(key, entry.tensordict_unchecked().impl()->index(index));
        break;
      case Entry::Kind::NonTensor: {
        const NonTensorData& data = entry.non_tensor();
        out->append_unchecked(key, data.is_stack() ? data.with_ids(index.apply(data.ids())) : data);
        break;
      }
      case Entry::Kind::Undefined:
        break;
    }
  });
  return TensorDict(std::move(out));
}

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

namespace tensordict {

TensorDict TensorDictBase::map_batch(c10::IntArrayRef new_batch_size,
                                     FunctionRef<at::Tensor(const at::Tensor&)> fn) const {
  auto out = TensorDictImpl::make(new_batch_size, device_, num_entries());
  const size_t old_dims = batch_size_.size();
  for_each([&](const std::string& key, const Entry& entry) {
    switch (entry.kind()) {
      case Entry::Kind::Tensor:
        out->append_unchecked(key, fn(entry.tensor_unchecked()));
        break;
      case Entry::Kind::TensorDict: {
        // A nested tensordict may have more batch dims than its parent: keep the extra ones.
        const TensorDictBase* child = entry.tensordict_unchecked().impl();
        BatchSize child_batch(new_batch_size.begin(), new_batch_size.end());
        c10::IntArrayRef extra = child->batch_size().slice(old_dims);
        child_batch.append(extra.begin(), extra.end());
        out->append_unchecked(key, child->map_batch(child_batch, fn));
        break;
      }
      case Entry::Kind::NonTensor: {
        const NonTensorData& data = entry.non_tensor();
        out->append_unchecked(key, data.is_stack() ? data.with_ids(fn(data.ids())) : data);
        break;
      }
      case Entry::Kind::Undefined:
        break;
    }
  });
  out->set_locked(locked_);
  return TensorDict(std::move(out));
}

TensorDict TensorDictBase::map_leaves(FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                      std::optional<at::Device> device) const {
  auto out = TensorDictImpl::make(batch_size_, device, num_entries());
  for_each([&](const std::string& key, const Entry& entry) {
    switch (entry.kind()) {
      case Entry::Kind::Tensor:
        out->append_unchecked(key, fn(entry.tensor_unchecked()));
        break;
      case Entry::Kind::TensorDict:
        out->append_unchecked(key, entry.tensordict_unchecked().impl()->map_leaves(fn, device));
        break;
      case Entry::Kind::NonTensor:
        out->append_unchecked(key, entry);
        break;
      case Entry::Kind::Undefined:
        break;
    }
  });
  return TensorDict(std::move(out));
}

}  // namespace tensordict
