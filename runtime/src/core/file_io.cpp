#include "core/file_io.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <utility>

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>
#include <tensordict/errors.h>

#include "core/format.h"

namespace fs = std::filesystem;

namespace tensordict {
namespace detail {

namespace {

struct Mapping {
  std::string path;
  size_t length;
};

// Live mappings by base address. Entries are removed by the tensor deleter (munmap).
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, Mapping>& registry() {
  static std::map<uintptr_t, Mapping> r;
  return r;
}

std::string errno_str(int err) { return std::strerror(err); }

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Length of the longest live mapping of `path`, 0 when none.
size_t live_mapping_length(const std::string& path) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  size_t longest = 0;
  for (const auto& kv : registry()) {
    if (kv.second.path == path) longest = std::max(longest, kv.second.length);
  }
  return longest;
}

int open_for_write(const std::string& path, bool existsok) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    TD_CHECK(!S_ISLNK(st.st_mode), StorageError, "Refusing to write ", path, " through symlink.");
    TD_CHECK(existsok, StorageError, "The file ", path, " already exists.");
    TD_CHECK(S_ISREG(st.st_mode), StorageError, "Cannot write ", path,
             ": it exists and is not a regular file.");
  }
  int flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (existsok ? 0 : O_EXCL);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST) TD_THROW(StorageError, "The file ", path, " already exists.");
    if (err == ELOOP) TD_THROW(StorageError, "Refusing to write ", path, " through symlink.");
    TD_THROW(StorageError, "Cannot open ", path, " for writing: ", errno_str(err));
  }
  return fd;
}

// Makes the file exactly `n` bytes unless a live mapping needs more (shrinking a file another
// mapping covers would make touching that mapping's tail a SIGBUS).
void set_length(int fd, const std::string& path, size_t n) {
  struct stat st;
  TD_CHECK(::fstat(fd, &st) == 0, StorageError, "Cannot stat ", path, ": ", errno_str(errno));
  size_t current = static_cast<size_t>(st.st_size);
  if (current == n) return;
  if (current > n && live_mapping_length(path) > n) return;
  TD_CHECK(::ftruncate(fd, static_cast<off_t>(n)) == 0, StorageError, "Cannot resize ", path,
           " to ", n, " bytes: ", errno_str(errno));
}

}  // namespace

std::string absolute_path(const std::string& path) {
  return fs::absolute(fs::path(path)).lexically_normal().string();
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

void ensure_directory(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) == 0) {
    TD_CHECK(!S_ISLNK(st.st_mode), StorageError, "Refusing to write ", dir, " through symlink.");
    TD_CHECK(S_ISDIR(st.st_mode), StorageError, "Cannot use ", dir,
             " as a directory: a file of that name exists.");
    return;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  TD_CHECK(!ec, StorageError, "Cannot create directory ", dir, ": ", ec.message());
}

namespace {

// Writes all of [data, data + n) at `offset` of `fd`; StorageError naming `shown`.
void write_all(int fd, const void* data, size_t n, const std::string& shown, size_t offset = 0) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::pwrite(fd, p + done, std::min<size_t>(n - done, size_t{1} << 30), static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    TD_CHECK(w > 0, StorageError, "Cannot write ", shown, " (", done, " of ", n, " bytes written): ",
             errno_str(errno));
    done += static_cast<size_t>(w);
  }
}

const std::string& or_path(const std::string& shown, const std::string& path) { return shown.empty() ? path : shown; }

}  // namespace

namespace {

// Opens `path` for write_file: created when missing, shrunk to `n` when longer. Only shrunk: a
// file shorter than n grows by the write itself (extending it with ftruncate first makes the
// kernel allocate the blocks twice).
int open_sized(const std::string& path, size_t n, bool existsok, const std::string& shown) {
  Fd f{open_for_write(path, existsok)};
  struct stat st;
  TD_CHECK(::fstat(f.fd, &st) == 0, StorageError, "Cannot stat ", or_path(shown, path), ": ", errno_str(errno));
  if (static_cast<size_t>(st.st_size) > n) set_length(f.fd, path, n);
  return std::exchange(f.fd, -1);
}

}  // namespace

void write_file(const std::string& path, const void* data, size_t n, bool existsok, const std::string& shown) {
  Fd f{open_sized(path, n, existsok, shown)};
  write_all(f.fd, data, n, or_path(shown, path));
}

void begin_file_write(const std::string& path, size_t n, bool existsok, const std::string& shown) {
  Fd f{open_sized(path, n, existsok, shown)};
}

void write_file_part(const std::string& path, const void* data, size_t n, size_t offset, const std::string& shown) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  TD_CHECK(fd >= 0, StorageError, "Cannot open ", or_path(shown, path), " for writing: ", errno_str(errno));
  Fd f{fd};
  write_all(f.fd, data, n, or_path(shown, path), offset);
}

namespace {
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;  // keep going: what cannot be removed stays, as remove_all with an error_code
}
}  // namespace

void remove_tree(const std::string& path) noexcept {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    ::remove(path.c_str());
    return;
  }
  // Children first (FTW_DEPTH), links not followed (FTW_PHYS).
  ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void create_zero_file(const std::string& path, size_t n, bool existsok, const std::string& shown) {
  const std::string& name = or_path(shown, path);
  Fd f{open_for_write(path, existsok)};
  // Drop old contents first so the whole file reads as zeros.
  if (live_mapping_length(path) == 0) {
    TD_CHECK(::ftruncate(f.fd, 0) == 0, StorageError, "Cannot truncate ", name, ": ", errno_str(errno));
    TD_CHECK(::ftruncate(f.fd, static_cast<off_t>(n)) == 0, StorageError, "Cannot resize ", name, " to ", n,
             " bytes: ", errno_str(errno));
    return;
  }
  set_length(f.fd, path, n);
  std::vector<char> zeros(std::min<size_t>(n, size_t{1} << 20), 0);
  for (size_t done = 0; done < n;) {
    size_t chunk = std::min(zeros.size(), n - done);
    ssize_t w = ::pwrite(f.fd, zeros.data(), chunk, static_cast<off_t>(done));
    if (w < 0 && errno == EINTR) continue;
    TD_CHECK(w > 0, StorageError, "Cannot write ", name, ": ", errno_str(errno));
    done += static_cast<size_t>(w);
  }
}

namespace {
void replace_file_as(const std::string& path, const void* data, size_t n, const std::string& shown) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    TD_CHECK(!S_ISLNK(st.st_mode), StorageError, "Refusing to write ", shown, " through symlink.");
  }
  const std::string temp = temporary_path(path);
  try {
    Fd f;
    f.fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    TD_CHECK(f.fd >= 0, StorageError, "Cannot write ", shown, ": cannot create ", temp, ": ", errno_str(errno));
    write_all(f.fd, data, n, shown);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    TD_THROW(StorageError, "Cannot replace ", shown, ": ", errno_str(err));
  }
}
}  // namespace

std::string temporary_path(const std::string& path) {
  // Unique per call: two threads replacing one file must not share a temporary file.
  static std::atomic<unsigned> counter{0};
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

void remove_dead_temporaries(const std::string& path) {
  const fs::path target(path);
  remove_dead_writers_leftovers(target.parent_path().string(), target.filename().string() + ".tmp-");
}

void replace_file(const std::string& path, const void* data, size_t n) { replace_file_as(path, data, n, path); }

bool move_new_file(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  int err = errno;
  if (err == EINVAL || err == ENOSYS || err == EOPNOTSUPP) {
    // A file system without RENAME_NOREPLACE: link() refuses an existing name as well.
    if (::link(from.c_str(), to.c_str()) == 0) {
      ::unlink(from.c_str());
      return true;
    }
    err = errno;
  }
  TD_CHECK(err == EEXIST, StorageError, to, ": cannot move the new file into place: ", errno_str(err));
  return false;
}

void write_text_file(const std::string& path, const std::string& text, const std::string& shown) {
  replace_file_as(path, text.data(), text.size(), or_path(shown, path));
}

void remove_dead_writers_leftovers(const std::string& dir, const std::string& prefix, const std::string& keep_suffix) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    if (!keep_suffix.empty() && name.size() >= keep_suffix.size() &&
        name.compare(name.size() - keep_suffix.size(), keep_suffix.size(), keep_suffix) == 0) {
      continue;
    }
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || *end != '-' || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code ignored;
    remove_tree(entry.path().string());
  }
}

void remove_if_present(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    TD_CHECK(errno == ENOENT, StorageError, "Cannot remove ", path, ": ", errno_str(errno));
  }
}

int64_t file_size(const std::string& path) {
  struct stat st;
  TD_CHECK(::stat(path.c_str(), &st) == 0, StorageError, path, ": file is missing or unreadable (",
           errno_str(errno), ")");
  TD_CHECK(S_ISREG(st.st_mode), StorageError, path, ": not a regular file");
  return static_cast<int64_t>(st.st_size);
}

std::string read_text_file(const std::string& path) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) {
    int err = errno;
    TD_CHECK(err != ENOENT, StorageError, path, ": file is missing");
    TD_THROW(StorageError, path, ": cannot be read: ", errno_str(err));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(f.fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    TD_CHECK(r >= 0, StorageError, path, ": cannot be read: ", errno_str(errno));
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

int64_t shape_nbytes(c10::IntArrayRef shape, at::ScalarType dtype, const std::string& where) {
  return shape_nbytes(shape, dtype, [&where] { return where; });
}

int64_t shape_nbytes(c10::IntArrayRef shape, at::ScalarType dtype, FunctionRef<std::string()> where) {
  int64_t n = static_cast<int64_t>(c10::elementSize(dtype));
  for (int64_t s : shape) {
    TD_CHECK(s >= 0, StorageError, where(), ": negative size in shape ", detail::size_str(shape));
    TD_CHECK(!__builtin_mul_overflow(n, s, &n), StorageError, where(), ": shape ", detail::size_str(shape), " of ",
             torch_dtype_name(dtype), " holds more bytes than int64 can count");
  }
  // A zero dim makes the count 0 whatever the others are; they must still be countable.
  return n;
}

bool is_symlink(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

at::Tensor map_file(const std::string& path, at::ScalarType dtype, c10::IntArrayRef shape,
                    bool writable, bool* shared) {
  const size_t nbytes = static_cast<size_t>(shape_nbytes(shape, dtype, path));
  const std::string abs = absolute_path(path);
  Fd f;
  bool is_shared = false;
  if (writable) {
    f.fd = ::open(abs.c_str(), O_RDWR | O_CLOEXEC);
    is_shared = f.fd >= 0;
  }
  if (f.fd < 0) f.fd = ::open(abs.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) {
    int err = errno;
    TD_CHECK(err != ENOENT, StorageError, abs, ": file is missing (needed for shape ",
             detail::size_str(shape), ", dtype ", torch_dtype_name(dtype), ")");
    TD_THROW(StorageError, abs, ": cannot be opened: ", errno_str(err));
  }
  struct stat st;
  TD_CHECK(::fstat(f.fd, &st) == 0, StorageError, "Cannot stat ", abs, ": ", errno_str(errno));
  TD_CHECK(S_ISREG(st.st_mode), StorageError, abs, ": not a regular file");
  TD_CHECK(static_cast<size_t>(st.st_size) >= nbytes, StorageError, abs, ": file is truncated: it holds ",
           st.st_size, " bytes but shape ", detail::size_str(shape), " of dtype ",
           torch_dtype_name(dtype), " needs ", nbytes, " bytes");
  if (shared) *shared = is_shared;
  auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
  if (nbytes == 0) return at::empty(shape, options);
  int prot = PROT_READ | PROT_WRITE;  // private mappings are copy-on-write, so writable too
  void* base = ::mmap(nullptr, nbytes, prot, is_shared ? MAP_SHARED : MAP_PRIVATE, f.fd, 0);
  TD_CHECK(base != MAP_FAILED, StorageError, "Cannot map ", abs, ": ", errno_str(errno));
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[reinterpret_cast<uintptr_t>(base)] = Mapping{abs, nbytes};
  }
  auto deleter = [nbytes](void* p) {
    {
      std::lock_guard<std::mutex> lock(registry_mutex());
      registry().erase(reinterpret_cast<uintptr_t>(p));
    }
    ::munmap(p, nbytes);
  };
  return at::from_blob(base, shape, deleter, options);
}

std::optional<std::string> mapped_filename(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.device().is_cpu() || !tensor.has_storage()) return std::nullopt;
  const void* base = tensor.storage().data();
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(reinterpret_cast<uintptr_t>(base));
  if (it == registry().end()) return std::nullopt;
  if (tensor.data_ptr() != base || !tensor.is_contiguous() ||
      static_cast<size_t>(tensor.numel()) * tensor.element_size() != it->second.length) {
    return std::nullopt;
  }
  return it->second.path;
}

bool already_maps(const at::Tensor& tensor, const std::string& path, bool copy_existing) {
  const std::optional<std::string> existing = mapped_filename(tensor);
  if (!existing) return false;
  if (*existing == path) return true;
  TD_CHECK(copy_existing, StorageError, "A filename was provided but the tensor already has a file associated (",
           *existing, "); pass copy_existing=true to copy it to ", path);
  return false;
}

bool storage_maps(const at::Tensor& tensor, const std::string& path) {
  if (!tensor.defined() || !tensor.device().is_cpu() || !tensor.has_storage()) return false;
  const void* base = tensor.storage().data();
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(reinterpret_cast<uintptr_t>(base));
  return it != registry().end() && it->second.path == path;
}

}  // namespace detail
}  // namespace tensordict
