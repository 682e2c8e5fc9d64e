// PersistentTensorDict's backend: H5Level (a group of an open file), H5View (a selection of one)
// and opening a file; the objects themselves are in h5_objects.h, h5_non_tensor.h, h5_batches.h
// (docs/backends.md, "HDF5 files").

#include "backends/hdf5/persistent_impl.h"

#include <algorithm>
#include <filesystem>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/non_tensor.h>

#include "backends/hdf5/h5_batches.h"
#include "backends/hdf5/h5_direct_read.h"
#include "backends/hdf5/h5_entries.h"
#include "backends/hdf5/h5_links.h"
#include "backends/hdf5/h5_non_tensor.h"
#include "backends/hdf5/h5_objects.h"
#include "backends/hdf5/h5_selection.h"
#include "backends/hdf5/h5_types.h"
#include "core/format.h"
#include "core/non_tensor_write.h"
#include "core/validate.h"

namespace tensordict {
namespace h5 {

// ---- The file ---------------------------------------------------------------------------------

hid_t H5File::id() const {
  TD_CHECK(file.valid(), StorageError, path, ": the HDF5 file is closed");
  return file.get();
}

void H5File::check_writable(const std::string& what) const {
  id();
  TD_CHECK(writable, StorageError, path, ": cannot ", what, ": the file was opened read-only (mode '", mode, "')");
}

std::string child_path(const std::string& group, std::string_view key) {
  return group == "/" ? "/" + std::string(key) : group + "/" + std::string(key);
}

std::string location(const H5File& f, const std::string& object) { return f.path + ":" + object; }
namespace {

// False for keys no HDF5 link can have ('/' nests groups; empty, "." and ".." name the
// group itself): they are never entries.
bool linkable(std::string_view key) {
  return !key.empty() && key != "." && key != ".." && key.find('/') == std::string_view::npos &&
         key.find('\0') == std::string_view::npos;
}

void check_key(const H5File& f, const std::string& group, std::string_view key) {
  TD_CHECK(linkable(key), ValueError, location(f, group),
           ": the key '", std::string(key), "' cannot name an HDF5 object ('/' nests groups; empty, '.' and '..' are "
           "reserved): rename it first");
}

// Creates `path` (absent) for `entry`: a dataset, or a group holding every entry below it.
void write_entry(H5File& f, const std::string& path, const Entry& entry) {
  if (entry.is_tensor()) {
    write_tensor_dataset(f, path, entry.tensor());
  } else if (entry.is_non_tensor()) {
    write_non_tensor_dataset(f, path, entry.non_tensor());
  } else if (entry.is_tensordict()) {
    const TensorDict& sub = entry.tensordict();
    create_group(f, path, sub.batch_size(), sub.device());
    sub.impl()->for_each([&](const std::string& key, const Entry& child) {
      check_key(f, path, key);
      write_entry(f, child_path(path, key), child);
    });
  }
}

}  // namespace

// ---- H5Level ------------------------------------------------------------------------------------

H5Level::H5Level(std::shared_ptr<H5File> file, std::string group, c10::IntArrayRef batch_size,
                 std::optional<at::Device> device)
    : TensorDictBase(batch_size, device, StoragePolicy{}), file_(std::move(file)), group_(std::move(group)) {}

size_t H5Level::num_entries() const { return keys().size(); }

std::vector<std::string> H5Level::keys() const {
  const auto guard = file_->lock();
  return entry_names(*file_, group_);
}

bool H5Level::has(std::string_view key) const {
  const auto guard = file_->lock();
  return linkable(key) && holds_entry(*file_, child_path(group_, key));
}

EntryKind H5Level::kind(std::string_view key) const {
  const auto guard = file_->lock();
  return linkable(key) ? object_kind(*file_, child_path(group_, key)) : EntryKind::Undefined;
}

void H5Level::for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const {
  const auto guard = file_->lock();
  for_each_entry_kind(*file_, group_, fn);
}

void H5Level::for_each_key_nesting(FunctionRef<void(const std::string&, bool)> fn) const {
  const auto guard = file_->lock();
  for_each_entry_nesting(*file_, group_, fn);
}

c10::intrusive_ptr<H5Level> H5Level::child(std::string_view key) const {
  const auto guard = file_->lock();
  if (auto cached = children_.find(key); cached != children_.end()) return cached->second;
  const std::string path = child_path(group_, key);
  auto it = file_->batches.find(path);
  // A group first reached now: its batch is resolved (stored, or inferred) and checked here.
  const BatchSize parent(batch_size().begin(), batch_size().end());
  const BatchSize batch =
      it != file_->batches.end() ? it->second : resolve_batches(*file_, path, std::nullopt, &parent, false, 0);
  auto level = c10::make_intrusive<H5Level>(file_, path, batch, device_);
  children_.emplace(std::string(key), level);
  return level;
}

Entry H5Level::get(std::string_view key) const { return read(key, nullptr); }

Entry H5Level::read_at(std::string_view key, const BatchIndex& index) const { return read(key, &index); }

Entry H5Level::read(std::string_view key, const BatchIndex* index) const {
  const auto guard = file_->lock();
  if (!linkable(key)) return Entry();
  const std::string path = child_path(group_, key);
  const std::string where = location(*file_, path);  // built once: reads are short
  Object obj = open_object(*file_, path, where);
  switch (obj.kind) {
    case EntryKind::Undefined: return Entry();
    case EntryKind::TensorDict: {
      c10::intrusive_ptr<H5Level> sub = child(key);
      if (index == nullptr) return Entry(TensorDict(std::move(sub)));
      // The indexed batch dims, then the child's own extra ones.
      BatchSize batch(index->result_batch_size().begin(), index->result_batch_size().end());
      batch.append(sub->batch_size().begin() + index->source_batch_dims(), sub->batch_size().end());
      return Entry(TensorDict(c10::make_intrusive<H5View>(std::move(sub), *index, batch)));
    }
    case EntryKind::NonTensor: {
      NonTensorData value = read_non_tensor(*file_, path, obj.dataset, batch_size());
      if (index != nullptr && value.is_stack()) value = value.with_ids(index->apply(value.ids()));
      return Entry(std::move(value));
    }
    case EntryKind::Tensor: break;
  }
  const Dataset& d = require_readable(*file_, path, obj.dataset);
  check_extends_batch(*file_, path, d.shape, batch_size());
  H5File& f = *file_;
  if (f.direct_fd == H5File::kUnknownFd) f.direct_fd = direct_read_fd(f.id());
  Selection sel;
  at::Tensor out;
  if (index == nullptr) {
    out = read_block(where, d, f.direct_fd);
  } else if (!select(d.shape, *index, sel)) {
    out = index->apply(read_block(where, d, f.direct_fd));
  } else {
    at::Tensor block = read_selection(where, d, sel, f.direct_fd);
    out = sel.post_is_identity ? block : block.index(sel.post);
  }
  return Entry(device_ && !device_->is_cpu() ? out.to(*device_) : out);
}

void H5Level::for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const {
  const auto guard = file_->lock();
  for (const std::string& key : group_keys(*file_, group_)) {
    Entry e = get(key);
    if (e.defined()) fn(key, e);
  }
}

LeafMeta H5Level::leaf_meta(std::string_view key) const {
  const auto guard = file_->lock();
  Dataset d = open_dataset(*file_, child_path(group_, key));
  check_extends_batch(*file_, child_path(group_, key), d.shape, batch_size());
  return LeafMeta{BatchSize(d.shape.begin(), d.shape.end()), d.stored.dtype, device_.value_or(at::Device(at::kCPU))};
}

void H5Level::insert_or_assign(std::string_view key, Entry value) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("set '" + std::string(key) + "'");
  check_key(f, group_, key);
  const std::string path = child_path(group_, key);
  if (value.is_tensordict()) {
    // The handle stores back the level it got from get(): it is already in the file.
    if (auto* level = dynamic_cast<const H5Level*>(value.tensordict().impl()); level && level->file_ == file_ && level->group_ == path)
      return;
  }
  if (value.is_tensor()) {
    // Same dtype and shape: written in place, so the key keeps its position (and its
    // creation options) instead of being recreated at the end.
    const std::string where = location(f, path);
    const Object obj = open_object(f, path, where);
    const Dataset& d = obj.dataset;
    const at::Tensor& t = value.tensor();
    if (obj.kind == EntryKind::Tensor && d.stored.kind == StoredType::Kind::Tensor && !t.requires_grad() &&
        d.stored.dtype == t.scalar_type() && c10::IntArrayRef(d.shape) == t.sizes()) {
      write_block(where, d, t.to(at::kCPU));
      return;
    }
  }
  // A replaced entry keeps its position: the links are put back in their order afterwards.
  std::vector<std::string> order;
  if (link_exists(f, path)) {
    order = group_keys(f, group_);
    check(H5Ldelete(f.id(), path.c_str(), H5P_DEFAULT), location(f, path), "H5Ldelete");
    forget_batches(f, path);
  }
  if (auto cached = children_.find(key); cached != children_.end()) children_.erase(cached);
  write_entry(f, path, value);
  if (!order.empty()) keep_order(f, group_, order);
  bump_layout_version();
}

void H5Level::erase(std::string_view key) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  if (!has(key)) return;
  f.check_writable("erase '" + std::string(key) + "'");
  const std::string path = child_path(group_, key);
  check(H5Ldelete(f.id(), path.c_str(), H5P_DEFAULT), location(f, path), "H5Ldelete");
  forget_batches(f, path);
  if (auto cached = children_.find(key); cached != children_.end()) children_.erase(cached);
  bump_layout_version();
}

void H5Level::rename(std::string_view from, std::string_view to) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("rename '" + std::string(from) + "'");
  check_key(f, group_, to);
  const std::string src = child_path(group_, from), dst = child_path(group_, to);
  // The entry keeps its position under the new name.
  std::vector<std::string> order = group_keys(f, group_);
  std::replace(order.begin(), order.end(), std::string(from), std::string(to));
  check(H5Lmove(f.id(), src.c_str(), f.id(), dst.c_str(), H5P_DEFAULT, H5P_DEFAULT), location(f, src), "H5Lmove");
  // Batch sizes of the moved groups follow them.
  std::vector<std::pair<std::string, BatchSize>> moved;
  for (const auto& [p, b] : f.batches) {
    if (p == src || p.rfind(src + "/", 0) == 0) moved.emplace_back(dst + p.substr(src.size()), b);
  }
  forget_batches(f, src);
  for (auto& [p, b] : moved) f.batches[p] = std::move(b);
  if (auto cached = children_.find(from); cached != children_.end()) children_.erase(cached);
  keep_order(f, group_, order);
  bump_layout_version();
}

void H5Level::move_to_end(std::string_view key) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("reorder '" + std::string(key) + "'");
  relink_last(f, group_, std::string(key));
  bump_layout_version();
}

void H5Level::write_(std::string_view key, const at::Tensor& value) {
  const auto guard = file_->lock();
  const std::string path = child_path(group_, key);
  const Dataset d = writable_tensor(*file_, path);
  write_block(location(*file_, path), d, value.detach().to(at::kCPU, d.stored.dtype).expand(d.shape));
}

void H5Level::write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  const std::string path = child_path(group_, key);
  const std::string where = location(f, path);
  const Dataset d = writable_tensor(f, path);
  const at::Tensor v = value.detach().to(at::kCPU, d.stored.dtype);
  Selection sel;
  if (!select(d.shape, index, sel)) {
    at::Tensor all = read_block(where, d);
    index.assign(all, v);
    write_block(where, d, all);
    return;
  }
  if (sel.empty) {
    // Nothing to write; a value `leaf[index] = value` refuses is refused all the same (a `set`
    // through an indexed view comes here without the handle's check).
    const BatchSize target = detail::indexed_shape(d.shape, batch_size().size(), index);
    TD_CHECK(detail::broadcasts_to(v.sizes(), target), ShapeError, where, ": cannot write a value of shape ",
             detail::size_str(v.sizes()), " into the selected shape ", detail::size_str(target));
    return;
  }
  // Only the selected elements move, whatever the index. A block the value covers whole (basic
  // slices) is written straight; otherwise it is read, the value put in at the post-index
  // (repeats, dropped dims), and written back.
  if (sel.post_is_identity) {
    at::Tensor covering = v;  // leading unit dims dropped, as `leaf[index] = value` does
    while (covering.dim() > static_cast<int64_t>(sel.block_shape.size()) && covering.size(0) == 1)
      covering = covering.squeeze(0);
    return write_selection(where, d, sel, covering.expand(sel.block_shape));
  }
  at::Tensor block = read_selection(where, d, sel);
  block.index_put_(sel.post, v);
  write_selection(where, d, sel, block);
}

void H5Level::create_zeroed(std::string_view key, const std::vector<int64_t>& shape, at::ScalarType dtype) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("create '" + std::string(key) + "'");
  check_key(f, group_, key);
  create_dataset(f, child_path(group_, key), shape, dtype);
  bump_layout_version();
}

void H5Level::write_non_tensor_(std::string_view key, const NonTensorData& value) {
  const auto guard = file_->lock();
  // A stack replacing a stack of its shape is written into the same dataset.
  const std::string path = child_path(group_, key);
  if (value.is_stack() && !value.is_uniform() && linkable(key)) {
    file_->check_writable("write '" + path + "'");
    const Object obj = open_object(*file_, path, location(*file_, path));
    if (obj.kind == EntryKind::NonTensor && holds_stack_like(obj.dataset, value)) {
      return write_non_tensor_stack(*file_, path, value, &obj.dataset);
    }
  }
  insert_or_assign(key, Entry(value));
}

TensorDict H5Level::make_child(std::string_view key, c10::IntArrayRef batch_size) const {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("create the group '" + std::string(key) + "'");
  check_key(f, group_, key);
  const std::string path = child_path(group_, key);
  create_group(f, path, batch_size, device_);
  return TensorDict(child(key));
}

void H5Level::set_batch_size(c10::IntArrayRef batch_size) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("change the batch size");
  H5Id g = check_id(H5Gopen2(f.id(), group_.c_str(), H5P_DEFAULT), location(f, group_), "H5Gopen2");
  write_level_attributes(g.get(), batch_size, device_, location(f, group_));
  f.batches[group_] = BatchSize(batch_size.begin(), batch_size.end());
  TensorDictBase::set_batch_size(batch_size);
}

TensorDict H5Level::index(const BatchIndex& index) const {
  auto self = c10::intrusive_ptr<H5Level>::reclaim_copy(const_cast<H5Level*>(this));
  return TensorDict(c10::make_intrusive<H5View>(std::move(self), index, index.result_batch_size()));
}

void H5Level::release_resources() {
  if (const std::shared_ptr<H5File> file = std::move(file_)) {
    const auto guard = file->lock();
    children_.clear();
  }
  TensorDictBase::release_resources();
}

// ---- H5View -------------------------------------------------------------------------------------

H5View::H5View(c10::intrusive_ptr<H5Level> source, BatchIndex index, c10::IntArrayRef batch_size)
    : TensorDictBase(batch_size, source->device(), StoragePolicy{}), source_(std::move(source)), index_(std::move(index)) {}

Entry H5View::get(std::string_view key) const { return source_->read_at(key, index_); }

void H5View::for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const {
  for (const std::string& key : keys()) fn(key, get(key));
}

void H5View::write_(std::string_view key, const at::Tensor& value) { source_->write_at_(key, index_, value); }

void H5View::insert_or_assign(std::string_view key, Entry value) {
  const EntryKind existing = source_->kind(key);
  if (value.is_tensor() && existing == EntryKind::Tensor) return write_(key, value.tensor());
  if (value.is_non_tensor() && existing == EntryKind::NonTensor) return write_non_tensor_(key, value.non_tensor());
  if (value.is_tensordict() && existing == EntryKind::TensorDict) {
    if (dynamic_cast<const H5View*>(value.tensordict().impl())) return;  // the view get() gave
  }
  unsupported("add or replace an entry through an indexed view",
              "set the key on the file's tensordict, or write values in place (set_, index_put_)");
}

void H5View::erase(std::string_view) { unsupported("erase an entry through an indexed view", "erase it on the file's tensordict"); }

void H5View::rename(std::string_view, std::string_view) {
  unsupported("rename an entry through an indexed view", "rename it on the file's tensordict");
}

void H5View::write_non_tensor_(std::string_view key, const NonTensorData& value) {
  // The selected elements of the stored value are replaced (a uniform value becomes a stack).
  const Entry current = source_->get(key);
  TD_CHECK(current.is_non_tensor(), TypeError, location(*source_->file(), child_path(source_->group(), key)),
           ": not a non-tensor entry");
  source_->write_non_tensor_(key, detail::assign_non_tensor(current.non_tensor(), source_->batch_size(), index_, value));
}

void H5View::set_batch_size(c10::IntArrayRef) { unsupported("change the batch size of an indexed view", "it follows the file"); }

void H5View::release_resources() {
  source_.reset();
  TensorDictBase::release_resources();
}

// ---- Opening ------------------------------------------------------------------------------------

const std::shared_ptr<H5File>& file_of(const TensorDictBase& impl) {
  if (const auto* level = dynamic_cast<const H5Level*>(&impl)) return level->file();
  if (const auto* view = dynamic_cast<const H5View*>(&impl)) return view->source()->file();
  TD_THROW(TypeError, "expected a PersistentTensorDict, got a ", impl.type_name());
}

TensorDict open_file(const std::string& path, const std::string& mode, std::optional<std::vector<int64_t>> batch_size,
                     const H5Options& options, std::optional<at::Device> device) {
  silence_errors();
  namespace fs = std::filesystem;
  TD_CHECK(mode == "r" || mode == "r+" || mode == "w" || mode == "w-" || mode == "x" || mode == "a", ValueError,
           path, ": invalid mode '", mode, "' (expected r, r+, w, w-, x or a, as h5py)");
  auto f = std::make_shared<H5File>();
  f->path = path;
  f->mode = mode;
  f->options = options;
  f->writable = mode != "r";
  // r and r+ open without a stat first (opening is the hot path of short reads); a failed open
  // finds out why afterwards.
  const bool opens_existing = mode == "r" || mode == "r+";
  const bool exists = !opens_existing && fs::exists(path);
  const bool create = mode == "w" || mode == "w-" || mode == "x" || (mode == "a" && !exists);
  // File access is HDF5's default (the "weak" close degree): no object id outlives the call that
  // opened it here, so closing the file id closes the file; and a file open elsewhere in the
  // process with the default degree can be opened again (a "strong" one would be refused).
  if (create) {
    TD_CHECK(!(exists && (mode == "w-" || mode == "x")), StorageError, path, ": file exists (mode '", mode, "')");
    H5Id fcpl = ordered_links(H5P_FILE_CREATE, path);
    f->file = check_id(H5Fcreate(path.c_str(), mode == "w" ? H5F_ACC_TRUNC : H5F_ACC_EXCL, fcpl.get(), H5P_DEFAULT),
                       path, "creating the HDF5 file");
  } else {
    const hid_t id = H5Fopen(path.c_str(), mode == "r" ? H5F_ACC_RDONLY : H5F_ACC_RDWR, H5P_DEFAULT);
    if (id < 0) {
      // Why it failed: no file, not HDF5 at all, or HDF5 that cannot be read (truncated, corrupt).
      const std::string stack = error_stack();
      TD_CHECK(fs::exists(path), StorageError, path, ": no such file (mode '", mode, "' opens an existing file)");
      const htri_t is_h5 = H5Fis_hdf5(path.c_str());
      TD_CHECK(is_h5 > 0, StorageError, path, ": not an HDF5 file");
      TD_THROW(StorageError, path, ": opening the HDF5 file: ", stack);
    }
    f->file = H5Id(id);
    // Read-only, with the default driver: rows may be read straight from the file.
    if (mode == "r") f->direct_fd = H5File::kUnknownFd;
  }
  return open_root(f, batch_size, create, device);
}

TensorDict open_root(const std::shared_ptr<H5File>& f, std::optional<std::vector<int64_t>> batch_size, bool create,
                     std::optional<at::Device> device) {
  const std::string& path = f->path;
  std::optional<BatchSize> given;
  if (batch_size) given = BatchSize(batch_size->begin(), batch_size->end());
  BatchSize root;
  if (create) {
    // A new file's root stores its batch size at once, as every group C++ creates does.
    root = given.value_or(BatchSize{});
    f->batches["/"] = root;
    H5Id g = check_id(H5Gopen2(f->file.get(), "/", H5P_DEFAULT), path, "H5Gopen2");
    write_level_attributes(g.get(), root, device, location(*f, "/"));
  } else {
    root = resolve_batches(*f, "/", given, nullptr, given.has_value(), 0);
  }
  if (auto d = read_string_attribute(f->file.get(), kDeviceAttribute, location(*f, "/"))) {
    try {
      device = at::Device(*d);
    } catch (const std::exception&) {
      TD_THROW(StorageError, path, ": malformed ", kDeviceAttribute, " attribute '", *d, "'");
    }
  }
  return TensorDict(c10::make_intrusive<H5Level>(f, "/", root, device));
}

TensorDict open_image(const std::string& name, std::string_view image) {
  silence_errors();
  auto f = std::make_shared<H5File>();
  f->path = name;
  f->mode = "r";
  H5Id fapl = check_id(H5Pcreate(H5P_FILE_ACCESS), name, "H5Pcreate");
  // The core driver reads the file from memory; HDF5 copies the image, so `image` may go.
  check(H5Pset_fapl_core(fapl.get(), 64 * 1024, /*backing_store=*/0), name, "H5Pset_fapl_core");
  check(H5Pset_file_image(fapl.get(), const_cast<char*>(image.data()), image.size()), name, "H5Pset_file_image");
  const hid_t id = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get());
  TD_CHECK(id >= 0, StorageError, name, ": opening the HDF5 image: ", error_stack());
  f->file = H5Id(id);
  return open_root(f, std::nullopt, /*create=*/false, std::nullopt);
}

}  // namespace h5
}  // namespace tensordict
