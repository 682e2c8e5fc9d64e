// Locking (semantics 1.7): lock_ and unlock_ recurse; a child of a live locked parent cannot be
// unlocked.

#include <tensordict/tensor_dict.h>

#include <tensordict/entry.h>

namespace tensordict {

TensorDict& TensorDict::lock_() {
  impl_->set_locked(true);
  impl_->for_each_key([&](const std::string& key, EntryKind kind) {
    if (kind != EntryKind::TensorDict) return;
    TensorDict child = impl_->get(key).tensordict_unchecked();
    child.lock_();
    child.impl()->add_lock_parent(impl_);
  });
  return *this;
}

TensorDict& TensorDict::unlock_() {
  TD_CHECK(!impl_->has_locked_parent(), LockedError,
           "Cannot unlock a tensordict that is part of a locked graph. Unlock the root "
           "tensordict first. If the tensordict is part of multiple graphs, group the graphs "
           "under a common tensordict and unlock this root.");
  impl_->set_locked(false);
  impl_->for_each_key([&](const std::string& key, EntryKind kind) {
    if (kind != EntryKind::TensorDict) return;
    TensorDict child = impl_->get(key).tensordict_unchecked();
    child.impl()->remove_lock_parent(impl_.get());
    child.unlock_();
  });
  return *this;
}

}  // namespace tensordict
