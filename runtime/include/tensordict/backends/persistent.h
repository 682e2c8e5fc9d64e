#pragma once
// PersistentTensorDict: an HDF5 file as a live tensordict (Python tensordict's
// PersistentTensorDict, h5 dialect). Groups are nested tensordicts, datasets are leaves. Reads
// are lazy: get(key) reads one dataset, and td.index(idx) is a view whose leaves read only the
// selected hyperslab (any index: unsorted and repeated index tensors and masks too). Every
// write goes to the file. The layout is h5py's, so Python and h5py read what C++ writes and the
// reverse; see docs/backends.md, "HDF5 files". Built with TENSORDICT_WITH_HDF5.
//
//   auto td = tensordict::PersistentTensorDict::from_h5("data.h5", "r");
//   at::Tensor rows = td.index({at::indexing::Slice(0, 64)}).get("obs");  // reads 64 rows

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <tensordict/backends/leaf_spec.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

/// How datasets are created (h5py's create_dataset options). Chunking and compression apply to
/// every dataset that can have them; scalars and strings are stored contiguous (h5py refuses
/// filters there, and Python tensordict crashes on it).
struct H5Options {
  /// 0-9: gzip (deflate) at that level; -1: no compression.
  int gzip_level = -1;
  /// Byte shuffle before compression (h5py `shuffle=True`).
  bool shuffle = false;
  /// Chunk shape for every dataset (clipped to the dataset's shape); empty: HDF5's choice when a
  /// filter needs chunks, contiguous otherwise.
  std::vector<int64_t> chunks;
  /// to_h5 and from_schema refuse a path where a file already is (StorageError: writing there
  /// would replace it) unless this is set; then the file is replaced whole.
  bool overwrite = false;
};

/// How from_h5 opens a file.
struct H5OpenOptions {
  /// The file comes from a source you do not trust (a download, a user's upload). HDF5 1.10
  /// itself crashes or hangs on some corrupt files, which no caller can catch. With this set, a
  /// forked child process opens the file first and touches every group, dataset and attribute
  /// the backend reads; if the child dies or hangs, from_h5 raises StorageError naming the file
  /// ("the HDF5 library crashed (SIGSEGV) while reading ...") and opens nothing. Costs a fork and
  /// a walk of the file's metadata (docs/backends.md, "Untrusted files"). Only modes that open an
  /// existing file check it.
  bool untrusted = false;
  /// How long the check may take before it counts as a hang (the child is then killed).
  std::chrono::milliseconds check_timeout{std::chrono::seconds(60)};
};

/// A handle to a tensordict stored in an HDF5 file. It is a TensorDict: every operation works on
/// it; those that cannot stay in the file (shape ops, conversions) return in-memory results.
class PersistentTensorDict : public TensorDict {
 public:
  /// Opens `path` in h5py's `mode`: "r" (read only), "r+" (read/write, must exist), "w"
  /// (create, truncate), "w-" or "x" (create, fail if it exists), "a" (read/write, create if
  /// missing). Without `batch_size`, each group's batch size is the one C++ stored in its
  /// attributes, or else the longest leading-dims prefix common to its datasets and sub-groups
  /// (Python's inference). With it, every dataset's leading dims are checked (ValueError "batch
  /// size and array size mismatch" naming the file and the dataset). StorageError naming the
  /// file when it is missing, not HDF5, or unreadable. `open.untrusted` checks the file in a
  /// child process first (H5OpenOptions).
  static PersistentTensorDict from_h5(const std::string& path, const std::string& mode = "r",
                                      std::optional<std::vector<int64_t>> batch_size = std::nullopt,
                                      const H5OpenOptions& open = {});
  /// Writes `td` (nested levels as groups, non-tensor values as h5py stores them) to a new file
  /// at `path` and returns it opened "r+". The file is written under a temporary name and
  /// renamed to `path` last, so a failed write leaves nothing there. A file already at `path`
  /// is refused (StorageError naming it) unless `options.overwrite`; then it is replaced whole
  /// (as Python's to_h5 truncates it), or left as it was when the write fails.
  static PersistentTensorDict to_h5(const TensorDict& td, const std::string& path, const H5Options& options = {});
  /// A file with an entry per entry of `schema` (leaf_spec.h): tensors as zero-filled datasets
  /// shaped batch_size + event shape (never written: nothing full-size is allocated), non-tensor
  /// values as to_h5 stores them. An existing file is refused as to_h5 does.
  static PersistentTensorDict from_schema(const LeafSpecs& schema, c10::IntArrayRef batch_size,
                                          const std::string& path, const H5Options& options = {});

  /// `td` as a PersistentTensorDict; TypeError naming its class when it is not one.
  static PersistentTensorDict from(const TensorDict& td);
  /// True when `td` is a PersistentTensorDict (a file, a group of one, or an indexed view).
  static bool is_persistent(const TensorDict& td);

  /// The file's path, as given when it was opened.
  const std::string& filename() const;
  /// The mode it was opened with.
  const std::string& mode() const;
  /// The group this handle stands for ("/" for the file's root).
  std::string group_name() const;
  /// Closes the file now (it also closes when the last handle to it goes). Any later access
  /// through a handle to it raises StorageError "closed".
  void close();
  /// False once close() was called.
  bool is_open() const;

 private:
  explicit PersistentTensorDict(TensorDict td) : TensorDict(std::move(td)) {}
};

}  // namespace tensordict
