// The hiredis connection under every TensorDictStore, against a real redis-server: pipelines,
// binary data, and the faults a store must report as typed errors (no server, a timeout, a
// server that goes away and comes back, refused authentication).
#include "support/catch_torch.h"

#include <string>

#include <tensordict/errors.h>

#include "backends/redis/redis_client.h"
#include "support/exception_message.h"
#include "support/redis_server.h"

using tensordict::StorageError;
using tensordict::StoreOptions;
using tensordict::redis::Command;
using tensordict::redis::RedisClient;
using testing_support::RedisServer;
using testing_support::store_options;

namespace {

// The message of the StorageError `f` throws.
template <class F>
std::string storage_error(F&& f) {
  return testing_support::message_of<StorageError>(std::forward<F>(f));
}

}  // namespace

TEST_CASE("a pipeline sends its commands at once and returns one reply per command", "[redis]") {
  RedisServer server;
  RedisClient client(store_options(server));
  std::string blob(1 << 20, '\0');
  for (size_t i = 0; i < blob.size(); i += 4099) blob[i] = static_cast<char>(i % 251);
  const std::vector<Command> commands = {{"SET", "k:blob", blob},
                                         {"SADD", "k:set", "a", "b"},
                                         {"GET", "k:blob"},
                                         {"GETRANGE", "k:blob", "4099", "4099"},
                                         {"GET", "k:missing"},
                                         {"HGET", "k:blob", "f"}};  // wrong type: an error reply
  auto replies = client.pipeline(commands);
  REQUIRE(replies.size() == commands.size());
  CHECK(replies[0].str() == "OK");
  CHECK(replies[1].integer() == 2);
  CHECK(replies[2].str() == blob);  // binary-safe both ways, NUL bytes included
  CHECK(replies[3].str() == std::string(1, static_cast<char>(4099 % 251)));
  CHECK(replies[4].is_nil());
  CHECK(replies[5].is_error());
  const std::string message = storage_error([&] { client.check(replies[5], commands[5]); });
  CHECK(message.rfind("unix:" + server.socket() + ": HGET k:blob: WRONGTYPE", 0) == 0);
}

TEST_CASE("an unreachable server is a StorageError naming it", "[redis]") {
  StoreOptions options;
  options.unix_socket = "/nonexistent/redis.sock";
  CHECK_THAT(storage_error([&] { RedisClient client(options); }),
             Catch::StartsWith("unix:/nonexistent/redis.sock: cannot connect to the server"));
  StoreOptions tcp;
  tcp.host = "127.0.0.1";
  tcp.port = 1;  // nothing listens there
  CHECK_THAT(storage_error([&] { RedisClient client(tcp); }), Catch::StartsWith("127.0.0.1:1: cannot connect"));
}

TEST_CASE("a command without a reply in time is a StorageError, and the next command works", "[redis]") {
  RedisServer server;
  StoreOptions options = store_options(server);
  options.command_timeout = std::chrono::milliseconds(200);
  RedisClient client(options);
  // BLPOP on an empty list waits 2 s on the server: longer than the client's timeout.
  CHECK_THAT(storage_error([&] { client.run({"BLPOP", "k:empty", "2"}); }),
             Catch::Contains("BLPOP k:empty: no reply within the command timeout (200 ms)"));
  CHECK(client.run({"PING"})[0].str() == "PONG");
}

TEST_CASE("a server that goes away is a StorageError, and the client reconnects when it is back", "[redis]") {
  RedisServer server;
  RedisClient client(store_options(server));
  client.run({"SET", "k", "v"});
  server.kill();
  CHECK_THAT(storage_error([&] { client.run({"GET", "k"}); }), Catch::Contains("GET k"));
  CHECK_THAT(storage_error([&] { client.run({"GET", "k"}); }), Catch::Contains("cannot connect"));
  server.start();
  CHECK(client.run({"PING"})[0].str() == "PONG");
}

TEST_CASE("authentication and the database are set up on every connection", "[redis]") {
  RedisServer server;
  StoreOptions options = store_options(server);
  options.password = "secret-value";
  const std::string refused = storage_error([&] { RedisClient client(options); });
  CHECK_THAT(refused, Catch::Contains("authentication failed"));
  CHECK(refused.find("secret-value") == std::string::npos);

  StoreOptions db1 = store_options(server);
  db1.db = 1;
  RedisClient one(db1);
  RedisClient zero(store_options(server));
  one.run({"SET", "k:db", "1"});
  CHECK(zero.run({"GET", "k:db"})[0].is_nil());
  CHECK(one.run({"GET", "k:db"})[0].str() == "1");
}
