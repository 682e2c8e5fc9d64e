#include "backends/table_backend.h"

#include "backends/in_memory/in_memory.h"

namespace tensordict {

namespace {
constexpr StoragePolicy kTablePolicy{/*leaves_alias_storage=*/true, /*entries_in_memory=*/true};
}  // namespace

TableBackend::TableBackend(c10::IntArrayRef batch_size, std::optional<at::Device> device, size_t capacity)
    : TensorDictBase(batch_size, device, kTablePolicy), table_(in_memory::make_level(batch_size, device, capacity)) {}

Entry TableBackend::get(std::string_view key) const { return table_->get(key); }

void TableBackend::insert_or_assign(std::string_view key, Entry value) {
  bump_layout_version();
  table_->insert_or_assign(key, std::move(value));
}

void TableBackend::erase(std::string_view key) {
  bump_layout_version();
  table_->erase(key);
}

bool TableBackend::erase_if_present(std::string_view key) {
  bump_layout_version();
  return table_->erase_if_present(key);
}

void TableBackend::clear() {
  bump_layout_version();
  table_->clear();
}

void TableBackend::rename(std::string_view from, std::string_view to) {
  bump_layout_version();
  table_->rename(from, to);
}

void TableBackend::set_batch_size(c10::IntArrayRef batch_size) {
  table_->set_batch_size(batch_size);
  TensorDictBase::set_batch_size(batch_size);
}

void TableBackend::release_resources() {
  table_.reset();
  TensorDictBase::release_resources();
}

}  // namespace tensordict
