#pragma once
// The backend behind PersistentTensorDict. H5Level is one group of an open file (the root or a
// nested group); H5View is `level[index]`, whose leaves read and write only the selected
// elements. Both share the H5File they belong to. Reads are fresh tensors (no aliasing), so
// every write reaches the file through write_, write_at_ or insert_or_assign
// (Note [Reads, copies and writes] in tensor_dict_base.h).

#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tensordict/backends/persistent.h>
#include <tensordict/batch_index.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/tensor_dict_base.h>

#include "backends/hdf5/h5_id.h"

namespace tensordict {
namespace h5 {

/// An open file, shared by every level and view of it.
struct H5File {
  H5Id file;
  std::string path;
  std::string mode;
  bool writable = false;
  H5Options options;
  /// The descriptor direct reads use (h5_direct_read.h): -1 when reads go through HDF5 (files
  /// opened for writing, or through another driver); for files opened "r" with the default
  /// driver kUnknownFd until the first read asks, then the file's descriptor (or -1).
  static constexpr int kUnknownFd = -2;
  int direct_fd = -1;
  /// Batch size of every group, by absolute path ("/", "/a", "/a/b"): set when the file is
  /// opened (stored attributes, or Python's inference) and kept current by the writes.
  std::map<std::string, BatchSize> batches;

  /// StorageError "<path>: the file is closed" once close() ran.
  hid_t id() const;
  /// StorageError naming the file and `what` when it was opened read-only.
  void check_writable(const std::string& what) const;
  void close() {
    const auto guard = lock();
    file.reset();
  }
  /// Held by every operation of a level or view of this file: HDF5 itself is thread-safe
  /// (Debian builds it so), this keeps the levels' own state (children, batches) consistent
  /// for threads sharing one handle. Recursive: operations call each other.
  std::unique_lock<std::recursive_mutex> lock() const { return std::unique_lock<std::recursive_mutex>(mutex); }

 private:
  mutable std::recursive_mutex mutex;
};

/// "/a" + "b" -> "/a/b".
std::string child_path(const std::string& group, std::string_view key);
/// "<file>:<object>", how messages name an object of the file.
std::string location(const H5File& f, const std::string& object);

class H5Level final : public TensorDictBase {
 public:
  H5Level(std::shared_ptr<H5File> file, std::string group, c10::IntArrayRef batch_size,
          std::optional<at::Device> device);

  const char* type_name() const override { return "PersistentTensorDict"; }
  const std::shared_ptr<H5File>& file() const { return file_; }
  const std::string& group() const { return group_; }

  size_t num_entries() const override;
  std::vector<std::string> keys() const override;
  bool has(std::string_view key) const override;
  Entry get(std::string_view key) const override;
  void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const override;
  void insert_or_assign(std::string_view key, Entry value) override;
  void erase(std::string_view key) override;
  void rename(std::string_view from, std::string_view to) override;
  void move_to_end(std::string_view key) override;

  EntryKind kind(std::string_view key) const override;
  void for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const override;
  void for_each_key_nesting(FunctionRef<void(const std::string&, bool)> fn) const override;
  LeafMeta leaf_meta(std::string_view key) const override;
  void write_(std::string_view key, const at::Tensor& value) override;
  void write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) override;
  void write_non_tensor_(std::string_view key, const NonTensorData& value) override;
  TensorDict make_child(std::string_view key, c10::IntArrayRef batch_size) const override;
  void set_batch_size(c10::IntArrayRef batch_size) override;
  TensorDict index(const BatchIndex& index) const override;
  void release_resources() override;

  /// The entry `key` read at `index`: a leaf's selected elements only, a group as a view.
  Entry read_at(std::string_view key, const BatchIndex& index) const;
  /// The nested level at `key`.
  c10::intrusive_ptr<H5Level> child(std::string_view key) const;
  /// A new dataset `key` of `shape` and `dtype`, never written: it reads as zeros.
  void create_zeroed(std::string_view key, const std::vector<int64_t>& shape, at::ScalarType dtype);

 private:
  /// get (index null) and read_at: the object is opened once.
  Entry read(std::string_view key, const BatchIndex* index) const;

  std::shared_ptr<H5File> file_;
  std::string group_;
  // The levels of the sub-groups handed out so far: one object per group, so its state (the
  // lock) is the same whichever handle reaches it. Dropped when the entry is replaced, erased
  // or renamed.
  mutable std::map<std::string, c10::intrusive_ptr<H5Level>, std::less<>> children_;
};

class H5View final : public TensorDictBase {
 public:
  H5View(c10::intrusive_ptr<H5Level> source, BatchIndex index, c10::IntArrayRef batch_size);

  const char* type_name() const override { return "PersistentTensorDict"; }

  size_t num_entries() const override { return source_->num_entries(); }
  std::vector<std::string> keys() const override { return source_->keys(); }
  bool has(std::string_view key) const override { return source_->has(key); }
  EntryKind kind(std::string_view key) const override { return source_->kind(key); }
  void for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const override {
    source_->for_each_key(fn);
  }
  void for_each_key_nesting(FunctionRef<void(const std::string&, bool)> fn) const override {
    source_->for_each_key_nesting(fn);
  }
  Entry get(std::string_view key) const override;
  void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const override;
  void insert_or_assign(std::string_view key, Entry value) override;
  void erase(std::string_view key) override;
  void rename(std::string_view from, std::string_view to) override;
  void write_(std::string_view key, const at::Tensor& value) override;
  void write_non_tensor_(std::string_view key, const NonTensorData& value) override;
  void set_batch_size(c10::IntArrayRef batch_size) override;
  void release_resources() override;

  const c10::intrusive_ptr<H5Level>& source() const { return source_; }

 private:
  c10::intrusive_ptr<H5Level> source_;
  BatchIndex index_;
};

/// Opens (or creates) `path` in h5py's `mode` and returns its root level. A file created here
/// stores `device` as its root's device.
TensorDict open_file(const std::string& path, const std::string& mode, std::optional<std::vector<int64_t>> batch_size,
                     const H5Options& options, std::optional<at::Device> device = std::nullopt);
/// The root level of the opened `f`: its batch size stored, given, or inferred as Python does;
/// a `create`d file stores `device`.
TensorDict open_root(const std::shared_ptr<H5File>& f, std::optional<std::vector<int64_t>> batch_size, bool create,
                     std::optional<at::Device> device);
/// The HDF5 file `image` (its bytes, as on disk) opened read-only in memory with the core
/// driver, named `name` in messages: what the fuzzer reads.
TensorDict open_image(const std::string& name, std::string_view image);
/// The H5File behind a PersistentTensorDict handle (a level or a view).
const std::shared_ptr<H5File>& file_of(const TensorDictBase& impl);

}  // namespace h5
}  // namespace tensordict
