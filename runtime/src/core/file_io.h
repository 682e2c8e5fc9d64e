#pragma once
// File primitives of the file-backed backends (memmap, consolidated): checked writes, lazy
// mappings and the registry that remembers which file a mapped tensor comes from. Every error
// is a StorageError naming the file.

#include <cstddef>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include <tensordict/function_ref.h>

namespace tensordict {
namespace detail {

/// An absolute, lexically normalised path (symlinks are not resolved).
std::string absolute_path(const std::string& path);
/// True when something (file, dir or dangling symlink) exists at `path`, without following it.
bool path_exists(const std::string& path);
/// Creates `dir` (and missing parents) when absent. Refuses a symlink or a non-directory.
void ensure_directory(const std::string& dir);
/// Writes `n` bytes to `path`: created when missing (StorageError when it exists and
/// !existsok), left exactly `n` bytes long unless a live mapping of the file is longer (then
/// the tail stays, as Python tensordict leaves it). Refuses symlinks. Errors name `shown`
/// (default: `path`), the file the user asked for when `path` is its staging copy.
void write_file(const std::string& path, const void* data, size_t n, bool existsok,
                const std::string& shown = {});
/// write_file in parts, from several threads: begin_file_write leaves the file as write_file
/// does before it writes (created, or shrunk to `n`), then each write_file_part writes `n`
/// bytes at `offset` of it. Once every part of [0, n) is written, the file is write_file's.
void begin_file_write(const std::string& path, size_t n, bool existsok, const std::string& shown = {});
void write_file_part(const std::string& path, const void* data, size_t n, size_t offset,
                     const std::string& shown = {});
/// Removes `path` and everything below it (links themselves, never what they point to); errors
/// are ignored. Not std::filesystem::remove_all: pip's LibTorch 2.x exports its own copy of it,
/// which the dynamic linker binds first and which crashes (docs/architecture.md).
void remove_tree(const std::string& path) noexcept;
/// A file of `n` zero bytes (sparse), same rules as write_file.
void create_zero_file(const std::string& path, size_t n, bool existsok, const std::string& shown = {});
/// Replaces the file `path` by `n` new bytes atomically: they go to a temporary file in the
/// same directory, renamed over `path` last, so a reader (or a writer killed at any point)
/// sees the old contents or the new ones, never a part; on failure the temporary file is
/// removed and `path` is untouched. Refuses symlinks. Errors name `path`.
void replace_file(const std::string& path, const void* data, size_t n);
/// replace_file of a small text file (meta.json); errors name `shown` (default: `path`).
void write_text_file(const std::string& path, const std::string& text, const std::string& shown = {});
/// Renames the new file `from` to `to` unless something is there already (checked and moved
/// in one step, so a file another writer put at `to` meanwhile is never replaced): false then,
/// with `from` left in place. StorageError naming `to` for any other failure.
bool move_new_file(const std::string& from, const std::string& to);
/// A new name beside `path` to write its replacement under, unique to this process and call:
/// "<path>.tmp-<pid>-<n>".
std::string temporary_path(const std::string& path);
/// Removes the temporaries (temporary_path) of `path` that writers killed before their rename
/// left behind.
void remove_dead_temporaries(const std::string& path);
/// Removes what killed writers left in `dir`: entries named `<prefix><pid>-...` whose process
/// `pid` no longer runs (a temporary file or staging directory never renamed into place).
/// Entries ending in `keep_suffix` (when not empty) are left.
void remove_dead_writers_leftovers(const std::string& dir, const std::string& prefix,
                                   const std::string& keep_suffix = {});
/// Removes the file `path` when it exists (a stale sidecar); StorageError when that fails.
void remove_if_present(const std::string& path);
/// The size of the regular file `path`; StorageError naming it when it is missing.
int64_t file_size(const std::string& path);
/// Reads a small text file; StorageError naming it when it cannot be read.
std::string read_text_file(const std::string& path);
/// The bytes of a tensor of `shape` and `dtype`: StorageError naming `where` when a size is
/// negative or the count overflows int64 (a corrupt or hostile meta.json), so nothing is
/// allocated or mapped from it.
int64_t shape_nbytes(c10::IntArrayRef shape, at::ScalarType dtype, const std::string& where);
/// The same, `where` made only for the error (a loader asks this once per leaf).
int64_t shape_nbytes(c10::IntArrayRef shape, at::ScalarType dtype, FunctionRef<std::string()> where);
/// True when `path` itself is a symbolic link (not followed).
bool is_symlink(const std::string& path);
/// Maps the first numel*itemsize bytes of `path` as a tensor. `shared` tells whether the
/// mapping is MAP_SHARED (writable file) or MAP_PRIVATE.
at::Tensor map_file(const std::string& path, at::ScalarType dtype, c10::IntArrayRef shape,
                    bool writable, bool* shared = nullptr);
/// The file `tensor` maps when it covers a whole registered mapping.
std::optional<std::string> mapped_filename(const at::Tensor& tensor);
/// True when `tensor` already is the whole mapping of `path` (nothing to write). A tensor that
/// maps another file is a StorageError unless `copy_existing` (Python's rule), then false.
bool already_maps(const at::Tensor& tensor, const std::string& path, bool copy_existing);
/// True when `tensor`'s storage lies inside any mapping of `path`.
bool storage_maps(const at::Tensor& tensor, const std::string& path);

}  // namespace detail
}  // namespace tensordict
