#include <tensordict/entry.h>

#include <ATen/ATen.h>

#include <tensordict/errors.h>

namespace tensordict {

// The box gives non-tensor data an intrusive count, so an Entry holds it as one pointer.
struct Entry::NonTensorBox : c10::intrusive_ptr_target {
  explicit NonTensorBox(NonTensorData d) : data(std::move(d)) {}
  const NonTensorData data;
};

Entry::Entry(NonTensorData data)
    : non_tensor_(c10::make_intrusive<NonTensorBox>(std::move(data)).release()),
      kind_(Kind::NonTensor) {}

void Entry::destroy_non_tensor() noexcept {
  // Takes the reference back; the box goes with the last entry holding it.
  c10::intrusive_ptr<NonTensorBox>::reclaim(non_tensor_);
}

void Entry::copy_non_tensor(const Entry& other) {
  non_tensor_ = c10::intrusive_ptr<NonTensorBox>::reclaim_copy(other.non_tensor_).release();
}

const char* kind_name(Entry::Kind kind) {
  switch (kind) {
    case Entry::Kind::Undefined: return "nothing";
    case Entry::Kind::Tensor: return "a tensor";
    case Entry::Kind::TensorDict: return "a TensorDict";
    case Entry::Kind::NonTensor: return "non-tensor data";
  }
  return "?";
}

const at::Tensor& Entry::tensor() const {
  TD_CHECK(is_tensor(), TypeError, "expected a tensor entry but it holds ", kind_name(kind()));
  return tensor_;
}
at::Tensor& Entry::mutable_tensor() {
  TD_CHECK(is_tensor(), TypeError, "expected a tensor entry but it holds ", kind_name(kind()));
  return tensor_;
}
const TensorDict& Entry::tensordict() const {
  TD_CHECK(is_tensordict(), TypeError, "expected a TensorDict entry but it holds ",
           kind_name(kind()));
  return tensordict_;
}
const NonTensorData& Entry::non_tensor() const {
  TD_CHECK(is_non_tensor(), TypeError, "expected a non-tensor entry but it holds ",
           kind_name(kind()));
  return non_tensor_->data;
}

EntryInit::EntryInit(int value) : entry_(at::scalar_tensor(int64_t{value}, at::kLong)) {}
EntryInit::EntryInit(int64_t value) : entry_(at::scalar_tensor(value, at::kLong)) {}
EntryInit::EntryInit(double value)
    : entry_(at::scalar_tensor(value, at::TensorOptions().dtype(at::get_default_dtype()))) {}
EntryInit::EntryInit(bool value) : entry_(at::scalar_tensor(value, at::kBool)) {}

}  // namespace tensordict
