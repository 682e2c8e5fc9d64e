// Typed classes over a TensorDictStore (issue 16, item 3), against a real redis-server: the
// preallocate-and-fill pattern of a shared replay buffer, written row by row through the typed
// class, and read back by another handle.
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include <tensordict/backends/store.h>

#include "backends/redis/redis_client.h"
#include "replay.td.h"
#include "replay_row.h"
#include "support/redis_server.h"

using namespace tensordict;
using replay::Transition;
using testing_support::RedisServer;
using testing_support::store_options;

namespace {

Transition row(float v, const std::string& info) { return typed_test::replay_row(v, info); }

}  // namespace

TEST_CASE("a typed replay buffer preallocated on the server is filled row by row", "[typed][redis]") {
  RedisServer server;
  TensorDictStore store = TensorDictStore::from_schema({{{"obs", "camera"}, {{3, 8, 8}, at::kByte}},
                                                        {{"obs", "proprio"}, {{12}, at::kFloat}},
                                                        {"action", {{6}, at::kFloat}},
                                                        {"reward", {{}, at::kFloat}},
                                                        {"done", {{}, at::kBool}}},
                                                       {8}, store_options(server));
  Transition buffer = Transition::from_tensordict(store);
  for (int i = 0; i < 8; ++i) buffer.index_put_({i}, row(static_cast<float>(i), "r" + std::to_string(i)));

  // Another process's view of the same store.
  Transition reader = Transition::from_tensordict(TensorDictStore::from_store(store.td_id(), store_options(server)));
  CHECK(at::equal(reader.reward(), at::arange(8, at::kFloat)));
  Transition sample = reader.index({at::tensor({6, 2}, at::kLong)});
  CHECK(at::equal(sample.action().select(1, 0), at::tensor({6.f, 2.f})));
  CHECK(sample.obs().info_list()[0].value() == "r6");
  CHECK(at::equal(reader.index({3}).obs().camera(), at::full({3, 8, 8}, 3, at::kByte)));
  CHECK(at::equal(reader.done(), at::arange(8) > 5));
  // Typed checks run before anything is sent.
  REQUIRE_THROWS_AS(buffer.index_put_({0}, TensorDict({{"reward", at::zeros({}, at::kDouble)}}, {})), TypeError);
  REQUIRE_THROWS_AS(buffer.set_reward_(at::zeros({8}, at::kInt)), TypeError);
  CHECK(reader.reward()[0].item<float>() == 0.f);
}

TEST_CASE("an empty store wrapped unchecked is preallocated by its first typed row write", "[typed][redis]") {
  RedisServer server;
  TensorDictStore store = TensorDictStore::from_tensordict(TensorDict::empty_with({4}), store_options(server));
  REQUIRE_THROWS_AS(Transition::from_tensordict(store), TypeError);  // required fields missing
  Transition buffer = Transition::from_tensordict(store, /*check=*/false);
  buffer.index_put_({2}, row(7, "seven"));
  // Every key now exists with the full batch: the written row and zeros elsewhere.
  Transition back = Transition::from_tensordict(TensorDictStore::from_store(store.td_id(), store_options(server)));
  CHECK(at::equal(back.reward(), at::tensor({0.f, 0.f, 7.f, 0.f})));
  CHECK((back.obs().camera().sizes() == c10::IntArrayRef{4, 3, 8, 8}));
  CHECK(back.obs().info_list()[2].value() == "seven");
  // A non-tensor key's first write stores its value for every row, as in memory (tensors get
  // zeros); later writes replace their rows.
  CHECK(back.obs().info_list()[0].value() == "seven");
  buffer.index_put_({0}, row(1, "one"));
  CHECK(at::equal(back.reward(), at::tensor({1.f, 0.f, 7.f, 0.f})));
  std::vector<std::string> notes;
  for (const auto& n : back.obs().info_list()) notes.push_back(n.value_or("-"));
  CHECK(notes == std::vector<std::string>{"one", "seven", "seven", "seven"});
}

TEST_CASE("checking a typed class over a store reads its metadata, not its data", "[typed][redis]") {
  RedisServer server;
  const int64_t rows = 100000;  // 19 MB of camera frames on the server
  auto schema = [](std::vector<int64_t> action) {
    return std::vector<std::pair<NestedKey, std::pair<std::vector<int64_t>, at::ScalarType>>>{
        {{"obs", "camera"}, {{3, 8, 8}, at::kByte}}, {{"obs", "proprio"}, {{12}, at::kFloat}},
        {"action", {std::move(action), at::kFloat}}, {"reward", {{}, at::kFloat}}, {"done", {{}, at::kBool}}};
  };
  TensorDictStore store = TensorDictStore::from_schema(schema({6}), {rows}, store_options(server));
  redis::RedisClient raw(store_options(server));
  auto sent = [&] {
    const std::string info(raw.run({"INFO", "stats"})[0].str());
    return std::stoll(info.substr(info.find("total_net_output_bytes:") + 23));
  };
  const int64_t before = sent();
  Transition buffer = Transition::from_tensordict(store);
  CHECK(sent() - before < 64 * 1024);
  // Still checked: a field of the wrong shape is refused from its metadata.
  TensorDictStore wrong = TensorDictStore::from_schema(schema({5}), {rows}, store_options(server));
  CHECK_THROWS_AS(Transition::from_tensordict(wrong), ShapeError);
}
