#pragma once
// How the C++ frontend names files to the user. Clang names headers by absolute path (ClangTool
// makes its main file absolute); those under the working directory are shown relative to it,
// as typed, the others as they are.

#include <filesystem>
#include <string>

namespace tdgen::cpp {

/// `path` (or a text starting with one) without the working directory's prefix.
inline std::string display_path(const std::string& path) {
  const std::string cwd = std::filesystem::current_path().string() + "/";
  return path.rfind(cwd, 0) == 0 ? path.substr(cwd.size()) : path;
}

}  // namespace tdgen::cpp
