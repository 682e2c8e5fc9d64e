// Creating a store (issue 30): from_tensordict and from_schema refuse an id the server already
// holds a store under unless StoreOptions::overwrite, and from_schema preallocates non-tensor
// leaves beside the zero-filled tensors.
#include "support/catch_torch.h"

#include <string>

#include <ATen/ATen.h>
#include <tensordict/backends/store.h>
#include <tensordict/tensordict.h>

#include "backends/redis/redis_client.h"
#include "support/redis_server.h"

using namespace tensordict;
using testing_support::RedisServer;
using testing_support::store_options;

namespace {

StoreOptions with_id(const RedisServer& server, const std::string& id, bool overwrite = false) {
  StoreOptions options = store_options(server);
  options.td_id = id;
  options.overwrite = overwrite;
  return options;
}

float reward_sum(const RedisServer& server, const std::string& id) {
  return TensorDictStore::from_store(id, store_options(server)).get("reward").sum().item<float>();
}

std::string list_of(const TensorDict& td, const NestedKey& key) { return td.get_non_tensor(key).tolist().python_str(); }
// One value for every row (what a uniform non-tensor entry holds), as Python's repr prints it.
std::string uniform_of(const TensorDict& td, const NestedKey& key) {
  const NonTensorData value = td.get_non_tensor(key);
  return value.is_uniform() ? value.value().python_repr() : "not uniform: " + value.tolist().python_str();
}

}  // namespace

TEST_CASE("creating a store under an id the server holds is refused unless overwrite is set", "[redis][store]") {
  RedisServer server;
  TensorDictStore::from_tensordict(TensorDict({{"reward", at::ones({4})}}, {4}), with_id(server, "buffer"));
  REQUIRE(reward_sum(server, "buffer") == 4.f);

  // The user's data-loss case: a second from_schema (or from_tensordict) under the same id.
  // (A macro: Catch's combined matchers keep references to their parts, so one cannot be stored.)
#define NAMES_IT                                                                                      \
  Catch::Contains("TensorDictStore 'buffer'") && Catch::Contains("already exists") &&               \
      Catch::Contains("StoreOptions::overwrite") && Catch::Contains("from_store")
  CHECK_THROWS_AS(TensorDictStore::from_schema({{"reward", {{}, at::kFloat}}}, {4}, with_id(server, "buffer")),
                  StorageError);
  CHECK_THROWS_WITH(TensorDictStore::from_schema({{"reward", {{}, at::kFloat}}}, {4}, with_id(server, "buffer")),
                    NAMES_IT);
  CHECK_THROWS_WITH(
      TensorDictStore::from_tensordict(TensorDict({{"reward", at::zeros({4})}}, {4}), with_id(server, "buffer")),
      NAMES_IT);
  CHECK(reward_sum(server, "buffer") == 4.f);
#undef NAMES_IT

  // Another prefix is another store: allowed.
  StoreOptions other = with_id(server, "buffer");
  other.prefix = "elsewhere";
  CHECK(TensorDictStore::from_schema({{"reward", {{}, at::kFloat}}}, {4}, other).get("reward").sum().item<float>() ==
        0.f);
  CHECK(reward_sum(server, "buffer") == 4.f);

  // overwrite: replaced whole, the old keys gone.
  TensorDictStore::from_tensordict(TensorDict({{"reward", at::ones({4})}, {"old", at::ones({4})}}, {4}),
                                   with_id(server, "buffer", true));
  TensorDictStore replaced =
      TensorDictStore::from_schema({{"reward", {{}, at::kFloat}}}, {2}, with_id(server, "buffer", true));
  CHECK(replaced.batch_size() == c10::IntArrayRef({2}));
  CHECK(reward_sum(server, "buffer") == 0.f);
  CHECK_FALSE(TensorDictStore::from_store("buffer", store_options(server)).contains("old"));

  // A fresh id (given or drawn) needs no flag.
  CHECK(TensorDictStore::from_tensordict(TensorDict({{"reward", at::ones({4})}}, {4}), with_id(server, "new"))
            .contains("reward"));
  CHECK(TensorDictStore::from_schema({{"reward", {{}, at::kFloat}}}, {4}, store_options(server)).contains("reward"));
}

TEST_CASE("from_schema preallocates non-tensor leaves beside zero-filled tensors", "[redis][store]") {
  RedisServer server;
  const NonTensorData per_row = NonTensorData::from_list(json::parse(R"(["a", "b", "c"])"), {3});
  TensorDictStore store = TensorDictStore::from_schema({{"obs", {{2}, at::kFloat}},
                                                        {{"info", "task"}, ""},
                                                        {{"info", "note"}, nullptr},
                                                        {"seed", json::Value(int64_t{7})},
                                                        {"name", per_row}},
                                                       {3}, with_id(server, "mixed"));
  TensorDict back = TensorDictStore::from_store("mixed", store_options(server));
  CHECK(back.get("obs").sum().item<float>() == 0.f);
  CHECK(uniform_of(back, {"info", "task"}) == "''");
  CHECK(uniform_of(back, {"info", "note"}) == "None");
  CHECK(uniform_of(back, "seed") == "7");
  CHECK(list_of(back, "name") == "['a', 'b', 'c']");
  CHECK(back.get_tensordict("info").batch_size() == c10::IntArrayRef({3}));

  // The writer's first batched write of per-row strings lands in its rows only.
  store.index_put_({at::indexing::Slice(1, 3)},
                   TensorDict({{"info", TensorDict({{"task", NonTensorData::from_list(json::parse(R"(["walk", "run"])"),
                                                                                      {2})}},
                                                   {2})}},
                              {2}));
  CHECK(list_of(TensorDictStore::from_store("mixed", store_options(server)), {"info", "task"}) ==
        "['', 'walk', 'run']");
}

TEST_CASE("a malformed from_schema is refused before the server is touched, naming the key", "[redis][store]") {
  RedisServer server;
  auto refused = [&](const LeafSpecs& schema, const std::string& what) {
    INFO(what);
    CHECK_THROWS_WITH(TensorDictStore::from_schema(schema, {4}, with_id(server, "bad")), Catch::Contains(what));
    CHECK_THROWS_AS(TensorDictStore::from_store("bad", store_options(server)), KeyError);
  };
  refused({{"a", {{2}, at::kFloat}}, {"a", {{3}, at::kFloat}}}, "'a' is given twice");
  refused({{"a", {{2}, at::kFloat}}, {{"a", "b"}, {{3}, at::kFloat}}}, "is a leaf and a level of");
  refused({{"a", {{-1}, at::kFloat}}}, "every dim must be a size");
  refused({{"a", NonTensorData::from_list(json::parse(R"(["x", "y"])"), {2})}}, "not of the batch torch.Size([4])");
  CHECK_THROWS_AS(TensorDictStore::from_schema({{"a", {{-1}, at::kFloat}}}, {4}, with_id(server, "bad")), ValueError);
}
