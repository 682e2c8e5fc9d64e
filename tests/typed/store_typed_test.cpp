// Typed classes over a TensorDictStore (issue 16, item 3), against a real redis-server: the
// preallocate-and-fill pattern of a shared replay buffer, written row by row through the typed
// class, and read back by another handle.
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include <tensordict/backends/store.h>

#include "backends/redis/redis_client.h"
#include "records.td.h"
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
  // A non-tensor key's first write leaves the other rows null (Python None), as tensors get
  // zeros there; later writes fill their rows.
  CHECK_FALSE(back.obs().info_list()[0].has_value());
  buffer.index_put_({0}, row(1, "one"));
  CHECK(at::equal(back.reward(), at::tensor({1.f, 0.f, 7.f, 0.f})));
  std::vector<std::string> notes;
  for (const auto& n : back.obs().info_list()) notes.push_back(n.value_or("-"));
  CHECK(notes == std::vector<std::string>{"one", "-", "seven", "-"});
}

TEST_CASE("store_like preallocates a typed buffer on the server from the schema alone", "[typed][redis]") {
  RedisServer server;
  redis::RedisClient raw(store_options(server));
  auto received = [&] {
    const std::string info(raw.run({"INFO", "stats"})[0].str());
    return std::stoll(info.substr(info.find("total_net_input_bytes:") + 22));
  };
  StoreOptions options = store_options(server);
  options.td_id = "replay";
  const int64_t before = received();
  Transition buffer = Transition::store_like({100000}, options);  // 19 MB of camera frames
  // Zero-filled by the server: the client sent commands, no tensor bytes.
  CHECK(received() - before < 64 * 1024);
  CHECK(TensorDictStore::is_store(buffer));
  CHECK((buffer.obs().camera().sizes() == c10::IntArrayRef{100000, 3, 8, 8}));
  CHECK(buffer.action().scalar_type() == at::kFloat);
  CHECK(buffer.done().sum().item<int64_t>() == 0);
  // The optional string starts null in every row, as memmap_like makes it.
  CHECK_FALSE(buffer.index({at::indexing::Slice(0, 3)}).obs().info_list()[1].has_value());
  // Filled and read back by another handle, checked against the schema.
  buffer.index_put_({7}, row(7, "seven"));
  Transition back = Transition::from_tensordict(TensorDictStore::from_store("replay", store_options(server)));
  CHECK(back.index({7}).obs().info() == "seven");
  CHECK(back.reward()[7].item<float>() == 7.f);
  // A second store_like would zero the buffer: refused, naming the store.
  REQUIRE_THROWS_AS(Transition::store_like({100000}, options), StorageError);
  REQUIRE_THROWS_WITH(Transition::store_like({4}, options),
                      Catch::Contains("TensorDictStore 'replay'") && Catch::Contains("StoreOptions::overwrite"));
  CHECK(back.reward()[7].item<float>() == 7.f);
  options.overwrite = true;
  CHECK((Transition::store_like({4}, options).reward().sizes() == c10::IntArrayRef{4}));

  // Every kind of non-tensor field: required ones "", 0, 0.0, false; optional ones null.
  StoreOptions episodes = store_options(server);
  records::Episode episode = records::Episode::store_like({3}, episodes);
  CHECK(episode.record().name_list() == std::vector<std::string>{"", "", ""});
  CHECK_FALSE(episode.record().count_list()[0].has_value());
  CHECK_FALSE(episode.record().valid_list()[2].has_value());
  CHECK((episode.record().x().sizes() == c10::IntArrayRef{3, 4}));
  CHECK_FALSE(episode.record().has_n());  // optional, no concrete event shape: left out
  // A batched write of per-row names lands in its rows only.
  TensorDict records = episode.record().tensordict();
  records.index_put_({at::indexing::Slice(1, 3)},
                     TensorDict({{"name", NonTensorData::from_list(json::parse(R"(["b", "c"])"), {2})}}, {2}));
  CHECK(records::Episode::from_tensordict(TensorDictStore::from_store(store_id(episode.tensordict()), episodes))
            .record()
            .name_list() == std::vector<std::string>{"", "b", "c"});
}

TEST_CASE("checking a typed class over a store reads its metadata, not its data", "[typed][redis]") {
  RedisServer server;
  const int64_t rows = 100000;  // 19 MB of camera frames on the server
  auto schema = [](std::vector<int64_t> action) {
    return LeafSpecs{
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
