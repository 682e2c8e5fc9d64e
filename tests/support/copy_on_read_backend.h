#pragma once
// The proving backend: a test-only TensorDictBase written against the installed public headers
// alone. It keeps its tensors privately and returns a fresh copy from every read, as a remote
// store (HDF5, Redis) does, and counts its calls. Every write must therefore reach it through
// write_, write_at_ or write_many_: a core operation that changed a tensor handed out by `get`
// instead would lose the write, and the contract suite, run on this backend, would see it.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/batch_index.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/tensor_dict_base.h>

namespace testing_backends {

using tensordict::BatchIndex;
using tensordict::Entry;
using tensordict::EntryKind;
using tensordict::NonTensorData;
using tensordict::TensorDict;
using tensordict::TensorDictBase;

/// Calls a tree of CopyOnRead levels received, shared by all its levels.
struct CallCounts {
  int gets = 0;           ///< get() of a tensor leaf: one read each
  int for_each = 0;       ///< for_each(): reads every leaf of a level
  int snapshots = 0;      ///< snapshot(): one batched read of a whole tree
  int writes = 0;         ///< write_()
  int indexed_writes = 0; ///< write_at_()
  int batched_writes = 0; ///< write_many_()

  int reads() const { return gets + for_each + snapshots; }
};

class CopyOnRead final : public TensorDictBase {
 public:
  CopyOnRead(c10::IntArrayRef batch_size, std::optional<at::Device> device, std::shared_ptr<CallCounts> counts)
      : TensorDictBase(batch_size, device, tensordict::StoragePolicy{}), counts_(std::move(counts)) {}

  /// A copy of `reference` (its structure, values, batch sizes, device and lock) in this backend.
  static TensorDict from(const TensorDict& reference, std::shared_ptr<CallCounts> counts = nullptr) {
    if (!counts) counts = std::make_shared<CallCounts>();
    auto root = c10::make_intrusive<CopyOnRead>(reference.batch_size(), reference.device(), counts);
    root->copy_from(reference);
    TensorDict td(root);
    if (reference.is_locked()) td.lock_();
    return td;
  }
  /// The call counts of the tree `td` is the root of (it must be a CopyOnRead level).
  static CallCounts& counts(const TensorDict& td) { return *dynamic_cast<CopyOnRead&>(*td.impl()).counts_; }

  const char* type_name() const override { return "CopyOnReadTensorDict"; }

  size_t num_entries() const override { return slots_.size(); }
  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (const auto& s : slots_) out.push_back(s.key);
    return out;
  }
  bool has(std::string_view key) const override { return find(key) != nullptr; }
  EntryKind kind(std::string_view key) const override {
    const Slot* s = find(key);
    return s ? s->kind() : EntryKind::Undefined;
  }
  void for_each_key(tensordict::FunctionRef<void(const std::string&, EntryKind)> fn) const override {
    for (const auto& s : slots_) fn(s.key, s.kind());
  }
  Entry get(std::string_view key) const override {
    const Slot* s = find(key);
    if (s == nullptr) return Entry();
    if (s->tensor.defined()) ++counts_->gets;
    return read(*s);
  }
  void for_each(tensordict::FunctionRef<void(const std::string&, const Entry&)> fn) const override {
    ++counts_->for_each;
    for (const auto& s : slots_) fn(s.key, read(s));
  }
  void insert_or_assign(std::string_view key, Entry value) override {
    Slot* s = find(key);
    if (s == nullptr) {
      slots_.push_back(Slot{std::string(key), {}, {}, {}});
      s = &slots_.back();
    }
    store(*s, value);
    bump_layout_version();
  }
  void erase(std::string_view key) override {
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
      if (it->key == key) {
        slots_.erase(it);
        bump_layout_version();
        return;
      }
    }
  }
  void rename(std::string_view from, std::string_view to) override {
    if (Slot* s = find(from)) s->key = std::string(to);
    bump_layout_version();
  }

  // The last handle went: the entries go now, as tensor_dict_base.h asks of every backend (a
  // nested level's weak lock-parent reference keeps this object, and would keep them; ASan's
  // leak check found it).
  void release_resources() override {
    slots_.clear();
    TensorDictBase::release_resources();
  }

  TensorDict snapshot() const override {
    ++counts_->snapshots;
    return snapshot_level();
  }
  void write_(std::string_view key, const at::Tensor& value) override {
    ++counts_->writes;
    stored_tensor(key).copy_(value);
  }
  void write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) override {
    ++counts_->indexed_writes;
    index.assign(stored_tensor(key), value);
  }
  void write_many_(const TensorDict& values) override {
    ++counts_->batched_writes;
    write_level(values);
  }
  TensorDict make_child(std::string_view, c10::IntArrayRef batch_size) const override {
    return TensorDict(c10::make_intrusive<CopyOnRead>(batch_size, device(), counts_));
  }

 private:
  struct Slot {
    std::string key;
    at::Tensor tensor;                      // kept privately, never handed out
    c10::intrusive_ptr<CopyOnRead> child;   // a nested level of this backend
    std::optional<NonTensorData> non_tensor;
    EntryKind kind() const {
      return tensor.defined() ? EntryKind::Tensor : child ? EntryKind::TensorDict : EntryKind::NonTensor;
    }
  };

  template <typename Self>
  static auto* find_in(Self& self, std::string_view key) {
    decltype(&self.slots_.front()) found = nullptr;
    for (auto& s : self.slots_) {
      if (s.key == key) found = &s;
    }
    return found;
  }
  const Slot* find(std::string_view key) const { return find_in(*this, key); }
  Slot* find(std::string_view key) { return find_in(*this, key); }

  at::Tensor& stored_tensor(std::string_view key) {
    Slot* s = find(key);
    TD_CHECK(s != nullptr && s->tensor.defined(), KeyError, "CopyOnRead: no tensor leaf ", std::string(key));
    return s->tensor;
  }

  // A read hands out a fresh copy of a tensor, a handle to a nested level.
  static Entry read(const Slot& s) {
    if (s.tensor.defined()) return Entry(s.tensor.clone());
    if (s.child) return Entry(TensorDict(s.child));
    return Entry(*s.non_tensor);
  }

  // A write keeps a copy of the data, as a store would; a nested tensordict of another backend
  // becomes a level of this one.
  void store(Slot& s, const Entry& value) {
    s.tensor = at::Tensor();
    s.child.reset();
    s.non_tensor.reset();
    switch (value.kind()) {
      case EntryKind::Tensor: s.tensor = value.tensor_unchecked().detach().clone(); break;
      case EntryKind::TensorDict: {
        const TensorDict& td = value.tensordict_unchecked();
        if (auto* mine = dynamic_cast<CopyOnRead*>(td.impl()); mine && mine->counts_ == counts_) {
          s.child = c10::intrusive_ptr<CopyOnRead>::reclaim_copy(mine);
        } else {
          s.child = c10::make_intrusive<CopyOnRead>(td.batch_size(), td.device(), counts_);
          s.child->copy_from(td);
        }
        break;
      }
      case EntryKind::NonTensor: s.non_tensor = value.non_tensor(); break;
      case EntryKind::Undefined: break;
    }
  }

  void copy_from(const TensorDict& source) {
    source.impl()->for_each([&](const std::string& key, const Entry& e) {
      slots_.push_back(Slot{key, {}, {}, {}});
      store(slots_.back(), e);
    });
  }

  TensorDict snapshot_level() const {
    TensorDict out = TensorDict::empty_with(batch_size(), device());
    for (const auto& s : slots_) {
      if (s.tensor.defined()) out.set(s.key, s.tensor.clone());
      else if (s.child) out.set(s.key, tensordict::EntryInit(s.child->snapshot_level()));
      else out.set(s.key, tensordict::EntryInit(*s.non_tensor));
    }
    return out;
  }

  void write_level(const TensorDict& values) {
    values.impl()->for_each([&](const std::string& key, const Entry& e) {
      if (e.is_tensor()) {
        stored_tensor(key).copy_(e.tensor_unchecked());
      } else if (e.is_tensordict()) {
        Slot* s = find(key);
        TD_CHECK(s != nullptr && s->child, KeyError, "CopyOnRead: no nested level ", key);
        s->child->write_level(e.tensordict_unchecked());
      }
    });
  }

  std::vector<Slot> slots_;
  std::shared_ptr<CallCounts> counts_;
};

}  // namespace testing_backends
