#pragma once
// Helpers shared by the fuzz targets: what a target may throw, and the small archive format
// the memmap target unpacks into a directory.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <tensordict/errors.h>

namespace fuzz {

/// A reader refuses bad input with a typed tensordict error; anything else escaping it (a
/// c10::Error, std::bad_alloc, an out_of_range) is a bug, and libFuzzer reports it as a crash.
template <typename F>
void expect_typed_errors(F&& read) {
  try {
    read();
  } catch (const tensordict::Error&) {
  }
}

/// A fresh directory for one input, removed when it goes.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "td_fuzz.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// The image format of the memmap target: records of
///   u8 name length | name (a relative path) | u32 little-endian size | that many bytes,
/// written as files under `dir`. Names that would leave `dir` (absolute, "..", empty parts)
/// are skipped: the fuzzer tests the reader, not the file system. A truncated record ends it.
inline void unpack_image(std::string_view image, const std::filesystem::path& dir) {
  size_t at = 0;
  while (at < image.size()) {
    const size_t name_size = static_cast<uint8_t>(image[at++]);
    if (at + name_size + 4 > image.size()) return;
    const std::string name(image.substr(at, name_size));
    at += name_size;
    uint32_t size = 0;
    for (int i = 0; i < 4; ++i) size |= static_cast<uint32_t>(static_cast<uint8_t>(image[at + i])) << (8 * i);
    at += 4;
    const std::string_view bytes = image.substr(at, size);
    at += bytes.size();
    const std::filesystem::path rel(name);
    bool safe = !name.empty() && rel.is_relative() && name.find('\0') == std::string::npos;
    for (const auto& part : rel) safe = safe && part != ".." && part != "." && !part.empty();
    if (!safe) continue;
    std::error_code ignored;
    std::filesystem::create_directories((dir / rel).parent_path(), ignored);
    std::ofstream(dir / rel, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
}

/// The inverse of unpack_image, for the seed corpus.
inline std::string pack_image(const std::filesystem::path& dir) {
  std::string out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = std::filesystem::relative(entry.path(), dir).string();
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out.push_back(static_cast<char>(name.size()));
    out += name;
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((bytes.size() >> (8 * i)) & 0xff));
    out += bytes;
  }
  return out;
}

}  // namespace fuzz
