// The per-row layout (StoreLayout::per_row, issue 35): every row of the batched tensor leaves
// in one record, read by MGET and written by MSET or SETRANGEs; the leaves fixed at creation;
// damaged records and stale handles met with typed errors or correct writes.
#include "support/catch_torch.h"

#include <cstring>
#include <string>

#include <ATen/ATen.h>
#include <tensordict/backends/store.h>
#include <tensordict/backends/store_group.h>
#include <tensordict/batch_index.h>
#include <tensordict/tensordict.h>

#include "backends/redis/redis_client.h"
#include "support/redis_server.h"

using namespace tensordict;
using at::indexing::Slice;
using testing_support::RedisServer;

namespace {

StoreOptions per_row(const RedisServer& server, const std::string& id = "", bool overwrite = false) {
  StoreOptions options = testing_support::store_options(server);
  options.layout = StoreLayout::per_row;
  options.td_id = id;
  options.overwrite = overwrite;
  return options;
}

std::string bytes_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel() * c.element_size()));
}

// The replay-buffer fixture: obs float [6], action long [2], next.reward double, a label.
TensorDict transitions(int64_t rows, int64_t seed) {
  at::manual_seed(seed);
  return TensorDict({{"obs", at::randn({rows, 6})},
                     {"action", at::randint(0, 100, {rows, 2}, at::kLong)},
                     {"next", TensorDict({{"reward", at::randn({rows}, at::kDouble)}}, {rows})},
                     {"label", "episode"}},
                    {rows});
}

// A counter from INFO (commandstats' "cmdstat_mget:calls=" and the like); 0 when absent.
int64_t server_stat(redis::RedisClient& raw, const std::string& section, const std::string& tag) {
  const std::string info(raw.run({"INFO", section})[0].str());
  const size_t at = info.find(tag);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + tag.size()));
}

void check_same(const TensorDict& got, const TensorDict& want) {
  REQUIRE(got.batch_size() == want.batch_size());
  for (const NestedKey& key : {NestedKey("obs"), NestedKey("action"), NestedKey{"next", "reward"}}) {
    INFO(key.repr());
    CHECK(at::equal(got.get(key), want.get(key)));
  }
}

}  // namespace

TEST_CASE("a per_row store keeps each row of every batched tensor in one record", "[redis][store][rows]") {
  RedisServer server;
  const TensorDict td = transitions(4, 1);
  TensorDictStore store = TensorDictStore::from_tensordict(td, per_row(server, "rb"));
  CHECK(store.is_locked());  // its leaves are fixed, as a memmap's are

  redis::RedisClient raw(testing_support::store_options(server));
  const std::string base = "tensordict:{rb}:";
  CHECK(raw.run({"HGET", base + "__rows__", "rows"})[0].str() == "4");
  CHECK(raw.run({"HGET", base + "__rows__", "row_bytes"})[0].str() == "48");  // 24 + 16 + 8
  CHECK(raw.run({"HGET", base + "m:obs", "row_offset"})[0].str() == "0");
  CHECK(raw.run({"HGET", base + "m:action", "row_offset"})[0].str() == "24");
  CHECK(raw.run({"HGET", base + "m:next.reward", "row_offset"})[0].str() == "40");
  CHECK(raw.run({"HGET", base + "m:obs", "shape"})[0].str() == "[4, 6]");  // Python's fields, as before
  CHECK(raw.run({"EXISTS", base + "d:obs"})[0].integer() == 0);
  CHECK(raw.run({"GET", base + "d:label"})[0].str() == "\"episode\"");  // non-tensors stay whole
  for (int64_t r = 0; r < 4; ++r) {
    const std::string record(raw.run({"GET", base + "r:" + std::to_string(r)})[0].str());
    CHECK(record == bytes_of(td.get("obs")[r]) + bytes_of(td.get("action")[r]) + bytes_of(td.get({"next", "reward"})[r]));
  }

  // Reopened without naming the layout: it is the server's.
  TensorDictStore again = TensorDictStore::from_store("rb", testing_support::store_options(server));
  CHECK(again.is_locked());
  check_same(again, td);
  check_same(again.to_tensordict(), td);
  CHECK(again.get_non_tensor("label").value().as_string() == "episode");
}

TEST_CASE("rows read and written through records match the same buffer in memory", "[redis][store][rows]") {
  RedisServer server;
  constexpr int64_t kRows = 64;
  TensorDictStore store = TensorDictStore::from_schema(
      {{"obs", {{6}, at::kFloat}}, {"action", {{2}, at::kLong}}, {{"next", "reward"}, {{}, at::kDouble}}}, {kRows},
      per_row(server));
  TensorDict memory = store.to_tensordict();
  CHECK(memory.get("obs").abs().sum().item<float>() == 0.f);  // zero-filled by the server

  // Whole rows of every leaf (one MSET), in chunks as a ring buffer fills.
  for (int64_t first = 0; first < kRows; first += 16) {
    const TensorDict chunk = transitions(16, first).exclude({"label"});
    store.index_put_({Slice(first, first + 16)}, chunk);
    memory.index_put_({Slice(first, first + 16)}, chunk);
  }
  check_same(store, memory);

  // Rows of some leaves (a SETRANGE per row and leaf), an index tensor with repeats, a mask.
  const at::Tensor picks = at::tensor({5, 63, 5, 0, 17}, at::kLong);
  const TensorDict some({{"obs", at::full({5, 6}, 7.f)}}, {5});
  store.index_put_({picks}, some);
  memory.index_put_({picks}, some);
  check_same(store, memory);
  const at::Tensor mask = at::arange(kRows) % 3 == 0;
  store.index_put_({mask}, TensorDict({{"next", TensorDict({{"reward", at::ones({22}, at::kDouble)}}, {22})}}, {22}));
  memory.index_put_({mask}, TensorDict({{"next", TensorDict({{"reward", at::ones({22}, at::kDouble)}}, {22})}}, {22}));
  check_same(store, memory);

  // One leaf's rows, a whole leaf, a leaf replaced by a value of its shape and dtype.
  store.set_at_("action", at::full({2}, 9, at::kLong), {3});
  memory.set_at_("action", at::full({2}, 9, at::kLong), {3});
  store.set_("obs", at::arange(kRows * 6, at::kFloat).view({kRows, 6}));
  memory.set_("obs", at::arange(kRows * 6, at::kFloat).view({kRows, 6}));
  check_same(store, memory);

  // Reads: random rows, an integer, a slice, a mask; each equal to the in-memory result.
  const at::Tensor sample = at::randint(0, kRows, {256}, at::kLong);
  check_same(store.index({sample}), memory.index({sample}));
  check_same(store.index({7}), memory.index({7}));
  check_same(store.index({Slice(10, 30)}), memory.index({Slice(10, 30)}));
  check_same(store.index({mask}), memory.index({mask}));
  // A nested level reads its own leaves' part of the records.
  CHECK(at::equal(store.get_tensordict("next").index({sample}).get("reward"),
                  memory.get_tensordict("next").index({sample}).get("reward")));
}

TEST_CASE("a per_row leaf is read whole by ranges when its records are much larger", "[redis][store][rows]") {
  RedisServer server;
  at::manual_seed(3);
  const TensorDict td({{"image", at::randint(0, 255, {8, 8192}, at::kByte)}, {"reward", at::randn({8})}}, {8});
  TensorDictStore store = TensorDictStore::from_tensordict(td, per_row(server));
  redis::RedisClient raw(testing_support::store_options(server));
  const int64_t ranges = server_stat(raw, "commandstats", "cmdstat_getrange:calls="), mgets = server_stat(raw, "commandstats", "cmdstat_mget:calls=");
  CHECK(at::equal(store.get("reward"), td.get("reward")));  // a GETRANGE per row
  CHECK(server_stat(raw, "commandstats", "cmdstat_getrange:calls=") - ranges == 8);
  CHECK(server_stat(raw, "commandstats", "cmdstat_mget:calls=") - mgets == 0);
  CHECK(at::equal(store.get("image"), td.get("image")));  // whole records (one MGET)
  CHECK(server_stat(raw, "commandstats", "cmdstat_mget:calls=") - mgets == 1);
}

TEST_CASE("a per_row store of more than 1,024 rows reads and writes its records in chunks", "[redis][store][rows]") {
  RedisServer server;
  constexpr int64_t kRows = 2500;  // three MGETs or MSETs of at most 1,024 records
  at::manual_seed(5);
  TensorDict memory({{"x", at::randn({kRows, 3})}, {"n", at::randint(0, 9, {kRows}, at::kLong)}}, {kRows});
  TensorDictStore store = TensorDictStore::from_tensordict(memory, per_row(server, "big"));
  redis::RedisClient raw(testing_support::store_options(server));
  CHECK(raw.run({"EXISTS", "tensordict:{big}:r:2499"})[0].integer() == 1);
  CHECK(at::equal(store.get("x"), memory.get("x")));
  CHECK(at::equal(store.to_tensordict().get("n"), memory.get("n")));
  const at::Tensor picks = at::randint(0, kRows, {2100}, at::kLong);
  const int64_t mgets = server_stat(raw, "commandstats", "cmdstat_mget:calls=");
  const TensorDict sample = store.index({picks});
  CHECK(server_stat(raw, "commandstats", "cmdstat_mget:calls=") - mgets == 3);
  CHECK(at::equal(sample.get("x"), memory.get("x").index_select(0, picks)));
  CHECK(at::equal(sample.get("n"), memory.get("n").index_select(0, picks)));
  const TensorDict written({{"x", at::full({2200, 3}, 4.f)}, {"n", at::arange(2200)}}, {2200});
  const int64_t msets = server_stat(raw, "commandstats", "cmdstat_mset:calls=");
  store.index_put_({at::indexing::Slice(150, 2350)}, written);
  memory.index_put_({at::indexing::Slice(150, 2350)}, written);
  CHECK(server_stat(raw, "commandstats", "cmdstat_mset:calls=") - msets == 3);
  CHECK(at::equal(store.get("x"), memory.get("x")));
  CHECK(at::equal(store.get("n"), memory.get("n")));
  // Made again with fewer rows: the old records are gone, all of them.
  TensorDictStore::from_schema({{"x", {{3}, at::kFloat}}}, {10}, per_row(server, "big", /*overwrite=*/true));
  CHECK(raw.run({"EXISTS", "tensordict:{big}:r:9"})[0].integer() == 1);
  CHECK(raw.run({"EXISTS", "tensordict:{big}:r:10", "tensordict:{big}:r:1500", "tensordict:{big}:r:2499"})[0].integer() == 0);
}

TEST_CASE("a per_row store's leaves are fixed: typed errors, nothing changed", "[redis][store][rows][errors]") {
  RedisServer server;
  const TensorDict td = transitions(4, 2);
  TensorDictStore store = TensorDictStore::from_tensordict(td, per_row(server, "fixed"));
  CHECK_THROWS_AS(store.set("extra", at::zeros({4})), LockedError);
  store.unlock_();
#define NAMES_IT(what, key)                                                                                     \
  Catch::Contains("TensorDictStore 'fixed'") && Catch::Contains("per-row records") && Catch::Contains(what) && \
      Catch::Contains(key) && Catch::Contains("StoreLayout::per_leaf")
  CHECK_THROWS_AS(store.set("extra", at::zeros({4})), StorageError);
  CHECK_THROWS_WITH(store.set("extra", at::zeros({4})), NAMES_IT("cannot add", "'extra'"));
  CHECK_THROWS_WITH(store.set("obs", at::zeros({4, 7})), NAMES_IT("cannot replace", "'obs'"));
  CHECK_THROWS_WITH(store.set("obs", at::zeros({4, 6}, at::kDouble)), NAMES_IT("cannot replace", "'obs'"));
  CHECK_THROWS_WITH(store.erase("action"), NAMES_IT("cannot erase", "'action'"));
  CHECK_THROWS_WITH(store.rename_key_("action", "act"), NAMES_IT("cannot rename", "'action'"));
  CHECK_THROWS_WITH(store.set({"new", "x"}, at::zeros({4})), NAMES_IT("cannot add", "'new'"));
  // Dim 0 of the batch is the records' rows; it can go (the leaves stay) but not change.
  CHECK_THROWS_WITH(store.impl()->set_batch_size({2}), NAMES_IT("change dim 0 of the batch size", "[2]"));
#undef NAMES_IT
  check_same(TensorDictStore::from_store("fixed", testing_support::store_options(server)), td);

  // A value of the leaf's shape and dtype is written in place; a non-tensor value replaced.
  store.set("obs", at::ones({4, 6}));
  store.set_non_tensor("label", json::Value("other"));
  TensorDictStore again = TensorDictStore::from_store("fixed", testing_support::store_options(server));
  CHECK(at::equal(again.get("obs"), at::ones({4, 6})));
  CHECK(again.get_non_tensor("label").value().as_string() == "other");
  CHECK(at::equal(again.get("action"), td.get("action")));

  // A batch of no dims has no rows: no record, the leaves kept whole and fixed all the same.
  TensorDictStore unbatched = TensorDictStore::from_tensordict(TensorDict({{"x", at::ones({3})}}, {}), per_row(server));
  CHECK(unbatched.is_locked());
  CHECK(at::equal(unbatched.get("x"), at::ones({3})));
  unbatched.unlock_();
  CHECK_THROWS_AS(unbatched.set("y", at::ones({3})), StorageError);
}

TEST_CASE("damaged records and headers are StorageErrors naming the key", "[redis][store][rows][errors]") {
  RedisServer server;
  TensorDictStore::from_tensordict(transitions(4, 4), per_row(server, "bad"));
  redis::RedisClient raw(testing_support::store_options(server));
  const std::string base = "tensordict:{bad}:";
  const auto open = [&] { return TensorDictStore::from_store("bad", testing_support::store_options(server)); };

  raw.run({"SET", base + "r:1", "short"});
  CHECK_THROWS_AS(open().index({1}), StorageError);
  CHECK_THROWS_WITH(open().index({1}), Catch::Contains(base + "r:1") && Catch::Contains("holds 5 bytes"));
  CHECK_THROWS_WITH(open().to_tensordict(), Catch::Contains(base + "r:1"));
  raw.run({"DEL", base + "r:2"});
  CHECK_THROWS_WITH(open().index({at::tensor({0, 2}, at::kLong)}), Catch::Contains(base + "r:2") && Catch::Contains("missing"));
  CHECK_THROWS_AS(open().get("obs"), StorageError);

  raw.run({"HSET", base + "m:action", "row_offset", "40"});  // 16 bytes from 40 pass the record's 48
  CHECK_THROWS_WITH(open(), Catch::Contains(base + "m:action") && Catch::Contains("do not fit"));
  raw.run({"HSET", base + "m:action", "row_offset", "-3"});
  CHECK_THROWS_WITH(open(), Catch::Contains(base + "m:action") && Catch::Contains("row_offset"));
  raw.run({"HSET", base + "m:action", "row_offset", "24"});
  // A count of records that is not the batch's is refused before anything reads or deletes them.
  raw.run({"HSET", base + "__rows__", "rows", "1000000000000"});
  CHECK_THROWS_AS(open(), StorageError);
  CHECK_THROWS_WITH(open(), Catch::Contains("1000000000000"));
  raw.run({"HSET", base + "__rows__", "rows", "4"});
  TensorDictStore::from_tensordict(TensorDict({{"label", "only"}}, {4}), per_row(server, "labels"));
  raw.run({"HSET", "tensordict:{labels}:__rows__", "rows", "1000000000000"});  // no leaf ties it
  CHECK_THROWS_WITH(TensorDictStore::from_store("labels", testing_support::store_options(server)),
                    Catch::Contains("tensordict:{labels}:__rows__: 1000000000000 records for a store of batch size [4]"));
  raw.run({"HDEL", base + "__rows__", "row_bytes"});
  CHECK_THROWS_WITH(open(), Catch::Contains(base + "__rows__") && Catch::Contains("row_bytes"));
  raw.run({"DEL", base + "__rows__"});
  CHECK_THROWS_WITH(open(), Catch::Contains(base + "m:") && Catch::Contains("no __rows__"));
}

TEST_CASE("a stale per_row handle writes and reads by the leaves the server has now", "[redis][store][rows]") {
  RedisServer server;
  TensorDictStore stale = TensorDictStore::from_tensordict(
      TensorDict({{"a", at::zeros({8})}, {"b", at::zeros({8})}}, {8}), per_row(server, "moved"));
  stale.index({0});  // its structure is cached: a at offset 0, b at 4
  // Another client recreates the store with the leaves in the other order: b at 0, a at 4.
  TensorDictStore::from_tensordict(TensorDict({{"b", at::arange(8.f)}, {"a", at::arange(8.f) + 10}}, {8}),
                                   per_row(server, "moved", /*overwrite=*/true));
  // A read through the stale structure: planned from it, checked against the server's, read again.
  CHECK(at::equal(stale.index({at::tensor({1, 6}, at::kLong)}).get("a"), at::tensor({11.f, 16.f})));
  stale.index({0});
  TensorDictStore::from_tensordict(TensorDict({{"b", at::zeros({8})}, {"a", at::zeros({8})}}, {8}),
                                   per_row(server, "moved", /*overwrite=*/true));
  stale.index_put_({Slice(0, 2)}, TensorDict({{"a", at::ones({2})}, {"b", at::full({2}, 2.f)}}, {2}));
  stale.set_at_("a", at::full({}, 5.f), {7});
  TensorDictStore fresh = TensorDictStore::from_store("moved", testing_support::store_options(server));
  CHECK(at::equal(fresh.get("a"), at::tensor({1.f, 1.f, 0.f, 0.f, 0.f, 0.f, 0.f, 5.f})));
  CHECK(at::equal(fresh.get("b"), at::tensor({2.f, 2.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f})));
  CHECK(at::equal(stale.index({Slice(0, 2)}).get("b"), at::full({2}, 2.f)));

  // Made again with one more leaf after them, a and b where they were (b at 0, a at 4), the
  // records longer: whole records written through the stale structure (a and b, all it knows)
  // would cut c off; the records' size is guarded too, and the write goes where the leaves are.
  stale.index({0});
  TensorDictStore::from_tensordict(
      TensorDict({{"b", at::zeros({8})}, {"a", at::zeros({8})}, {"c", at::full({8}, 3.f)}}, {8}),
      per_row(server, "moved", /*overwrite=*/true));
  // The backend's row write itself (index_put_ re-reads the structure when it checks the keys,
  // which would hide the stale one).
  const at::indexing::TensorIndex rows(Slice(2, 4));
  stale.impl()->put_at_(BatchIndex(c10::ArrayRef<at::indexing::TensorIndex>(&rows, 1), stale.batch_size()),
                        TensorDict({{"a", at::ones({2})}, {"b", at::ones({2})}}, {2}));
  TensorDictStore now = TensorDictStore::from_store("moved", testing_support::store_options(server));
  CHECK(at::equal(now.get("c"), at::full({8}, 3.f)));
  CHECK(at::equal(now.get("a"), at::tensor({0.f, 0.f, 1.f, 1.f, 0.f, 0.f, 0.f, 0.f})));
  CHECK(at::equal(now.get("b"), now.get("a")));
}

TEST_CASE("StoreGroup reads per_row stores with one MGET each and samples them", "[redis][store][rows]") {
  RedisServer server;
  std::vector<TensorDictStore> stores;
  for (int64_t i = 0; i < 3; ++i) {
    TensorDict td({{"id", at::full({16}, i, at::kLong)}, {"row", at::arange(16, at::kLong)}}, {16});
    stores.push_back(TensorDictStore::from_tensordict(td, per_row(server)));
  }
  const StoreGroup group(stores);
  const TensorDict batch = group.sample(300);
  REQUIRE(batch.batch_size() == c10::IntArrayRef({300}));
  CHECK(batch.get("id").min().item<int64_t>() >= 0);
  CHECK(batch.get("id").max().item<int64_t>() <= 2);
  const at::Tensor ids = batch.get("id");
  CHECK(ids.slice(0, 1).ge(ids.slice(0, 0, -1)).all().item<bool>());  // store by store
  CHECK(batch.get("row").max().item<int64_t>() < 16);
  redis::RedisClient raw(testing_support::store_options(server));
  const int64_t mgets = server_stat(raw, "commandstats", "cmdstat_mget:calls=");
  const std::vector<TensorDict> parts = group.index({at::tensor({3, 3}, at::kLong), at::tensor({0}, at::kLong),
                                                     at::tensor({15}, at::kLong)});
  CHECK(server_stat(raw, "commandstats", "cmdstat_mget:calls=") - mgets == 3);
  CHECK(at::equal(parts[0].get("row"), at::tensor({3, 3}, at::kLong)));
  CHECK(at::equal(parts[2].get("id"), at::tensor({2}, at::kLong)));

  // Store 1 made again by another client, its leaves in the other order: the group's rows,
  // planned from the structure store 1's handle cached, are read again where they are now.
  StoreOptions again = per_row(server, stores[1].td_id(), /*overwrite=*/true);
  TensorDictStore::from_tensordict(
      TensorDict({{"row", at::arange(16, at::kLong) + 100}, {"id", at::full({16}, 7, at::kLong)}}, {16}), again);
  const std::vector<TensorDict> moved = group.index({at::tensor({1}, at::kLong), at::tensor({4, 5}, at::kLong),
                                                     at::tensor({2}, at::kLong)});
  CHECK(at::equal(moved[1].get("row"), at::tensor({104, 105}, at::kLong)));
  CHECK(at::equal(moved[1].get("id"), at::tensor({7, 7}, at::kLong)));
  CHECK(at::equal(moved[0].get("row"), at::tensor({1}, at::kLong)));
}
