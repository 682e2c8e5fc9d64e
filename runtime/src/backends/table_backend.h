#pragma once
// TableBackend: a backend that keeps its entries in an in-memory level it owns and forwards the
// storage primitives to it. Memory-mapped and consolidated levels are such backends: their key
// tables are in memory like any TensorDict's, and what differs is what their leaves map (a
// directory of files, one storage), which the subclass adds. Leaves alias storage and entries
// live in memory, so every fast path of the in-memory backend applies.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_base.h>

namespace tensordict {

class TableBackend : public TensorDictBase {
 public:
  TableBackend(c10::IntArrayRef batch_size, std::optional<at::Device> device, size_t capacity = 0);

  size_t num_entries() const override { return table_->num_entries(); }
  std::vector<std::string> keys() const override { return table_->keys(); }
  bool has(std::string_view key) const override { return table_->has(key); }
  Entry get(std::string_view key) const override;
  const Entry* peek(std::string_view key) const override { return table_->peek(key); }
  const Entry* peek_at(std::string_view key, size_t position) const override { return table_->peek_at(key, position); }
  EntryKind kind(std::string_view key) const override { return table_->kind(key); }
  void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const override { table_->for_each(fn); }
  void for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const override {
    table_->for_each_key(fn);
  }
  // Every change of the table bumps this level's layout version: addresses peek() gave out
  // are only valid while it holds.
  void insert_or_assign(std::string_view key, Entry value) override;
  void erase(std::string_view key) override;
  bool erase_if_present(std::string_view key) override;
  void rename(std::string_view from, std::string_view to) override;
  void clear() override;
  void set_batch_size(c10::IntArrayRef batch_size) override;
  void release_resources() override;

  /// The in-memory level holding the entries (read by in_memory::intact_packed_storage).
  const TensorDictBase& table() const { return *table_; }

 protected:
  /// Replaces the (empty) table with `table`, a level of this batch size and device built whole
  /// (a LevelBuilder's, which can hold lazy leaves: Note [Lazy leaves]).
  void adopt_table(c10::intrusive_ptr<TensorDictBase> table) { table_ = std::move(table); }

 private:
  c10::intrusive_ptr<TensorDictBase> table_;
};

}  // namespace tensordict
