// CRC16/XMODEM by a 256-entry table built at compile time, and the hash-tag rule of Redis Cluster.

#include "backends/redis/cluster_slot.h"

#include <array>

namespace tensordict {
namespace redis {

namespace {

constexpr std::array<uint16_t, 256> make_crc16_table() {
  std::array<uint16_t, 256> table{};
  for (int byte = 0; byte < 256; ++byte) {
    uint16_t crc = static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    table[static_cast<size_t>(byte)] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = make_crc16_table();

}  // namespace

uint16_t crc16_xmodem(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char c : bytes) crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  return crc;
}

std::string_view hash_tag(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;  // no '}', or "{}": the whole key
  return key.substr(open + 1, close - open - 1);
}

int key_hash_slot(std::string_view key) { return crc16_xmodem(hash_tag(key)) & (kClusterSlots - 1); }

}  // namespace redis
}  // namespace tensordict
