#pragma once
// Memory-mapped tensordicts in Python tensordict's (v0.14) directory format: one directory per
// collection holding a meta.json, one raw `.memmap` file per tensor leaf, non-tensor data as
// NonTensorData / NonTensorStack directories. See docs/memmap.md and docs/compatibility.md.
//
// A memmapped tensordict keeps its keys in memory and its leaves are file mappings: it is
// locked, `set` of a new key raises LockedError, and `set_`, `update_`, `index_put_` and in-place
// math write through to the files.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/core/Storage.h>

#include <tensordict/tensor_dict.h>

namespace tensordict {

/// Options of memmap / memmap_ / memmap_like (Python's keyword arguments).
struct MemmapOptions {
  /// With false, an existing leaf file is an error ("The file ... already exists.").
  bool existsok = true;
  /// A directory that already holds a tensordict (a meta.json) is refused unless this is set:
  /// memmap_like zero-fills, and memmap replaces (whole, in one rename), what is there.
  bool overwrite = false;
  /// Copy leaves that are already mapped from another file (otherwise an error, as Python).
  bool copy_existing = false;
  /// Leaf files (and 8 MiB parts of larger leaves) written by this many threads, the calling
  /// one and helpers from LibTorch's inter-op pool; 0: at::get_num_interop_threads(); 1: the
  /// calling thread only. A write under 16 MiB stays on the calling thread.
  int num_threads = 0;
  /// Called after each leaf (or part of one) is written with (bytes written so far, total bytes).
  std::function<void(int64_t, int64_t)> progress;
};

/// Options of load_memmap.
struct LoadMemmapOptions {
  /// Moves the loaded leaves there afterwards (the result is then an in-memory tensordict).
  std::optional<at::Device> device;
  /// Path parts below the prefix to load instead of the root (each must hold a meta.json).
  std::vector<std::string> subpath;
  /// Map writable files shared (writes persist); false maps every file copy-on-write.
  bool writable = true;
  /// Fall back to raw (pre-0.13) file names when the encoded one is missing.
  bool robust_key = true;
  /// Follow symbolic links below the prefix (leaf files, meta.json, nested directories). Off:
  /// a directory from elsewhere could link to any file of this machine, so a link is a
  /// StorageError naming it.
  bool allow_symlinks = false;
};

/// Writes `td` to the directory `prefix` and returns a memmapped, locked CPU copy whose leaves
/// map the written files (Python `td.memmap(prefix)`; `save` is an alias).
TensorDict memmap(const TensorDict& td, const std::string& prefix, const MemmapOptions& options = {});
/// Like memmap, in place: the leaves of `td` (and of every handle sharing it) are replaced by
/// the file mappings and `td` is locked; `td` is rebound to the memmapped backend, so
/// `td.is_memmap()` is true. `td` must be on the CPU.
TensorDict& memmap_(TensorDict& td, const std::string& prefix, const MemmapOptions& options = {});
/// The same tree and meta.json with zero-filled leaf files of the same shapes and dtypes; no
/// tensor data is copied (non-tensor data is). For preallocation.
TensorDict memmap_like(const TensorDict& td, const std::string& prefix,
                       const MemmapOptions& options = {});
/// Maps a directory written by memmap or by Python tensordict. Lazy: files are mapped, not
/// read. Leaves come first, then sub-collections (Python's load order). The result is
/// memmapped and locked (Python leaves it unlocked; unlock_() to add in-memory keys).
TensorDict load_memmap(const std::string& prefix, const LoadMemmapOptions& options = {});
/// Aliases of memmap and load_memmap.
TensorDict save(const TensorDict& td, const std::string& prefix, const MemmapOptions& options = {});
TensorDict load(const std::string& prefix, const LoadMemmapOptions& options = {});
/// Loads the directory `prefix` into `td` (Python's load_memmap_; load_ is an alias): `td`
/// keeps its batch size and device, every entry on disk replaces the one in `td` (nested
/// tensordicts are loaded into), the others stay. A memory-mapped `td` gets the values copied
/// into its own files (its keys must include the directory's). LockedError when `td` is locked.
TensorDict& load_memmap_(TensorDict& td, const std::string& prefix, const LoadMemmapOptions& options = {});
TensorDict& load_(TensorDict& td, const std::string& prefix, const LoadMemmapOptions& options = {});
/// A new zero-filled leaf `key` of `shape` (dtype: the default float type) in the memory-mapped
/// `td`, written to its directory and meta.json (missing levels too) and returned. RuntimeError
/// when `td` is not memory-mapped or `key` exists; ShapeError when `shape` lacks the batch size.
at::Tensor make_memmap(TensorDict& td, KeyRef key, c10::IntArrayRef shape,
                       std::optional<at::ScalarType> dtype = std::nullopt);
/// A leaf over `storage`, which must map the file the leaf gets (`<dir>/<key>.memmap`, e.g. a
/// MemoryMappedTensor made there): only meta.json is written (Python's make_memmap_from_storage).
at::Tensor make_memmap_from_storage(TensorDict& td, KeyRef key, const c10::Storage& storage, c10::IntArrayRef shape,
                                    std::optional<at::ScalarType> dtype = std::nullopt);
/// The same with `tensor`'s data (or zeros of its shape and dtype without `copy_data`).
at::Tensor make_memmap_from_tensor(TensorDict& td, KeyRef key, const at::Tensor& tensor, bool copy_data = true);
/// Reloads a memmapped tensordict from its directory, picking up entries other writers added.
/// The tensordict is only changed when the whole directory loads.
TensorDict& memmap_refresh_(TensorDict& td);
/// The directory of a memmapped tensordict (ValueError when it is not memmapped).
std::string memmap_path(const TensorDict& td);

/// Python's `_encode_key_for_filesystem`: "" -> "%", "." -> "%2E", ".." -> "%2E%2E", and
/// / < > : " | ? * \ space % and control bytes -> %XX (uppercase hex). Other bytes are kept.
std::string encode_key_for_filesystem(const std::string& key);
/// The inverse: "%" -> "", %XX -> byte; an invalid % sequence is kept literally.
std::string decode_key_from_filesystem(const std::string& name);

}  // namespace tensordict
