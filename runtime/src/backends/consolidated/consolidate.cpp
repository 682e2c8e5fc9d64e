// consolidate, to_bytes / from_bytes (docs/compatibility.md, "Consolidated").

#include <tensordict/backends/consolidated.h>

#include <array>
#include <cstring>
#include <string_view>
#include <typeinfo>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "backends/consolidated/dtype_groups.h"
#include "backends/consolidated/metadata_layout.h"
#include "backends/consolidated/metadata_reader.h"
#include "backends/consolidated/rebuild.h"
#include "backends/consolidated/views_from_tree.h"
#include "backends/in_memory/level_builder.h"
#include "backends/lazy_stack/lazy_stack_impl.h"
#include "backends/table_backend.h"
#include "core/file_io.h"
#include "core/forward_ad.h"
#include "core/plain_copy.h"
#include "core/strided_view.h"
#include "core/format.h"

namespace tensordict {

using namespace detail;
using consolidated::DtypeGroups;
using consolidated::is_metadata_field;
using consolidated::padded_bytes;
using consolidated::kLazyClass;
using consolidated::LeafFlats;
using consolidated::build_lazy_stack;
using consolidated::fill_level;
using consolidated::level_batch;
using consolidated::level_class;
using consolidated::level_names;

namespace {

// The root of a consolidated tensordict: an in-memory key table whose leaves (and whose nested
// levels' leaves) view one uint8 storage, plus the metadata that rebuilds the views.
class ConsolidatedRoot final : public TableBackend {
 public:
  ConsolidatedRoot(c10::IntArrayRef batch_size, std::optional<at::Device> device, at::Tensor storage,
                   json::Value metadata)
      : TableBackend(batch_size, device), storage_(std::move(storage)), metadata_(std::move(metadata)) {}

  const char* type_name() const override { return "TensorDict"; }
  /// Takes `table` (built whole, with this batch size and device) as the root's entries.
  void set_table(const TensorDict& table) { adopt_table(table.impl_ptr()); }
  const at::Tensor& storage() const { return storage_; }
  const json::Value& metadata() const { return metadata_; }

  void release_resources() override {
    storage_ = at::Tensor();
    TableBackend::release_resources();
  }

  /// True while the tree is what the metadata describes: the same keys, batch sizes and
  /// non-tensor values, every tensor leaf still the view of the storage it was made as. Any
  /// change (a non-tensor write, keys set after unlock_) makes the fast paths below fall back.
  /// `untracked`: and no leaf is tracked by autograd (requires grad, or may carry a forward
  /// tangent), which a copy of the storage would not carry along as per-leaf copies do.
  bool matches_metadata(bool untracked = false) const;

  /// A move to another device copies the storage once and rebuilds the views on it.
  TensorDict map_leaves(FunctionRef<at::Tensor(const at::Tensor&)> fn, std::optional<at::Device> device) const override;

 private:
  /// This tree over `moved` (a copy of the storage): every leaf the view of `moved` it is of the
  /// storage, taken from the leaf itself rather than parsed again from the metadata.
  TensorDict rebased(const at::Tensor& moved, std::optional<at::Device> device) const;

  at::Tensor storage_;
  json::Value metadata_;
};

json::Value int_list(c10::IntArrayRef values) {
  json::Array out;
  out.reserve(values.size());
  for (int64_t v : values) out.emplace_back(v);
  return json::Value(std::move(out));
}

// A leaf's [dtype, shape, start, stop, pad], its values moved in (an initializer list copies).
json::Value leaf_spec(const at::Tensor& t, int64_t start, int64_t stop, int64_t pad) {
  json::Array spec;
  spec.reserve(5);
  spec.emplace_back(torch_dtype_name(t.scalar_type()));
  spec.push_back(int_list(t.sizes()));
  spec.emplace_back(start);
  spec.emplace_back(stop);
  spec.emplace_back(pad);
  return json::Value(std::move(spec));
}

json::Value device_json(const std::optional<at::Device>& device) {
  return device ? json::Value(device->str()) : json::Value();
}

using Packed = consolidated::PackedLeaf;

json::Value describe(const TensorDictBase& td, const NestedKey& where, DtypeGroups& layout, std::vector<Packed>& leaves);

// A lazy stack is Python's level {"cls": "LazyStackedTensorDict", cls_metadata {stack_dim,
// stack_dim_name, is_locked}} with no leaves of its own and its members as children "0", "1", ...
json::Value describe_lazy(const lazy::LazyStackImpl& ls, const NestedKey& where, DtypeGroups& layout,
                          std::vector<Packed>& leaves) {
  json::Object meta{{"cls", "LazyStackedTensorDict"},
                    {"non_tensors", json::Value(json::Object{})},
                    {"leaves", json::Value(json::Object{})},
                    {"cls_metadata", json::Value(json::Object{{"stack_dim", ls.stack_dim()},
                                                              {"stack_dim_name", json::Value()},
                                                              {"is_locked", ls.is_locked()}})}};
  for (int64_t i = 0; i < ls.count(); ++i) {
    const std::string name = std::to_string(i);
    meta.emplace_back(name, describe(*ls.members()[i].impl(), where.child(name), layout, leaves));
  }
  return json::Value(std::move(meta));
}

// Builds the metadata of one level and lists its leaves with their offsets (Note [Dtype groups]).
json::Value describe(const TensorDictBase& td, const NestedKey& where, DtypeGroups& layout, std::vector<Packed>& leaves) {
  if (const auto* ls = dynamic_cast<const lazy::LazyStackImpl*>(&td)) return describe_lazy(*ls, where, layout, leaves);
  json::Object non_tensors;
  json::Object leaf_meta;
  json::Object children;
  leaf_meta.reserve(td.num_entries());
  td.for_each([&](const std::string& key, const Entry& entry) {
    switch (entry.kind()) {
      case Entry::Kind::Tensor: {
        const at::Tensor& t = entry.tensor_unchecked();
        TD_CHECK(is_storable_dtype(t.scalar_type()), NotImplementedError, "consolidate: the dtype ",
                 torch_dtype_name(t.scalar_type()), " of ", where.child(key).repr(),
                 " cannot be stored in the consolidated format");
        const int64_t n = t.numel() * static_cast<int64_t>(t.element_size());
        const int64_t padded = padded_bytes(n);
        const int64_t start = layout.place(t.scalar_type(), padded);
        leaf_meta.emplace_back(key, leaf_spec(t, start, start + padded, padded - n));
        leaves.push_back(Packed{t, start, n});
        break;
      }
      case Entry::Kind::NonTensor: {
        const NonTensorData& data = entry.non_tensor();
        TD_CHECK(!data.is_stack(), NotImplementedError, "consolidate: the non-tensor stack at ", where.child(key).repr(),
                 " is not supported yet; store it as a uniform value or a tensor");
        non_tensors.emplace_back(
            key, json::Value(json::Array{data.value(), int_list(td.batch_size()), device_json(td.device())}));
        break;
      }
      case Entry::Kind::TensorDict:
        TD_CHECK(!is_metadata_field(key), ValueError, "consolidate: the sub-tensordict key ", where.child(key).repr(),
                 " collides with a metadata field of the consolidated format "
                 "(cls, leaves, non_tensors, cls_metadata, size)");
        children.emplace_back(key, describe(*entry.tensordict_unchecked().impl(), where.child(key), layout, leaves));
        break;
      case Entry::Kind::Undefined:
        break;
    }
  });
  // The batch-dim names, as v0.14's metadata carries them (null where a dim is unnamed).
  json::Array names(td.batch_dims(), json::Value());
  for (size_t i = 0; i < names.size() && i < td.dim_names().size(); ++i)
    if (td.dim_names()[i]) names[i] = json::Value(*td.dim_names()[i]);
  json::Object meta{{"cls", "TensorDict"},
                    {"non_tensors", json::Value(std::move(non_tensors))},
                    {"leaves", json::Value(std::move(leaf_meta))},
                    {"cls_metadata", json::Value(json::Object{{"device", device_json(td.device())},
                                                              {"names", json::Value(std::move(names))},
                                                              {"batch_size", int_list(td.batch_size())},
                                                              {"is_locked", td.is_locked()}})}};
  for (auto& child : children) meta.push_back(std::move(child));
  return json::Value(std::move(meta));
}

TensorDict rebuild_views(const at::Tensor& storage, const json::Value& meta, std::optional<at::Device> device,
                   const std::string& source) {
  // A lazy stack at the root stays a lazy stack whose members view the storage (there is no
  // dense root to carry it, so is_consolidated() is false for it).
  if (level_class(meta, source) == kLazyClass) {
    TensorDict ls = build_lazy_stack(storage, meta, device, source);
    ls.lock_();
    return ls;
  }
  const std::vector<int64_t> batch = level_batch(meta, source);
  auto root = c10::make_intrusive<ConsolidatedRoot>(batch, device, storage, meta);
  root->set_dim_names(level_names(meta, batch.size()));
  const LeafFlats flats(storage, meta);
  LevelBuilder table(batch, device, consolidated::entry_count(meta));
  if (!flats.empty()) {
    table.mark_packed_result();
    table.list_flats(flats.all(), !flats.tiles());
  }
  fill_level(table, storage, flats.empty() ? nullptr : &flats, meta, device, source);
  root->set_table(table.finish());
  TensorDict td(std::move(root));
  td.lock_();
  return td;
}

// [storage bytes][metadata JSON][M = its length, int64 little-endian]: Python's file layout.
std::string pack(const at::Tensor& storage, const json::Value& meta) {
  const at::Tensor bytes = storage.to(at::kCPU).contiguous();
  const std::string text = meta.dump();
  const int64_t n = bytes.numel();
  const int64_t m = static_cast<int64_t>(text.size());
  std::string out(static_cast<size_t>(n + m + 8), '\0');
  if (n > 0) std::memcpy(out.data(), bytes.data_ptr(), static_cast<size_t>(n));
  std::memcpy(out.data() + n, text.data(), text.size());
  std::memcpy(out.data() + n + m, &m, 8);  // little-endian hosts only, as Python's layout
  return out;
}

TensorDict parse_trailer(const at::Tensor& bytes, const std::string& source) {
  const int64_t size = bytes.numel();
  TD_CHECK(size >= 8, StorageError, source, ": too short (", size, " bytes) for a consolidated tensordict");
  const auto* data = static_cast<const char*>(bytes.data_ptr());
  int64_t m = 0;
  std::memcpy(&m, data + size - 8, 8);
  TD_CHECK(m > 0 && m <= size - 8, StorageError, source, ": metadata length ", m, " in the last 8 bytes does not fit the ",
           size, "-byte buffer");
  json::Value meta;
  try {
    meta = json::parse(std::string_view(data + size - 8 - m, static_cast<size_t>(m)), source);
  } catch (const ValueError& e) {
    TD_THROW(StorageError, "malformed consolidated metadata: ", e.message());
  }
  return detail::rebuild_consolidated(bytes.narrow(0, 0, size - 8 - m), meta, source);
}

const ConsolidatedRoot& consolidated_root(const TensorDict& td) {
  auto* root = dynamic_cast<const ConsolidatedRoot*>(td.impl());
  TD_CHECK(root, ValueError, "this tensordict is not consolidated; call consolidate() first");
  return *root;
}

// `v` is the JSON list of `values` (compared in place: this runs on every device move).
bool same_ints(const json::Value& v, c10::IntArrayRef values) {
  if (!v.is_array() || v.as_array().size() != values.size()) return false;
  for (size_t i = 0; i < values.size(); ++i)
    if (!v.as_array()[i].is_int() || v.as_array()[i].as_int() != values[i]) return false;
  return true;
}

// True when `level` is what `meta` describes: the same classes, batch sizes, keys and
// non-tensor values, every tensor leaf still the contiguous view of `storage` it was made as.
// Key order is not compared: rebuilding puts a level's leaves before its children, whatever
// order the source had (Python's loader does the same). `untracked`: and no leaf requires grad.
bool level_matches(const TensorDictBase& level, const json::Value& meta, const at::Tensor& storage, bool untracked) {
  const json::Value* cls = meta.find("cls");
  const json::Value* cm = meta.find("cls_metadata");
  if (!cls || !cls->is_string() || !cm) return false;
  if (const auto* ls = dynamic_cast<const lazy::LazyStackImpl*>(&level)) {
    const json::Value* dim = cm->find("stack_dim");
    if (cls->as_string() != kLazyClass || !dim || !dim->is_int() || dim->as_int() != ls->stack_dim()) return false;
    const std::vector<const json::Value*> members = consolidated::lazy_members(meta);
    if (members.size() != ls->members().size()) return false;
    for (size_t i = 0; i < members.size(); ++i) {
      if (!members[i] || !level_matches(*ls->members()[i].impl(), *members[i], storage, untracked)) return false;
    }
    return true;
  }
  const json::Value* batch = cm->find("batch_size");
  if (cls->as_string() != "TensorDict" || !batch || !same_ints(*batch, level.batch_size())) return false;
  const auto* base = static_cast<const char*>(storage.data_ptr());
  size_t expected = 0;
  if (const json::Value* leaves = meta.find("leaves")) {
    for (const auto& [key, spec] : leaves->as_object()) {
      ++expected;
      const Entry e = level.get(key);
      if (!e.is_tensor()) return false;
      const at::Tensor& t = e.tensor();
      const auto& a = spec.as_array();
      if (a[0].as_string() != torch_dtype_name(t.scalar_type()) || !same_ints(a[1], t.sizes())) return false;
      if (t.numel() > 0 && (!t.is_contiguous() || t.data_ptr() != base + a[2].as_int())) return false;
      if (untracked && t.requires_grad()) return false;
    }
  }
  if (const json::Value* nts = meta.find("non_tensors")) {
    for (const auto& [key, spec] : nts->as_object()) {
      ++expected;
      const Entry e = level.get(key);
      if (!e.is_non_tensor()) return false;
      const NonTensorData& data = e.non_tensor();
      if (data.is_stack() || data.value() != spec.as_array()[0]) return false;
    }
  }
  for (const auto& [key, child] : meta.as_object()) {
    if (is_metadata_field(key)) continue;
    ++expected;
    const Entry e = level.get(key);
    if (!e.is_tensordict() || !level_matches(*e.tensordict().impl(), child, storage, untracked)) return false;
  }
  return level.num_entries() == expected;
}

bool ConsolidatedRoot::matches_metadata(bool untracked) const {
  return level_matches(*this, metadata_, storage_, untracked);
}

TensorDict ConsolidatedRoot::map_leaves(FunctionRef<at::Tensor(const at::Tensor&)> fn,
                                        std::optional<at::Device> device) const {
  if (device.has_value() && storage_.device() != *device && !detail::forward_ad_open() &&
      matches_metadata(/*untracked=*/true)) {
    at::Tensor moved;
    if (storage_.is_cuda() && device->is_cpu() && at::hasCUDA()) {
      // Back from the GPU: one copy into pinned memory (page-locked, a DMA at full speed; one
      // copy into fresh pageable memory ran at half the speed of per-leaf copies), when `fn` is
      // a pure move, which its effect on an empty view of the storage tells without a copy.
      const at::Tensor probe = fn(storage_.narrow(0, 0, 0));
      if (probe.scalar_type() == at::kByte && probe.is_cpu()) {
        moved = at::empty(storage_.sizes(), storage_.options().device(at::kCPU).pinned_memory(true));
        moved.copy_(storage_);
      }
    }
    if (!moved.defined()) moved = fn(storage_);
    // Only a pure move keeps the bytes meaningful; a cast falls back to per-leaf conversion.
    // (A device named without an index, "cuda", is the current one: the moved storage's.)
    const bool on_device = moved.device().type() == device->type() &&
                           (!device->has_index() || moved.device().index() == device->index());
    if (moved.scalar_type() == at::kByte && moved.numel() == storage_.numel() && on_device) return rebased(moved, device);
  }
  return TableBackend::map_leaves(fn, device);
}

TensorDict ConsolidatedRoot::rebased(const at::Tensor& moved, std::optional<at::Device> device) const {
  // One typed view of `moved` per dtype met, then one strided view per leaf: parsing the metadata
  // again (the JSON walk, three view ops per leaf) cost several times the copy of a small
  // tensordict (docs/performance.md, "GPU transfers"). A leaf of itemsize k ends on a multiple
  // of k inside the storage, so the typed view may drop a tail shorter than k.
  // (matches_metadata() checked that each leaf with elements starts where the metadata says.)
  std::array<at::Tensor, static_cast<size_t>(at::ScalarType::NumOptions)> typed;
  const auto* base = static_cast<const char*>(storage_.data_ptr());
  auto rebase = [&](const at::Tensor& leaf) {
    const auto dtype = static_cast<size_t>(leaf.scalar_type());
    const int64_t item = static_cast<int64_t>(leaf.element_size());
    if (!typed[dtype].defined()) typed[dtype] = moved.narrow(0, 0, moved.numel() - moved.numel() % item).view(leaf.scalar_type());
    const int64_t byte_offset = leaf.numel() == 0 ? 0 : static_cast<const char*>(leaf.data_ptr()) - base;
    return strided_view(typed[dtype], leaf.sizes(), leaf.strides(), typed[dtype].storage_offset() + byte_offset / item);
  };
  auto root = c10::make_intrusive<ConsolidatedRoot>(batch_size(), device, moved, metadata_);
  root->set_dim_names(dim_names());
  for_each([&](const std::string& key, const Entry& entry) {
    if (entry.is_tensor()) {
      root->insert_or_assign(key, Entry(rebase(entry.tensor_unchecked())));
    } else if (entry.is_tensordict()) {
      root->insert_or_assign(key, Entry(entry.tensordict_unchecked().impl()->map_leaves(rebase, device)));
    } else {
      root->insert_or_assign(key, entry);
    }
  });
  TensorDict td(std::move(root));
  td.lock_();
  return td;
}

}  // namespace

namespace {
struct PackedTree {
  at::Tensor storage;
  json::Value meta;
  std::vector<Packed> leaves;  // in the order describe() met them
};

// Copies every leaf of `td` into one byte storage on `device` and describes where each went.
PackedTree pack_leaves(const TensorDict& td, at::Device device, bool pin = false) {
  DtypeGroups layout(*td.impl());
  std::vector<Packed> leaves;
  json::Value meta = describe(*td.impl(), NestedKey(), layout, leaves);
  const int64_t total = layout.total();
  // Every byte is a leaf's or its padding's: no zero-fill pass over the whole storage, only the
  // padding is zeroed (so to_bytes is deterministic).
  at::Tensor storage = at::empty(
      {total}, at::TensorOptions().dtype(at::kByte).device(device).pinned_memory(pin && device.is_cpu() && at::hasCUDA()));
  auto copy_one = [&](const Packed& p) {
    // A plain CPU leaf: one memcpy, no view made (Note [Plain copies]).
    if (p.nbytes > 0 && !detail::copy_bytes_into(storage, p.start, p.leaf))
      storage.narrow(0, p.start, p.nbytes).view(p.leaf.scalar_type()).view(p.leaf.sizes()).copy_(p.leaf);
    const int64_t pad = padded_bytes(p.nbytes) - p.nbytes;
    if (pad > 0) storage.narrow(0, p.start + p.nbytes, pad).zero_();
  };
  if (device.is_cpu() && leaves.size() > 1) {
    // Leaves copied on LibTorch's intra-op threads (at::get_num_threads()); one large leaf is
    // split by copy_ itself.
    at::parallel_for(0, static_cast<int64_t>(leaves.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) copy_one(leaves[static_cast<size_t>(i)]);
    });
  } else {
    for (const auto& p : leaves) copy_one(p);
  }
  return {std::move(storage), std::move(meta), std::move(leaves)};
}

// consolidate()'s result in memory: its views made from the tree packed (views_from_tree.h), or
// read back from the metadata where the tree holds a lazy stack.
TensorDict views_of(const TensorDict& td, const PackedTree& packed, std::optional<at::Device> device) {
  std::optional<TensorDict> table = consolidated::table_from_tree(*td.impl(), packed.storage, packed.leaves, device);
  if (!table) return rebuild_views(packed.storage, packed.meta, device, "consolidate");
  auto root = c10::make_intrusive<ConsolidatedRoot>(td.batch_size(), device, packed.storage, packed.meta);
  root->set_dim_names(consolidated::stored_names(*td.impl()));
  root->set_table(*table);
  TensorDict out(std::move(root));
  out.lock_();
  return out;
}
}  // namespace

TensorDict consolidate(const TensorDict& td, const ConsolidateOptions& options) {
  std::optional<at::Device> device = options.device ? options.device : td.device();
  const at::Device storage_device = device.value_or(at::Device(at::kCPU));
  TD_CHECK(options.filename.empty() || storage_device.is_cpu(), ValueError, "consolidate to a file needs the CPU, got device ",
           storage_device.str());
  const PackedTree packed = pack_leaves(td, storage_device, options.pin_memory && options.filename.empty());
  if (options.filename.empty()) return views_of(td, packed, device);
  const std::string blob = pack(packed.storage, packed.meta);
  // A new file renamed over the old one: a kill or a full disk leaves the old file whole.
  const std::string path = absolute_path(options.filename);
  remove_dead_temporaries(path);
  replace_file(path, blob.data(), blob.size());
  return from_consolidated(options.filename);
}

bool is_consolidated(const TensorDict& td) { return dynamic_cast<const ConsolidatedRoot*>(td.impl()) != nullptr; }

at::Tensor consolidated_storage(const TensorDict& td) { return consolidated_root(td).storage(); }

const json::Value& consolidated_metadata(const TensorDict& td) { return consolidated_root(td).metadata(); }

std::string to_bytes(const TensorDict& td) {
  // A consolidated tensordict changed since it was made (its metadata is stale) packs anew.
  if (is_consolidated(td) && consolidated_root(td).matches_metadata()) {
    const ConsolidatedRoot& root = consolidated_root(td);
    return pack(root.storage(), root.metadata());
  }
  const PackedTree packed = pack_leaves(td, at::Device(at::kCPU));
  return pack(packed.storage, packed.meta);
}

TensorDict from_bytes(std::string_view bytes) {
  at::Tensor copy = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(copy.data_ptr(), bytes.data(), bytes.size());
  return parse_trailer(copy, "<bytes>");
}

TensorDict from_consolidated(const std::string& filename) {
  const std::string path = absolute_path(filename);
  const int64_t size = file_size(path);
  at::Tensor bytes = map_file(path, at::kByte, {size}, /*writable=*/false);
  return parse_trailer(bytes, path);
}

namespace detail {
const TensorDictBase* consolidated_table(const TensorDictBase& td) {
  // typeid of a final class: one compare, where a dynamic_cast walks the class hierarchy.
  if (typeid(td) != typeid(ConsolidatedRoot)) return nullptr;
  return &static_cast<const ConsolidatedRoot&>(td).table();
}

TensorDict rebuild_consolidated(const at::Tensor& storage, const json::Value& meta, const std::string& source) {
  std::optional<at::Device> device;
  if (const json::Value* cm = meta.find("cls_metadata")) {
    if (const json::Value* d = cm->find("device"); d && d->is_string()) device = at::Device(at::kCPU);
  }
  return rebuild_views(storage, meta, device, source);
}
}  // namespace detail

}  // namespace tensordict
