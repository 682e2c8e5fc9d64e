// share_memory_ (Python's TensorDictBase.share_memory_): every CPU leaf's storage moves into an
// anonymous MAP_SHARED mapping, in place. The StorageImpl keeps its identity, so every tensor and
// view on it sees the shared pages, and a process forked afterwards shares them with this one:
// writes on either side are seen by the other (tests/contract/shared_memory_test.cpp).

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include <ATen/ATen.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "core/validate.h"

namespace tensordict {

namespace {

struct SharedMapping {
  void* base;
  size_t size;
};

void unmap_shared(void* context) {
  auto* mapping = static_cast<SharedMapping*>(context);
  if (mapping->size != 0) ::munmap(mapping->base, mapping->size);
  delete mapping;
}

// Moves one storage into shared memory (once: a storage shared already keeps its mapping).
void share_storage(const at::Tensor& t) {
  if (!t.defined() || !t.is_cpu() || !t.has_storage()) return;
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (storage->data_ptr().get_deleter() == &unmap_shared) return;
  const size_t nbytes = storage->nbytes();
  void* base = nullptr;
  if (nbytes != 0) {
    base = ::mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    TD_CHECK(base != MAP_FAILED, StorageError, "share_memory_: cannot map ", nbytes, " bytes of shared memory: ",
             std::strerror(errno));
    std::memcpy(base, storage->data_ptr().get(), nbytes);
  }
  // The old buffer is freed when the returned DataPtr goes.
  storage->set_data_ptr(at::DataPtr(base, new SharedMapping{base, nbytes}, &unmap_shared, at::Device(at::kCPU)));
}

void share_tree(const TensorDict& td) {
  if (LazyStackedTensorDict::is_lazy_stack(td)) {
    // A lazy stack's reads are new stacked tensors: its members hold the storage.
    for (const TensorDict& member : LazyStackedTensorDict::from(td).members()) share_tree(member);
    return;
  }
  if (!td.impl()->leaves_alias_storage()) {
    TD_THROW(NotImplementedError, td.type_name(),
             " cannot share_memory_: its reads are copies of what the backend stores, so there is no memory to share");
  }
  for (const auto& [key, entry] : td.items()) {
    if (entry.is_tensor()) share_storage(entry.tensor_unchecked());
    if (entry.is_tensordict()) share_tree(entry.tensordict_unchecked());
  }
}

void mark_shared(const TensorDict& td) {
  td.impl()->set_shared(true);
  for (const auto& [key, entry] : td.items())
    if (entry.is_tensordict()) mark_shared(entry.tensordict_unchecked());
}

}  // namespace

TensorDict& TensorDict::share_memory_() {
  TD_CHECK(!is_memmap(), StorageError, "memmap and shared memory are mutually exclusive features.");
  // CUDA memory is shared between processes through CUDA IPC already (Python leaves it too).
  if (device() && device()->is_cuda()) return *this;
  share_tree(*this);
  mark_shared(*this);
  return lock_();
}

}  // namespace tensordict
