#pragma once
// A directory written under a hidden sibling name and moved into place last. A reader, or a
// writer killed at any instant, sees the old directory whole or the new one whole; a failed
// write (a full disk, a bad leaf) leaves the old one untouched.

#include <string>

namespace tensordict {
namespace detail {

class StagedDirectory {
 public:
  /// Plans a write of the directory `final_dir` (absolute and normalised). It is staged when
  /// `final_dir` is missing, empty or holds a tensordict (a meta.json); a non-empty directory
  /// without a meta.json holds someone else's files, which a swap would take away, so it is
  /// written in place (its meta.json, written last, still marks it complete). Leftover staging
  /// directories of killed writers of the same destination are removed first.
  explicit StagedDirectory(std::string final_dir);
  /// Removes the staging directory unless commit() ran.
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  bool staged() const { return !staging_.empty(); }
  /// Where the file or directory that will be at `final_path` (below final_dir) is written now.
  std::string write_path(const std::string& final_path) const;
  /// Moves the staged directory into place in one step (an atomic exchange with an existing
  /// one, which is then removed). StorageError naming final_dir when that fails.
  void commit();

 private:
  std::string final_;
  std::string staging_;
  bool committed_ = false;
};

}  // namespace detail
}  // namespace tensordict
