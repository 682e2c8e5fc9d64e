// Typed classes over a TensorDictStore (issue 16, item 3), against a real redis-server: the
// preallocate-and-fill pattern of a shared replay buffer, written row by row through the typed
// class, and read back by another handle.
#include "support/catch_torch.h"

#include <string>
#include <type_traits>
#include <vector>

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

Transition store_row(float v, const std::string& info) { return typed_test::replay_row(v, info); }

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
  for (int i = 0; i < 8; ++i) buffer.index_put_({i}, store_row(static_cast<float>(i), "r" + std::to_string(i)));

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
  buffer.index_put_({2}, store_row(7, "seven"));
  // Every key now exists with the full batch: the written row and zeros elsewhere.
  Transition back = Transition::from_tensordict(TensorDictStore::from_store(store.td_id(), store_options(server)));
  CHECK(at::equal(back.reward(), at::tensor({0.f, 0.f, 7.f, 0.f})));
  CHECK((back.obs().camera().sizes() == c10::IntArrayRef{4, 3, 8, 8}));
  CHECK(back.obs().info_list()[2].value() == "seven");
  // A non-tensor key's first write leaves the other rows null (Python None), as tensors get
  // zeros there; later writes fill their rows.
  CHECK_FALSE(back.obs().info_list()[0].has_value());
  buffer.index_put_({0}, store_row(1, "one"));
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
  buffer.index_put_({7}, store_row(7, "seven"));
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

TEST_CASE("store_like with the per-row layout: a typed buffer sampled by records", "[typed][redis][rows]") {
  RedisServer server;
  StoreOptions options = store_options(server);
  options.layout = StoreLayout::per_row;
  options.td_id = "replay-rows";
  Transition buffer = Transition::store_like({32}, options);
  redis::RedisClient raw(store_options(server));
  // camera 192 + proprio 48 + action 24 + reward 4 + done 1 bytes a row; the string stays whole.
  CHECK(raw.run({"HGET", "tensordict:{replay-rows}:__rows__", "row_bytes"})[0].str() == "269");
  CHECK(raw.run({"EXISTS", "tensordict:{replay-rows}:d:obs.info"})[0].integer() == 1);
  for (int i = 0; i < 32; ++i) buffer.index_put_({i}, store_row(static_cast<float>(i), "r" + std::to_string(i)));
  buffer.index_put_({at::indexing::Slice(4, 6)}, Transition::stack({store_row(40, "x"), store_row(50, "y")}));

  Transition reader = Transition::from_tensordict(TensorDictStore::from_store("replay-rows", store_options(server)));
  const at::Tensor picks = at::tensor({5, 31, 4, 5}, at::kLong);
  Transition sample = reader.index({picks});
  CHECK(at::equal(sample.reward(), at::tensor({50.f, 31.f, 40.f, 50.f})));
  CHECK(at::equal(sample.obs().camera()[1], at::full({3, 8, 8}, 31, at::kByte)));
  CHECK(at::equal(sample.action().select(1, 0), at::tensor({50.f, 31.f, 40.f, 50.f})));
  CHECK(sample.obs().info_list()[0].value() == "y");
  CHECK(at::equal(reader.done(), at::arange(32) >= 4));  // rows 4 and 5 hold 40 and 50
  // Typed checks still run first; a whole field of its schema's shape is written in place.
  REQUIRE_THROWS_AS(buffer.set_reward_(at::zeros({32}, at::kInt)), TypeError);
  buffer.set_reward_(at::zeros({32}));
  CHECK(reader.reward().abs().sum().item<float>() == 0.f);
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

TEST_CASE("clone, stack, iteration and update of a typed class over a store", "[typed][redis][ops]") {
  RedisServer server;
  TensorDictStore store = TensorDictStore::from_tensordict(
      Transition::stack({store_row(0, "a"), store_row(1, "b"), store_row(2, "c")}), store_options(server));
  Transition buf = Transition::from_tensordict(store);
  Transition reader = Transition::from_tensordict(TensorDictStore::from_store(store.td_id(), store_options(server)));

  // clone: the class, read into memory, independent of the server.
  Transition copy = buf.clone();
  static_assert(std::is_same_v<decltype(buf.clone()), Transition>);
  CHECK_FALSE(TensorDictStore::is_store(copy));
  CHECK(at::equal(copy.reward(), at::tensor({0.f, 1.f, 2.f})));
  CHECK(at::equal(copy.obs().camera(), reader.obs().camera()));
  CHECK(copy.obs().info_list()[2].value() == "c");
  copy.set_reward_(at::full({3}, 5.f));
  CHECK(at::equal(reader.reward(), at::tensor({0.f, 1.f, 2.f})));

  // Iteration: each row a Transition over the store's row.
  std::vector<float> rewards;
  std::vector<std::string> notes;
  for (auto r : buf) {
    static_assert(std::is_same_v<decltype(r), Transition>);
    CHECK(r.batch_size().empty());
    rewards.push_back(r.reward().item<float>());
    notes.push_back(r.obs().info());
  }
  CHECK(rewards == std::vector<float>{0.f, 1.f, 2.f});
  CHECK(notes == std::vector<std::string>{"a", "b", "c"});
  // Rows are in-memory copies (store.index, as Python's store[i]): a row changed in place is
  // written back with a typed index_put_, checked against the schema.
  int64_t i = 0;
  for (auto r : buf) {
    r.set_reward_(r.reward() + 10);
    CHECK(reader.reward()[i].item<float>() == static_cast<float>(i));
    buf.index_put_({i++}, r);
  }
  CHECK(at::equal(reader.reward(), at::tensor({10.f, 11.f, 12.f})));

  // stack: rows of the store, and the store object with an in-memory one, as the class.
  Transition picked = Transition::stack({buf.index({2}), buf.index({0})});
  CHECK(at::equal(picked.reward(), at::tensor({12.f, 10.f})));
  CHECK(picked.obs().info_list()[1].value() == "a");
  Transition both = stack(std::vector<Transition>{buf, copy});
  CHECK((both.batch_size() == c10::IntArrayRef{2, 3}));
  CHECK(at::equal(both.reward(), at::stack({at::tensor({10.f, 11.f, 12.f}), at::full({3}, 5.f)})));

  // update / update_: checked first (nothing sent), then written to the server.
  REQUIRE_THROWS_AS(buf.update(TensorDict({{"reward", at::zeros({3}, at::kLong)}}, {3})), TypeError);
  REQUIRE_THROWS_AS(buf.update_(TensorDict({{"action", at::zeros({3, 5})}}, {3})), ShapeError);
  CHECK(at::equal(reader.reward(), at::tensor({10.f, 11.f, 12.f})));
  buf.update(Transition::stack({store_row(7, "x"), store_row(8, "y"), store_row(9, "z")}));
  buf.update_(TensorDict({{"action", at::full({3, 6}, 4.f)}}, {3}));
  CHECK(at::equal(reader.reward(), at::tensor({7.f, 8.f, 9.f})));
  CHECK(at::equal(reader.action(), at::full({3, 6}, 4.f)));
  CHECK(at::equal(reader.obs().proprio()[2], at::full({12}, 9.f)));
  std::vector<std::string> updated;
  for (const auto& n : reader.obs().info_list()) updated.push_back(n.value_or("-"));
  CHECK(updated == std::vector<std::string>{"x", "y", "z"});
}
