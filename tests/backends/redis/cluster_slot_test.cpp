// Redis Cluster's key-to-slot map (issue 35, item 1's first part): the specification's examples,
// and the slot of many keys against what a real cluster-enabled redis-server answers.
#include "support/catch_torch.h"

#include <random>
#include <string>

#include <hiredis/hiredis.h>
#include <tensordict/errors.h>

#include "backends/redis/cluster_map.h"
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

namespace {

// An error reply as hiredis would hand it over.
struct ErrorReply {
  explicit ErrorReply(std::string text) : text_(std::move(text)) {
    reply_.type = REDIS_REPLY_ERROR;
    reply_.str = text_.data();
    reply_.len = text_.size();
  }
  tensordict::redis::ReplyRef ref() const { return tensordict::redis::ReplyRef(&reply_); }

 private:
  std::string text_;
  redisReply reply_{};
};

}  // namespace

TEST_CASE("redirections are read from MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING and a script's non-local key",
          "[redis][cluster]") {
  using tensordict::redis::NodeAddress;
  using tensordict::redis::parse_redirect;
  using tensordict::redis::Redirect;
  const NodeAddress from{"10.0.0.1", 7000, ""};
  const auto moved = parse_redirect(ErrorReply("MOVED 3999 127.0.0.1:6381").ref(), from);
  REQUIRE(moved);
  CHECK(moved->kind == Redirect::Moved);
  CHECK(moved->slot == 3999);
  CHECK(moved->node == NodeAddress{"127.0.0.1", 6381, ""});
  const auto ask = parse_redirect(ErrorReply("ASK 12 :7002").ref(), from);  // no host: the answering one's
  REQUIRE(ask);
  CHECK(ask->kind == Redirect::Ask);
  CHECK(ask->node == NodeAddress{"10.0.0.1", 7002, ""});
  CHECK(parse_redirect(ErrorReply("TRYAGAIN Multiple keys request during rehashing of slot").ref(), from)->kind ==
        Redirect::Wait);
  CHECK(parse_redirect(ErrorReply("CLUSTERDOWN The cluster is down").ref(), from)->kind == Redirect::Wait);
  CHECK(parse_redirect(ErrorReply("LOADING Redis is loading the dataset in memory").ref(), from)->kind == Redirect::Wait);
  CHECK(parse_redirect(ErrorReply("ERR Script attempted to access a non local key in a cluster node").ref(), from)->kind ==
        Redirect::Wait);
  CHECK_FALSE(parse_redirect(ErrorReply("WRONGTYPE Operation against a key holding the wrong kind of value").ref(), from));
  CHECK_THROWS_AS(parse_redirect(ErrorReply("MOVED 3999").ref(), from), tensordict::StorageError);
  CHECK_THROWS_AS(parse_redirect(ErrorReply("MOVED x 127.0.0.1:1").ref(), from), tensordict::StorageError);
}

TEST_CASE("a command's slot is its first key's; scripts name theirs after numkeys", "[redis][cluster]") {
  using tensordict::redis::command_slot;
  CHECK(command_slot({"GET", "a{t}b"}) == key_hash_slot("t"));
  CHECK(command_slot({"EVAL", "return 1", "1", "{t}:x", "arg"}) == key_hash_slot("t"));
  CHECK(command_slot({"EVAL", "return 1", "0"}) == -1);
  CHECK(command_slot({"MULTI"}) == -1);
  CHECK(command_slot({"WAIT", "1", "100"}) == -1);
  CHECK(command_slot({"cluster", "keyslot", "x"}) == -1);
}

TEST_CASE("the slot map follows a MOVED answer for one slot and lists each master once", "[redis][cluster]") {
  using tensordict::redis::NodeAddress;
  tensordict::redis::SlotMap map;
  CHECK(map.master(0) == nullptr);
  const NodeAddress a{"127.0.0.1", 1, ""}, b{"127.0.0.1", 2, ""};
  map.set_master(100, a);
  map.set_master(101, b);
  map.set_master(100, b);  // cut out of nothing, then replaced
  CHECK(*map.master(100) == b);
  CHECK(*map.master(101) == b);
  CHECK(map.master(99) == nullptr);
  CHECK((map.masters() == std::vector<NodeAddress>{b}));
}
