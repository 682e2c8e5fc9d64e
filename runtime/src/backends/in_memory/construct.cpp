// The in-memory level of a TensorDict constructor, and the in-place writes of a leaf by update
// and index_put_.

#include <typeinfo>

#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "backends/in_memory/in_memory.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "core/validate.h"

namespace tensordict {
namespace in_memory {

namespace {

void fill(TensorDictImpl& impl, const TensorDict::Item* begin, const TensorDict::Item* end) {
  // A 128-bit filter on the hash's top 7 bits, kept in two registers (a table in memory would
  // chain every key's check on the previous key's store): a key whose bit is clear cannot be a
  // duplicate, so the slot scan only runs on a filter collision.
  uint64_t seen_low = 0;
  uint64_t seen_high = 0;
  for (const TensorDict::Item* it = begin; it != end; ++it) {
    const std::string& key = it->first;
    const uint32_t hash = key_hash(key);
    const uint64_t bit = uint64_t{1} << ((hash >> 25) & 63);
    const uint64_t low_bit = (hash >> 31) ? 0 : bit;
    const uint64_t high_bit = bit ^ low_bit;
    if ((seen_low & low_bit) | (seen_high & high_bit)) {
      TD_CHECK(impl.find_slot(key, hash) < 0, ValueError, "duplicate key ", NestedKey(key).repr(),
               " in TensorDict constructor");
    }
    seen_low |= low_bit;
    seen_high |= high_bit;
    const EntryInit& init = it->second;
    if (init.is_nested_list()) {
      const auto& nested = init.nested();
      auto child = TensorDictImpl::make(impl.batch_size(), impl.device(), nested.size());
      fill(*child, nested.data(), nested.data() + nested.size());
      impl.append_unchecked(key, hash, TensorDict(std::move(child)));
    } else if (init.entry().is_tensor()) {
      const at::Tensor& value = init.entry().tensor_unchecked();
      if (detail::storable_as_is(impl, value)) {
        impl.append_unchecked(key, hash, value);
      } else {
        impl.append_unchecked(key, hash, detail::prepare_tensor(impl, key, value));
      }
    } else {
      impl.append_unchecked(key, hash, detail::prepare_entry(impl, key, init.entry()));
    }
  }
}

}  // namespace

c10::intrusive_ptr<TensorDictBase> make_level(c10::IntArrayRef batch_size, std::optional<at::Device> device,
                                              size_t capacity) {
  return TensorDictImpl::make(batch_size, device, capacity);
}

c10::intrusive_ptr<TensorDictBase> make_from_items(c10::ArrayRef<TensorDict::Item> items,
                                                   c10::IntArrayRef batch_size, std::optional<at::Device> device) {
  for (int64_t s : batch_size) TD_CHECK(s >= 0, ValueError, "batch size ", batch_size, " has a negative size");
  auto impl = TensorDictImpl::make(batch_size, device, items.size());
  fill(*impl, items.begin(), items.end());
  return impl;
}

bool assign_leaf_at(TensorDictBase& dest, std::string_view key, size_t position, const at::Tensor& value) {
  if (typeid(dest) != typeid(TensorDictImpl)) return false;
  return static_cast<TensorDictImpl&>(dest).assign_leaf_at(key, position, value);
}

bool write_leaf_at(TensorDictBase& dest, std::string_view key, size_t position, const BatchIndex& index,
                   const at::Tensor& value) {
  if (typeid(dest) != typeid(TensorDictImpl)) return false;
  const Entry* here = static_cast<const TensorDictImpl&>(dest).peek_at(key, position);
  if (here == nullptr || !here->is_tensor()) return false;
  index.assign(here->tensor_unchecked(), value);  // the leaf aliases the level's storage
  return true;
}

}  // namespace in_memory
}  // namespace tensordict
