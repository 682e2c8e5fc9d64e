// TensorDictStore against a real redis-server: round trips of every stored kind, the v0.14 key
// layout, reconnecting by id, live writes seen by another handle, from_schema's server-side
// zero fill, and the typed errors for what cannot be stored or read.
#include "support/catch_torch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <tensordict/backends/store.h>
#include <tensordict/tensordict.h>

#include "backends/redis/redis_client.h"
#include "backends/redis/store_layout.h"
#include "support/redis_server.h"

using namespace tensordict;
using testing_support::RedisServer;
using testing_support::store_options;

namespace {

TensorDict sample() {
  TensorDict td = TensorDict::empty_with({4});
  td.set("obs", at::arange(24, at::kFloat).reshape({4, 6}));
  td.set("done", at::arange(4) % 2 == 0);
  td.set({"next", "reward"}, at::arange(4, at::kDouble));
  td.set_non_tensor("label", json::Value("episode"));
  return td;
}

void check_equal(const TensorDict& a, const TensorDict& b) {
  REQUIRE(a.keys(/*include_nested=*/true, /*leaves_only=*/true) == b.keys(true, true));
  for (const NestedKey& key : a.keys(true, true)) {
    const Entry x = a.find(key), y = b.find(key);
    INFO(key.repr());
    REQUIRE(x.kind() == y.kind());
    if (x.is_tensor()) {
      CHECK(x.tensor().scalar_type() == y.tensor().scalar_type());
      CHECK(at::equal(x.tensor(), y.tensor()));
    } else if (x.is_non_tensor()) {
      CHECK(x.non_tensor() == y.non_tensor());
    }
  }
}

}  // namespace

TEST_CASE("from_tensordict and to_tensordict round trip every stored kind", "[redis][store]") {
  RedisServer server;
  TensorDict td = sample();
  for (at::ScalarType t : {at::kByte, at::kChar, at::kShort, at::kInt, at::kLong, at::kHalf, at::kBFloat16,
                           at::kComplexFloat, at::kComplexDouble})
    td.set(short_dtype_name(t), at::ones({4, 2}).to(t));
  td.set({"nested", "deeper", "x"}, at::zeros({4, 2, 1}));
  td.get_tensordict("nested").set_batch_size({4, 2});
  td.set("empty", TensorDict::empty_with({4}));
  TensorDictStore store = TensorDictStore::from_tensordict(td, store_options(server));
  const TensorDict back = store.to_tensordict();
  check_equal(td, back);
  CHECK(back.batch_size() == c10::IntArrayRef({4}));
  // Nested batch sizes and empty levels survive (Python v0.14 keeps neither).
  CHECK(back.get_tensordict("nested").batch_size() == c10::IntArrayRef({4, 2}));
  CHECK(back.contains("empty"));
  CHECK(store.get_tensordict("nested").batch_size() == c10::IntArrayRef({4, 2}));
}

TEST_CASE("the stored layout is Python tensordict v0.14's", "[redis][store][layout]") {
  RedisServer server;
  StoreOptions options = store_options(server);
  options.td_id = "fixed-id";
  TensorDictStore::from_tensordict(sample(), options);
  redis::RedisClient raw(store_options(server));
  const std::string base = "tensordict:{fixed-id}:";
  CHECK(raw.run({"GET", base + "__batch_size__"})[0].str() == "[4]");
  CHECK(raw.run({"GET", base + "__device__"})[0].str() == "");
  auto members = raw.run({"SMEMBERS", base + "__keys__"});
  std::vector<std::string> keys;
  for (size_t i = 0; i < members[0].size(); ++i) keys.emplace_back(members[0][i].str());
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"done", "label", "next.reward", "obs"});
  CHECK(raw.run({"HGET", base + "m:obs", "shape"})[0].str() == "[4, 6]");
  CHECK(raw.run({"HGET", base + "m:obs", "dtype"})[0].str() == "torch.float32");
  CHECK(raw.run({"STRLEN", base + "d:obs"})[0].integer() == 4 * 6 * 4);
  CHECK(raw.run({"HGET", base + "m:label", "is_non_tensor"})[0].str() == "1");
  CHECK(raw.run({"HGET", base + "m:label", "encoding"})[0].str() == "json");
  CHECK(raw.run({"GET", base + "d:label"})[0].str() == "\"episode\"");
  CHECK(raw.run({"HGET", base + "m:next.reward", "dtype"})[0].str() == "torch.float64");
}

TEST_CASE("another handle reconnects by id and sees every write", "[redis][store]") {
  RedisServer server;
  TensorDictStore writer = TensorDictStore::from_tensordict(sample(), store_options(server));
  TensorDictStore reader = TensorDictStore::from_store(writer.td_id(), store_options(server));
  CHECK(store_id(reader) == writer.td_id());
  check_equal(writer.to_tensordict(), reader.to_tensordict());

  // Keys another client adds after the reader connected are listed (the layout is re-read).
  writer.set("added", at::ones({4, 2}));
  CHECK(reader.contains("added"));
  CHECK(at::equal(reader.get("added"), at::ones({4, 2})));
  // In-place writes, indexed writes, erase and rename reach the server.
  writer.set_("obs", at::zeros({4, 6}));
  CHECK(reader.get("obs").sum().item<float>() == 0);
  writer.index_put_({at::indexing::Slice(1, 3)}, TensorDict({{"obs", at::ones({2, 6})}}, {2}));
  CHECK(at::equal(reader.get("obs").sum(1), at::tensor({0.f, 6.f, 6.f, 0.f})));
  writer.erase("done");
  CHECK_FALSE(reader.contains("done"));
  writer.rename_key_({"next", "reward"}, {"next", "value"});
  CHECK(reader.contains({"next", "value"}));
  CHECK_FALSE(reader.contains({"next", "reward"}));
  // A leaf another client replaced with another shape is read as it is now.
  writer.set("added", at::ones({4, 3}));
  CHECK(reader.get("added").sizes() == c10::IntArrayRef({4, 3}));

  CHECK_THROWS_WITH(TensorDictStore::from_store("no-such-id", store_options(server)), Catch::StartsWith("No TensorDictStore with id 'no-such-id'"));
  CHECK_THROWS_AS(TensorDictStore::from_store("no-such-id", store_options(server)), KeyError);
}

TEST_CASE("from_schema preallocates on the server without sending tensor bytes", "[redis][store]") {
  RedisServer server;
  StoreOptions options = store_options(server);
  options.td_id = "schema";
  TensorDictStore store = TensorDictStore::from_schema(
      {{"obs", {{84, 84, 3}, at::kByte}}, {{"next", "reward"}, {{}, at::kFloat}}}, {100}, options);
  CHECK(store.get("obs").sizes() == c10::IntArrayRef({100, 84, 84, 3}));
  CHECK(store.get("obs").sum().item<int64_t>() == 0);
  CHECK(store.get({"next", "reward"}).sizes() == c10::IntArrayRef({100}));
  redis::RedisClient raw(store_options(server));
  CHECK(raw.run({"STRLEN", "tensordict:{schema}:d:obs"})[0].integer() == 100 * 84 * 84 * 3);
  // Filling a row writes through.
  store.index_put_({5}, TensorDict({{"obs", at::full({84, 84, 3}, 7, at::kByte)}}, {}));
  CHECK(store.get("obs")[5].min().item<int64_t>() == 7);
  CHECK(store.get("obs")[4].max().item<int64_t>() == 0);
}

TEST_CASE("what cannot be stored or read is a typed error naming the key", "[redis][store]") {
  RedisServer server;
  StoreOptions options = store_options(server);
  options.td_id = "bad";
  TensorDictStore store = TensorDictStore::from_tensordict(sample(), options);
  // Over Redis' 512 MiB string limit: refused before anything is sent or allocated.
  const at::Tensor huge = at::zeros({}, at::kByte).expand({4, (int64_t{128} << 20) + 1});
  CHECK_THROWS_WITH(store.set("huge", huge), Catch::Contains("over the server's limit for one value (536870912 bytes"));
  CHECK_FALSE(store.contains("huge"));
  StoreOptions big = store_options(server);
  big.td_id = "big";
  CHECK_THROWS_WITH(TensorDictStore::from_schema({{"big", {{1 << 20}, at::kDouble}}}, {100}, big),
                    Catch::Contains("over the server's limit for one value"));
  // A dot inside a key part is escaped, so it does not read back as nesting.
  store.set("a.b", at::zeros({4}));
  CHECK(store.keys().back() == NestedKey("a.b"));
  CHECK_FALSE(store.contains({"a", "b"}));

  redis::RedisClient raw(store_options(server));
  raw.run({"HDEL", "tensordict:{bad}:m:obs", "dtype"});
  CHECK_THROWS_WITH(TensorDictStore::from_store("bad", store_options(server)),
                    "tensordict:{bad}:m:obs: tensor metadata without a 'dtype' field");
  raw.run({"HSET", "tensordict:{bad}:m:obs", "dtype", "torch.float32"});
  raw.run({"HSET", "tensordict:{bad}:m:label", "encoding", "pickle"});
  TensorDictStore again = TensorDictStore::from_store("bad", store_options(server));
  CHECK_THROWS_WITH(again.get("label"), Catch::Contains("a pickle-encoded value is refused"));
  raw.run({"SETRANGE", "tensordict:{bad}:d:obs", "200", "x"});  // longer than [4, 6] float32
  CHECK_THROWS_WITH(again.get("obs"), Catch::Contains("bytes, but its metadata say shape [4, 6]"));
}

TEST_CASE("a store whose server is gone is a StorageError, and works again when it is back", "[redis][store]") {
  RedisServer server;
  TensorDictStore store = TensorDictStore::from_tensordict(sample(), store_options(server));
  const std::string id = store.td_id();
  server.kill();
  CHECK_THROWS_AS(store.get("obs"), StorageError);
  CHECK_THROWS_WITH(store.set("x", at::zeros({4})), Catch::Contains("unix:" + server.socket()));
  server.start();  // a fresh, empty server on the same socket
  CHECK_THROWS_AS(TensorDictStore::from_store(id, store_options(server)), KeyError);
  store.set("x", at::zeros({4}));  // the handle reconnected
  CHECK(store.contains("x"));
}

namespace {

// Runs tests/backends/redis/check_store_layout.py with Debian's python3 (python3-redis and
// python3-numpy, installed by scripts/install-deps.sh); its output, and whether it passed.
std::pair<bool, std::string> run_layout_script(const std::string& mode, const RedisServer& server, const std::string& id) {
  const std::string command = "/usr/bin/python3 " + std::string(TENSORDICT_SOURCE_DIR) +
                              "/tests/backends/redis/check_store_layout.py " + mode + " " + server.socket() + " " + id +
                              " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  return {::pclose(pipe) == 0, out};
}

}  // namespace

TEST_CASE("an independent Python reader reads what C++ stores, and C++ reads what it writes",
          "[redis][store][layout][python]") {
  RedisServer server;
  StoreOptions options = store_options(server);
  options.td_id = "cpp-wrote";
  TensorDict td = sample();
  td.set("rows", Entry(NonTensorData::from_list(json::parse(R"(["a", "b", "c", "d"])"), {4})));
  TensorDictStore::from_tensordict(td, options);
  const auto [read_ok, read_out] = run_layout_script("read", server, "cpp-wrote");
  INFO(read_out);
  CHECK(read_ok);
  CHECK(read_out.find("OK") != std::string::npos);

  const auto [write_ok, write_out] = run_layout_script("write", server, "py-wrote");
  INFO(write_out);
  REQUIRE(write_ok);
  TensorDictStore store = TensorDictStore::from_store("py-wrote", store_options(server));
  CHECK(store.batch_size() == c10::IntArrayRef({3}));
  CHECK(at::equal(store.get("obs"), at::arange(6).reshape({3, 2})));
  CHECK(at::equal(store.get({"nested", "flag"}), at::arange(3) % 2 == 0));
  const NonTensorData names = store.get_non_tensor("names");
  CHECK(names.tolist() == json::parse(R"(["x", null, "z"])"));
}

namespace {

// A counter of the server's INFO `section`: how many times it ran a command
// ("cmdstat_getrange:calls="), or the bytes it sent ("total_net_output_bytes:").
int64_t stat(redis::RedisClient& raw, const std::string& section, const std::string& tag) {
  const std::string info(raw.run({"INFO", section})[0].str());
  const size_t at = info.find(tag);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + tag.size()));
}

}  // namespace

TEST_CASE("an integer or a step-1 slice of dim 0 reads only those rows, one GETRANGE per leaf",
          "[redis][store][index]") {
  RedisServer server;
  TensorDict td = sample();
  td.set({"next", "obs"}, at::arange(40, at::kFloat).reshape({4, 10}));
  td.set("big", at::rand({4, 1 << 18}));  // 1 MiB per row
  TensorDictStore store = TensorDictStore::from_tensordict(td, store_options(server));
  redis::RedisClient raw(store_options(server));
  const int64_t ranges = stat(raw, "commandstats", "cmdstat_getrange:calls=");
  const int64_t sent = stat(raw, "stats", "total_net_output_bytes:");

  const TensorDict rows = store.index({at::indexing::Slice(1, 3)});
  CHECK(rows.batch_size() == c10::IntArrayRef({2}));
  check_equal(rows, td.index({at::indexing::Slice(1, 3)}));
  CHECK(stat(raw, "commandstats", "cmdstat_getrange:calls=") - ranges == 5);  // every tensor leaf
  // Two rows of 1 MiB, not the 4 MiB leaf (plus the other leaves' rows and the layout).
  const int64_t moved = stat(raw, "stats", "total_net_output_bytes:") - sent;
  CHECK(moved > (int64_t{2} << 20));
  CHECK(moved < (int64_t{2} << 20) + 64 * 1024);

  const TensorDict one = store.index({2});
  CHECK(one.batch_size().empty());
  check_equal(one, td.index({2}));
  CHECK(at::equal(one.get({"next", "obs"}), at::arange(20, 30, at::kFloat)));
  // Index tensors (unsorted, repeated, negative) and masks: one GETRANGE per run of rows and
  // leaf, no script (Lua costs 8x a GETRANGE per range), moving only the selected rows.
  // Scripts go as EVAL the first time on a connection and EVALSHA after.
  auto script_calls = [&] {
    return stat(raw, "commandstats", "cmdstat_eval:calls=") + stat(raw, "commandstats", "cmdstat_evalsha:calls=");
  };
  const int64_t evals = script_calls();
  const int64_t getranges = stat(raw, "commandstats", "cmdstat_getrange:calls=");
  const int64_t before = stat(raw, "stats", "total_net_output_bytes:");
  const at::Tensor picks = at::tensor({3, 0, -1}, at::kLong);
  check_equal(store.index({picks}), td.index({picks}));
  const int64_t picked = stat(raw, "stats", "total_net_output_bytes:") - before;
  CHECK(picked > (int64_t{3} << 20));
  CHECK(picked < (int64_t{3} << 20) + 64 * 1024);
  CHECK(script_calls() - evals == 1);  // the layout
  CHECK(stat(raw, "commandstats", "cmdstat_getrange:calls=") - getranges == 15);  // 3 runs (3, 0, 3) x 5 leaves
  const at::Tensor mask = at::tensor({1, 0, 1, 1}, at::kLong).to(at::kBool);
  check_equal(store.index({mask}), td.index({mask}));
  check_equal(store.index({at::tensor({1, 2}, at::kLong)}), td.index({at::tensor({1, 2}, at::kLong)}));
  CHECK_THROWS_AS(store.index({at::tensor({4}, at::kLong)}), IndexError);
  // Other indices read the leaves whole and index them in memory.
  check_equal(store.index({at::indexing::Slice(0, 4, 2)}), td.index({at::indexing::Slice(0, 4, 2)}));
  check_equal(store.index({at::indexing::Slice(3, 1)}), td.index({at::indexing::Slice(3, 1)}));
}

TEST_CASE("an indexed write of rows of dim 0 is one SETRANGE per leaf, cast and broadcast", "[redis][store][index]") {
  RedisServer server;
  TensorDict td = sample();
  td.set("big", at::zeros({4, 1 << 18}));
  TensorDictStore store = TensorDictStore::from_tensordict(td, store_options(server));
  redis::RedisClient raw(store_options(server));
  const int64_t ranges = stat(raw, "commandstats", "cmdstat_setrange:calls=");
  const int64_t received = stat(raw, "stats", "total_net_input_bytes:");
  // A double value into the float leaf, broadcast over the row.
  store.index_put_({1}, TensorDict({{"big", at::full({}, 2.0, at::kDouble)}}, {}));
  CHECK(stat(raw, "commandstats", "cmdstat_setrange:calls=") - ranges == 1);
  CHECK(stat(raw, "stats", "total_net_input_bytes:") - received < (int64_t{1} << 20) + 64 * 1024);
  const at::Tensor big = store.get("big");
  CHECK(big.scalar_type() == at::kFloat);
  CHECK(at::equal(big.sum(1), at::tensor({0.f, 2.f * (1 << 18), 0.f, 0.f})));
  store.set_at_("obs", at::ones({2, 6}), {at::indexing::Slice(2, 4)});
  CHECK(at::equal(store.get("obs").index({at::indexing::Slice(0, 2)}), at::arange(12, at::kFloat).reshape({2, 6})));
  CHECK(at::equal(store.get("obs").index({at::indexing::Slice(2, 4)}), at::ones({2, 6})));
  // Out-of-range rows are refused before anything is written (Python wraps them).
  CHECK_THROWS_AS(store.index_put_({7}, TensorDict({{"obs", at::zeros({6})}}, {})), IndexError);
  CHECK_THROWS_AS(store.index_put_({1}, TensorDict({{"obs", at::zeros({5})}}, {})), RuntimeError);
  CHECK(at::equal(store.get("obs")[1], at::arange(6, 12, at::kFloat)));
}

TEST_CASE("writers in separate processes filling disjoint rows of one store lose no row",
          "[redis][store][processes]") {
  RedisServer server;
  StoreOptions options = store_options(server);
  options.td_id = "shared";
  const int64_t writers = 4, rows = 50;
  TensorDictStore store =
      TensorDictStore::from_schema({{"obs", {{6}, at::kFloat}}, {"reward", {{}, at::kFloat}}}, {writers * rows}, options);
  // A per-row string too: each writer reads, changes and writes back the whole json_array, so
  // the writes must be atomic for no writer's rows to be lost.
  store.set_non_tensor("label", json::Value(""));
  std::vector<pid_t> pids;
  for (int64_t w = 0; w < writers; ++w) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const std::string first = std::to_string(w * rows), count = std::to_string(rows);
      ::execl(STORE_WRITER_PATH, "store_writer", server.socket().c_str(), "shared", first.c_str(), count.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  const at::Tensor expected = at::arange(writers * rows, at::kFloat);
  CHECK(at::equal(store.get("reward"), expected));
  CHECK(at::equal(store.get("obs"), expected.unsqueeze(1).expand({writers * rows, 6})));
  const json::Value labels = store.get_non_tensor("label").tolist();
  REQUIRE(labels.is_array());
  REQUIRE(labels.as_array().size() == static_cast<size_t>(writers * rows));
  int64_t lost = 0;
  for (int64_t i = 0; i < writers * rows; ++i)
    lost += labels.as_array()[static_cast<size_t>(i)] == json::Value("r" + std::to_string(i)) ? 0 : 1;
  CHECK(lost == 0);
}

TEST_CASE("a writer killed during an upload leaves the old store or the new one, never a mix",
          "[redis][store][processes][faults]") {
  RedisServer server;
  StoreOptions options = store_options(server);
  options.td_id = "crash";
  TensorDictStore::from_tensordict(TensorDict({{"obs", at::full({4096, 1024}, 0.f)}, {"label", "v0"}}, {4096}), options);
  std::mt19937 random(1234);
  int old_kept = 0, replaced = 0;
  for (int run = 1; run <= 12; ++run) {
    const std::string value = std::to_string(run);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::execl(STORE_WRITER_PATH, "store_writer", "replace", server.socket().c_str(), "crash", value.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Somewhere between before the first byte and after the last: the writer loads libtorch for
    // ~0.35 s, then uploads 16 MB in ~0.1 s.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(250, 600)(random)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    // Whatever the writer got to, a reader sees one whole version: data and metadata agree.
    TensorDictStore store = TensorDictStore::from_store("crash", store_options(server));
    const at::Tensor obs = store.get("obs");
    REQUIRE(obs.sizes() == c10::IntArrayRef({4096, 1024}));
    const float v = obs[0][0].item<float>();
    CHECK(at::equal(obs, at::full({4096, 1024}, v)));
    const std::string label = store.get_non_tensor("label").value().as_string();
    CHECK(label == "v" + std::to_string(static_cast<int>(v)));
    (label == "v" + value ? replaced : old_kept)++;
  }
  INFO("old kept " << old_kept << ", replaced " << replaced);
  CHECK(old_kept + replaced == 12);
}

TEST_CASE("a row write with metadata another client made stale is refused by the server and redone",
          "[redis][store][index]") {
  RedisServer server;
  TensorDictStore writer = TensorDictStore::from_tensordict(sample(), store_options(server));
  TensorDictStore reader = TensorDictStore::from_store(writer.td_id(), store_options(server));
  CHECK(reader.get("obs").sizes() == c10::IntArrayRef({4, 6}));  // the reader's cache: [4, 6] float32
  writer.set("obs", at::zeros({4, 2}, at::kDouble));               // another client re-shapes the leaf
  // Straight to the backend, without the handle's structure read: the cached offsets are stale.
  reader.impl()->write_at_("obs", BatchIndex({1}, reader.batch_size()), at::full({2}, 7.0));
  const at::Tensor obs = writer.get("obs");
  REQUIRE(obs.sizes() == c10::IntArrayRef({4, 2}));
  CHECK(obs.scalar_type() == at::kDouble);
  CHECK(at::equal(obs, at::tensor({0., 0., 7., 7., 0., 0., 0., 0.}, at::kDouble).view({4, 2})));
}

TEST_CASE("a row write into leaves the store knows is one guarded transaction for every leaf",
          "[redis][store][index]") {
  RedisServer server;
  TensorDictStore store = TensorDictStore::from_tensordict(sample(), store_options(server));
  redis::RedisClient raw(store_options(server));
  auto calls = [&](const std::string& command) { return stat(raw, "commandstats", "cmdstat_" + command + ":calls="); };
  TensorDict row({{"obs", at::full({6}, 3.0)}, {"done", at::ones({}, at::kBool)}}, {});
  row.set({"next", "reward"}, at::full({}, 5.0, at::kDouble));
  store.index_put_({0}, row);  // reads the structure
  const int64_t evalsha = calls("evalsha"), exec = calls("exec"), watch = calls("watch"), setrange = calls("setrange");
  const int64_t smembers = calls("smembers"), hmget = calls("hmget");

  store.index_put_({2}, row);
  CHECK(calls("watch") - watch == 1);  // one round trip: WATCH, the check, MULTI, SETRANGEs, EXEC
  CHECK(calls("evalsha") - evalsha == 1);  // the check, by its SHA1
  CHECK(calls("hmget") - hmget == 3);        // each leaf's metadata checked on the server
  CHECK(calls("setrange") - setrange == 3);  // every leaf, nested ones included
  CHECK(calls("exec") - exec == 1);
  CHECK(calls("smembers") == smembers);  // the cached structure was not re-read
  store.index_put_({at::indexing::Slice(2, 4)}, TensorDict({{"obs", at::full({6}, 9.f)}}, {}));  // broadcast
  CHECK(calls("exec") - exec == 2);

  const TensorDict back = store.to_tensordict();
  TensorDict expected = sample();
  expected.index_put_({0}, row);
  expected.index_put_({2}, row);
  expected.set_at_("obs", at::full({2, 6}, 9.f), {at::indexing::Slice(2, 4)});
  check_equal(back, expected);
}

TEST_CASE("a row write through a stale structure cache lands where the store is now", "[redis][store][index]") {
  RedisServer server;
  TensorDictStore writer = TensorDictStore::from_tensordict(sample(), store_options(server));
  TensorDictStore reader = TensorDictStore::from_store(writer.td_id(), store_options(server));
  const TensorDict row({{"obs", at::full({6}, 2.0)}, {"done", at::ones({}, at::kBool)}}, {});
  reader.index_put_({0}, row);  // the reader caches the structure
  writer.set("obs", at::zeros({4, 6}, at::kDouble));  // another client re-types one leaf
  writer.erase("done");                                // and erases another

  reader.index_put_({1}, row);
  const at::Tensor obs = writer.get("obs");
  CHECK(obs.scalar_type() == at::kDouble);
  CHECK(at::equal(obs.sum(1), at::tensor({0., 12., 0., 0.}, at::kDouble)));
  // The erased key is created again, as index_put_ creates a missing key: zeros but the row.
  CHECK(at::equal(writer.get("done"), at::tensor({0, 1, 0, 0}, at::kLong).to(at::kBool)));
  // The server's refusal changed nothing it checked: no trace of the touch that aborted it.
  redis::RedisClient raw(store_options(server));
  const redis::StoreKeys keys(store_options(server).prefix, writer.td_id());
  CHECK(raw.run({"HLEN", keys.meta("obs")})[0].integer() == 2);
  CHECK(raw.run({"HEXISTS", keys.meta("obs"), "__touch__"})[0].integer() == 0);

  // Scripts the server forgot (SCRIPT FLUSH by someone else) are sent again.
  raw.run({"SCRIPT", "FLUSH"});
  reader.index_put_({3}, row);
  CHECK(at::equal(writer.get("obs").sum(1), at::tensor({0., 12., 0., 12.}, at::kDouble)));

  // Flushed while another client changed a leaf: the unguarded write is reported, not passed.
  reader.index_put_({0}, row);  // loads the check script again
  writer.set("obs", at::zeros({4, 3}, at::kDouble));
  raw.run({"SCRIPT", "FLUSH"});
  CHECK_THROWS_WITH(reader.index_put_({2}, row), Catch::Contains("scripts were flushed"));
}

TEST_CASE("a row read is one transaction with the structure; through a stale cache it reads the store as it is now",
          "[redis][store][index]") {
  RedisServer server;
  TensorDictStore writer = TensorDictStore::from_tensordict(sample(), store_options(server));
  TensorDictStore reader = TensorDictStore::from_store(writer.td_id(), store_options(server));
  redis::RedisClient raw(store_options(server));
  const int64_t execs = stat(raw, "commandstats", "cmdstat_exec:calls=");
  const int64_t layouts = stat(raw, "commandstats", "cmdstat_evalsha:calls=") + stat(raw, "commandstats", "cmdstat_eval:calls=");
  check_equal(reader.index({1}), sample().index({1}));
  // The structure and the rows planned from the cached one, in one MULTI/EXEC.
  CHECK(stat(raw, "commandstats", "cmdstat_exec:calls=") - execs == 1);
  CHECK(stat(raw, "commandstats", "cmdstat_evalsha:calls=") + stat(raw, "commandstats", "cmdstat_eval:calls=") -
            layouts == 1);

  writer.set("obs", at::arange(24, at::kDouble).reshape({4, 6}) + 100);  // another client re-types one leaf
  writer.erase("done");                                                   // and erases another
  const TensorDict row = reader.index({1});
  CHECK(row.get("obs").scalar_type() == at::kDouble);
  CHECK(at::equal(row.get("obs"), at::arange(106, 112, at::kDouble)));
  CHECK_FALSE(row.contains("done"));
  check_equal(reader.index({at::tensor({3, 0}, at::kLong)}), writer.to_tensordict().index({at::tensor({3, 0}, at::kLong)}));
}

TEST_CASE("an indexed write of an index tensor or a mask moves only the selected rows", "[redis][store][index]") {
  RedisServer server;
  TensorDict td = sample();
  td.set("big", at::zeros({4, 1 << 18}));  // 1 MiB per row
  TensorDictStore store = TensorDictStore::from_tensordict(td, store_options(server));
  redis::RedisClient raw(store_options(server));
  const int64_t received = stat(raw, "stats", "total_net_input_bytes:");
  const int64_t ranges = stat(raw, "commandstats", "cmdstat_setrange:calls=");

  // Unsorted and negative rows, in one round trip: one SETRANGE per run of consecutive rows.
  const at::Tensor picks = at::tensor({2, -1, 0}, at::kLong);
  const at::Tensor values = at::arange(3, at::kFloat).view({3, 1}).expand({3, 1 << 18}) + 1;
  store.index_put_({picks}, TensorDict({{"big", values}}, {3}));
  CHECK(stat(raw, "commandstats", "cmdstat_setrange:calls=") - ranges == 2);  // rows 2..3, then 0
  const int64_t moved = stat(raw, "stats", "total_net_input_bytes:") - received;
  CHECK(moved > (int64_t{3} << 20));
  CHECK(moved < (int64_t{3} << 20) + 64 * 1024);
  td.index_put_({picks}, TensorDict({{"big", values}}, {3}));
  check_equal(store.to_tensordict(), td);

  // A mask, cast and broadcast; then a repeated row: the last value wins, as its bytes go last.
  const at::Tensor mask = at::tensor({0, 1, 0, 1}, at::kLong).to(at::kBool);
  store.index_put_({mask}, TensorDict({{"obs", at::full({6}, 5.0, at::kDouble)}}, {}));
  td.index_put_({mask}, TensorDict({{"obs", at::full({6}, 5.0, at::kDouble)}}, {}));
  check_equal(store.to_tensordict(), td);
  store.set_at_("obs", at::stack({at::full({6}, 8.f), at::full({6}, 9.f)}), {at::tensor({1, 1}, at::kLong)});
  CHECK(at::equal(store.get("obs")[1], at::full({6}, 9.f)));
  CHECK_THROWS_AS(store.index_put_({at::tensor({4}, at::kLong)}, TensorDict({{"obs", at::zeros({1, 6})}}, {1})),
                  IndexError);
}

TEST_CASE("a server still loading its data is waited for within command_timeout, then a StorageError",
          "[redis][store][persistence]") {
  // key-load-delay (a Redis test option) makes the restarted server load 20,000 keys for at
  // least 2 s, answering LOADING meanwhile.
  RedisServer server({"--appendonly", "yes", "--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024"});
  StoreOptions options = store_options(server);
  options.td_id = "loading";
  TensorDictStore::from_tensordict(sample(), options);
  {
    redis::RedisClient raw(store_options(server));
    raw.run({"EVAL", "for i = 1, 20000 do redis.call('SET', 'filler:' .. i, 'v') end return 1", "0"});
    raw.run({"BGREWRITEAOF"});  // the delay applies to the rewritten file's keys
    for (int i = 0; i < 500; ++i) {
      const std::string info(raw.run({"INFO", "persistence"})[0].str());
      if (info.find("aof_rewrite_in_progress:0") != std::string::npos &&
          info.find("aof_rewrite_scheduled:0") != std::string::npos)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  server.kill();
  server.start();  // accepts connections at once
  {
    StoreOptions direct = store_options(server);
    redis::Connection probe(direct, redis::NodeAddress{"", 0, server.socket()});
    REQUIRE(std::string(probe.pipeline({{"PING"}})[0].str()).rfind("LOADING", 0) == 0);  // still loading
  }
  StoreOptions impatient = options;
  impatient.command_timeout = std::chrono::milliseconds(50);
  CHECK_THROWS_WITH(TensorDictStore::from_store("loading", impatient), Catch::Contains("LOADING"));
  // Waited out: the store reads back whole once the server has loaded.
  check_equal(TensorDictStore::from_store("loading", options).to_tensordict(), sample());
}

TEST_CASE("a store survives a crash of a server with appendonly on, and not one without persistence",
          "[redis][store][persistence]") {
  for (const bool aof : {true, false}) {
    INFO("appendonly " << aof);
    RedisServer server(aof ? std::vector<std::string>{"--appendonly", "yes", "--appendfsync", "always"}
                           : std::vector<std::string>{});
    StoreOptions options = store_options(server);
    options.td_id = "durable";
    TensorDictStore store = TensorDictStore::from_tensordict(sample(), options);
    store.index_put_({at::indexing::Slice(1, 3)}, TensorDict({{"obs", at::full({2, 6}, 9.f)}}, {2}));
    server.kill();  // SIGKILL: no shutdown, no final save
    server.start();
    if (!aof) {
      CHECK_THROWS_AS(TensorDictStore::from_store("durable", options), KeyError);
      continue;
    }
    TensorDict expected = sample();
    expected.index_put_({at::indexing::Slice(1, 3)}, TensorDict({{"obs", at::full({2, 6}, 9.f)}}, {2}));
    check_equal(TensorDictStore::from_store("durable", options).to_tensordict(), expected);
  }
}
