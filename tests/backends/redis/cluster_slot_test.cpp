// Redis Cluster's key-to-slot map (issue 35, item 1's first part): the specification's examples,
// and the slot of many keys against what a real cluster-enabled redis-server answers.
#include "support/catch_torch.h"

#include <random>
#include <string>

#include "backends/redis/cluster_slot.h"
#include "backends/redis/redis_client.h"
#include "support/redis_server.h"

using tensordict::redis::crc16_xmodem;
using tensordict::redis::hash_tag;
using tensordict::redis::key_hash_slot;

TEST_CASE("CRC16 and hash tags follow the cluster specification", "[redis][cluster]") {
  CHECK(crc16_xmodem("123456789") == 0x31C3);  // the specification's check value
  CHECK(crc16_xmodem("") == 0);
  CHECK(key_hash_slot("123456789") == 0x31C3 % 16384);
  // The specification's hash-tag examples.
  CHECK(hash_tag("{user1000}.following") == "user1000");
  CHECK(key_hash_slot("{user1000}.following") == key_hash_slot("{user1000}.followers"));
  CHECK(hash_tag("foo{}{bar}") == "foo{}{bar}");  // an empty tag: the whole key
  CHECK(hash_tag("foo{{bar}}zap") == "{bar");
  CHECK(hash_tag("foo{bar}{zap}") == "bar");
  CHECK(hash_tag("no-braces") == "no-braces");
  CHECK(hash_tag("open{only") == "open{only");
  // A store's keys share its id's slot.
  CHECK(key_hash_slot("tensordict:{abc}:d:obs") == key_hash_slot("tensordict:{abc}:__batch_size__"));
}

TEST_CASE("key_hash_slot agrees with CLUSTER KEYSLOT of a real server", "[redis][cluster]") {
  testing_support::RedisServer server({"--cluster-enabled", "yes"});
  tensordict::redis::RedisClient client(testing_support::store_options(server));
  std::mt19937 rng(34);
  const std::string alphabet = "ab{}:xyz019_-{}";
  std::vector<tensordict::redis::Command> commands;
  std::vector<std::string> keys;
  for (int i = 0; i < 500; ++i) {
    std::string key;
    const int length = static_cast<int>(rng() % 24);
    for (int c = 0; c < length; ++c) key.push_back(alphabet[rng() % alphabet.size()]);
    keys.push_back(key);
    commands.push_back({"CLUSTER", "KEYSLOT", key});
  }
  const auto replies = client.pipeline(commands);
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO(keys[i]);
    REQUIRE_FALSE(replies[i].is_error());
    CHECK(key_hash_slot(keys[i]) == replies[i].integer());
  }
}
