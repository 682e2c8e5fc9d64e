#include "core/staged_directory.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tensordict/errors.h>

#include "core/file_io.h"

namespace fs = std::filesystem;

namespace tensordict {
namespace detail {

namespace {

constexpr const char* kStagingTag = ".tdstage-";

// The hidden sibling names of `final_dir`'s staging directories: ".<name>.tdstage-<pid>-<n>".
std::string staging_prefix(const fs::path& final_dir) {
  return "." + final_dir.filename().string() + kStagingTag;
}

bool is_empty_directory(const std::string& dir) {
  std::error_code ec;
  return fs::is_empty(dir, ec) && !ec;
}

// Swaps two directories in one step where the file system can (Linux renameat2); false when
// it cannot, so that the caller falls back to two renames.
bool exchange_directories(const std::string& a, const std::string& b) {
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return true;
  const int err = errno;
  TD_CHECK(err == EINVAL || err == ENOSYS || err == EOPNOTSUPP, StorageError, "Cannot move the new ", b,
           " into place: ", std::strerror(err));
#else
  (void)a;
  (void)b;
#endif
  return false;
}

}  // namespace

StagedDirectory::StagedDirectory(std::string final_dir) : final_(std::move(final_dir)) {
  struct stat st;
  if (::lstat(final_.c_str(), &st) == 0) {
    TD_CHECK(!S_ISLNK(st.st_mode), StorageError, "Refusing to write ", final_, " through symlink.");
    TD_CHECK(S_ISDIR(st.st_mode), StorageError, "Cannot use ", final_,
             " as a directory: a file of that name exists.");
    const bool holds_tensordict = ::lstat((final_ + "/meta.json").c_str(), &st) == 0;
    if (!holds_tensordict && !is_empty_directory(final_)) return;  // someone else's files: in place
  }
  const fs::path parent = fs::path(final_).parent_path();
  // Killed writers' staging directories hold partial tensordicts nobody will finish. The old
  // directory of a fallback swap ("-old", see commit) is kept while it may be the only copy.
  remove_dead_writers_leftovers(parent.string(), staging_prefix(final_), path_exists(final_) ? "" : "-old");
  std::error_code ec;
  fs::create_directories(parent, ec);
  TD_CHECK(!ec, StorageError, "Cannot create directory ", parent.string(), ": ", ec.message());
  static std::atomic<int> counter{0};
  for (;;) {
    std::string candidate = (parent / (staging_prefix(final_) + std::to_string(::getpid()) + "-" +
                                       std::to_string(counter++))).string();
    if (::mkdir(candidate.c_str(), 0755) == 0) {
      staging_ = std::move(candidate);
      return;
    }
    TD_CHECK(errno == EEXIST, StorageError, "Cannot create the staging directory ", candidate, " for ", final_,
             ": ", std::strerror(errno));
  }
}

StagedDirectory::~StagedDirectory() {
  if (staging_.empty() || committed_) return;
  remove_tree(staging_);
}

std::string StagedDirectory::write_path(const std::string& final_path) const {
  if (staging_.empty()) return final_path;
  TD_CHECK(final_path.compare(0, final_.size(), final_) == 0, RuntimeError, "internal: ", final_path, " is not below ", final_);
  return staging_ + final_path.substr(final_.size());
}

void StagedDirectory::commit() {
  if (staging_.empty() || committed_) return;
  // rename() replaces a missing or empty directory atomically; a full one is exchanged.
  if (::rename(staging_.c_str(), final_.c_str()) == 0) {
    committed_ = true;
    return;
  }
  const int err = errno;
  TD_CHECK(err == ENOTEMPTY || err == EEXIST, StorageError, "Cannot move the new ", final_, " into place: ",
           std::strerror(err));
  if (exchange_directories(staging_, final_)) {
    committed_ = true;  // staging_ now holds the old directory
  } else {
    // No atomic exchange here: the old directory steps aside first, so a kill between the two
    // renames leaves no destination (a typed "meta.json is missing"), never a mix.
    const std::string old = staging_ + "-old";
    TD_CHECK(::rename(final_.c_str(), old.c_str()) == 0, StorageError, "Cannot move the old ", final_,
             " aside: ", std::strerror(errno));
    if (::rename(staging_.c_str(), final_.c_str()) != 0) {
      const int move_err = errno;
      ::rename(old.c_str(), final_.c_str());
      TD_THROW(StorageError, "Cannot move the new ", final_, " into place: ", std::strerror(move_err));
    }
    committed_ = true;
    staging_ = old;
  }
  remove_tree(staging_);
}

}  // namespace detail
}  // namespace tensordict
