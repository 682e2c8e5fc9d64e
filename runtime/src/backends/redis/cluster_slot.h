#pragma once
// Redis Cluster's map from keys to hash slots (the cluster specification, "Key distribution
// model"): CRC16 (XMODEM: polynomial 0x1021, initial value 0, no reflection) of the key, or of its
// hash tag, the bytes between the first '{' and the next '}' when there is at least one, modulo
// 16384. Every key of a store carries the tag {td_id}, so a whole store lives in one slot.

#include <cstdint>
#include <string_view>

namespace tensordict {
namespace redis {

inline constexpr int kClusterSlots = 16384;

/// CRC16/XMODEM of `bytes`.
uint16_t crc16_xmodem(std::string_view bytes);
/// The hashed part of `key`: its hash tag when it has a non-empty one, else the whole key.
std::string_view hash_tag(std::string_view key);
/// The cluster slot of `key` (what CLUSTER KEYSLOT answers).
int key_hash_slot(std::string_view key);

}  // namespace redis
}  // namespace tensordict
