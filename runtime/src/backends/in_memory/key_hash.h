#pragma once
// The 32-bit key hash of the in-memory backend's key table (not persisted anywhere), and the key
// comparison its lookups confirm a hash match with.

#include <c10/macros/Macros.h>

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tensordict {
namespace in_memory {

constexpr uint64_t kHashMultiplier = 0x9E3779B97F4A7C15ull;

template <typename T>
inline T load_bytes(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// Its high bits depend on every byte of the key: the index takes its buckets from them
/// (Fibonacci hashing), so the hash itself needs only one multiply for keys of up to 8 bytes,
/// off the critical path of building a level.
inline uint32_t key_hash(std::string_view key) {
  const char* p = key.data();
  size_t n = key.size();
  uint64_t v;
  if (n > 8) {
    // 8 bytes per step, then the last 8 bytes (overlapping the previous step).
    v = n;
    for (; n > 8; p += 8, n -= 8) v = (v ^ load_bytes<uint64_t>(p)) * kHashMultiplier;
    v ^= load_bytes<uint64_t>(p + n - 8);
  } else if (n >= 4) {
    // Two overlapping 4-byte reads cover 4 to 8 bytes: exact for a given length.
    v = (uint64_t{load_bytes<uint32_t>(p)} << 32) | load_bytes<uint32_t>(p + n - 4);
  } else if (n > 0) {
    v = (uint64_t{static_cast<uint8_t>(p[0])} << 16) | (uint64_t{static_cast<uint8_t>(p[n / 2])} << 8) |
        static_cast<uint8_t>(p[n - 1]);
  } else {
    v = 0;
  }
  // The length goes in the top byte, away from the bytes of short keys.
  return static_cast<uint32_t>(((v ^ (uint64_t{key.size()} << 56)) * kHashMultiplier) >> 32);
}

/// a == b, with the short keys of a tensordict compared in two loads a side (overlapping, within
/// both keys) instead of a call to memcmp, which costs more than the compare on keys this short.
/// Always inlined: for the hot loops that compare one key per leaf (AlignedLevel), where the
/// compiler's own choice varies with the size of the caller.
C10_ALWAYS_INLINE bool key_equals_inline(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  const char *p = a.data(), *q = b.data();
  if (n < 4) return n == 0 || (p[0] == q[0] && p[n / 2] == q[n / 2] && p[n - 1] == q[n - 1]);
  if (n <= 8) {
    return load_bytes<uint32_t>(p) == load_bytes<uint32_t>(q) &&
           load_bytes<uint32_t>(p + n - 4) == load_bytes<uint32_t>(q + n - 4);
  }
  if (n <= 16) {
    return load_bytes<uint64_t>(p) == load_bytes<uint64_t>(q) &&
           load_bytes<uint64_t>(p + n - 8) == load_bytes<uint64_t>(q + n - 8);
  }
  return std::memcmp(p, q, n) == 0;
}
inline bool key_equals(std::string_view a, std::string_view b) { return key_equals_inline(a, b); }

}  // namespace in_memory
}  // namespace tensordict
