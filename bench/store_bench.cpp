// TensorDictStore against hand-written hiredis code sending the same commands with the same
// pipelining (the floor), on a redis-server this binary starts on a unix socket. Each row is
// BM_<Op>_<Cpp|Floor>[/<rows>]; scripts/bench.sh prints the ratios. The rows are issue 16's:
// from_schema of a replay buffer, single-row typed writes, a random batch of 256 rows, a
// 256-row slice, and to_tensordict; BM_FromSchemaRss reports the client's peak RSS while it
// preallocates 100,000 rows (about 2 GB on the server).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <tensordict/backends/store.h>
#include <tensordict/tensordict.h>

#include "hiredis_floor.h"
#include "store_replay.td.h"
#include "support/redis_server.h"

namespace td = tensordict;

namespace {

testing_support::RedisServer& server() {
  // 100,000 rows of obs are 2 GB in one value: over Redis' default 512 MiB.
  static testing_support::RedisServer instance({"--proto-max-bulk-len", "4gb"});
  return instance;
}

td::StoreOptions options(const std::string& id) {
  td::StoreOptions out;
  out.unix_socket = server().socket();
  out.td_id = id;
  out.overwrite = true;  // some loops create one id again and again
  out.max_value_bytes = int64_t{4} << 30;
  return out;
}

// ---- the floor: hiredis, by hand ------------------------------------------------------------

// Hiredis on this binary's server.
struct ServerHiredis : Hiredis {
  ServerHiredis() : Hiredis(server().socket()) {}
};

struct Leaf {
  const char* name;
  std::vector<int64_t> event;
  at::ScalarType dtype;
  int64_t row_bytes() const {
    int64_t n = static_cast<int64_t>(c10::elementSize(dtype));
    for (int64_t d : event) n *= d;
    return n;
  }
};
const std::vector<Leaf> kLeaves = {{"obs", {84, 84, 3}, at::kByte}, {"action", {4}, at::kFloat}, {"reward", {}, at::kFloat}};

std::string key(const std::string& id, const std::string& suffix) { return "tensordict:{" + id + "}:" + suffix; }

std::string shape_json(int64_t rows, const std::vector<int64_t>& event) {
  std::string out = "[" + std::to_string(rows);
  for (int64_t d : event) out += ", " + std::to_string(d);
  return out + "]";
}

td::LeafSpecs schema() {
  td::LeafSpecs out;
  for (const Leaf& l : kLeaves) out.push_back({l.name, {l.event, l.dtype}});
  return out;
}

void flushall() {
  ServerHiredis h;
  h.append({"FLUSHALL"});
  h.drain();
}

void floor_from_schema(const std::string& id, int64_t rows) {
  ServerHiredis h;
  h.append({"MULTI"});
  h.append({"SET", key(id, "__batch_size__"), "[" + std::to_string(rows) + "]"});
  h.append({"SET", key(id, "__device__"), ""});
  for (const Leaf& l : kLeaves) {
    h.append({"SETRANGE", key(id, std::string("d:") + l.name), std::to_string(rows * l.row_bytes() - 1), std::string(1, '\0')});
    h.append({"HSET", key(id, std::string("m:") + l.name), "shape", shape_json(rows, l.event), "dtype",
              td::torch_dtype_name(l.dtype)});
    h.append({"SADD", key(id, "__keys__"), l.name});
  }
  h.append({"EXEC"});
  h.drain();
}

// ---- from_schema ------------------------------------------------------------------------------

void BM_FromSchema_Cpp(benchmark::State& state) {
  int n = 0;
  for (auto _ : state) {
    td::TensorDictStore::from_schema(schema(), {state.range(0)}, options("fs" + std::to_string(n++)));
    state.PauseTiming();
    flushall();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_FromSchema_Floor(benchmark::State& state) {
  int n = 0;
  for (auto _ : state) {
    floor_from_schema("ff" + std::to_string(n++), state.range(0));
    state.PauseTiming();
    flushall();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// Once: the client's peak RSS while it preallocates 100,000 rows, and how much of it
// from_schema added to the process (libtorch alone takes more than 100 MB once loaded).
int64_t peak_rss_kb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

void BM_FromSchemaRss_Cpp(benchmark::State& state) {
  at::zeros({1}).add_(1);  // torch's lazy initialization, before the baseline
  const int64_t before = peak_rss_kb();
  for (auto _ : state) {
    td::TensorDictStore::from_schema(schema(), {100000}, options("rss"));
  }
  const int64_t after = peak_rss_kb();
  state.counters["client_peak_rss_mb"] = static_cast<double>(after) / 1024.0;
  state.counters["rss_added_mb"] = static_cast<double>(after - before) / 1024.0;
  flushall();
}

// ---- a prefilled buffer of 10,000 rows ------------------------------------------------------------

constexpr int64_t kRows = 10000;

td::TensorDictStore& buffer() {
  static td::TensorDictStore store = [] {
    auto s = td::TensorDictStore::from_schema(schema(), {kRows}, options("buffer"));
    s.set_("obs", at::randint(0, 255, {kRows, 84, 84, 3}).to(at::kByte));
    s.set_("action", at::rand({kRows, 4}));
    s.set_("reward", at::rand({kRows}));
    return s;
  }();
  return store;
}

void BM_RowWrite_Cpp(benchmark::State& state) {
  bench::Replay replay = bench::Replay::from_tensordict(buffer());
  const bench::Replay row({{"obs", at::full({84, 84, 3}, 7, at::kByte)}, {"action", at::ones({4})},
                           {"reward", at::scalar_tensor(1.f)}});
  int64_t i = 0;
  for (auto _ : state) {
    replay.index_put_({i}, row);
    i = (i + 1) % kRows;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_RowWrite_Floor(benchmark::State& state) {
  buffer();
  ServerHiredis h;
  const at::Tensor obs = at::full({84, 84, 3}, 7, at::kByte), action = at::ones({4}), reward = at::scalar_tensor(1.f);
  int64_t i = 0;
  for (auto _ : state) {
    for (const auto& [leaf, value] : {std::pair<const Leaf*, const at::Tensor*>{&kLeaves[0], &obs},
                                      {&kLeaves[1], &action}, {&kLeaves[2], &reward}}) {
      h.append({"SETRANGE", key("buffer", std::string("d:") + leaf->name), std::to_string(i * leaf->row_bytes()),
                std::string(static_cast<const char*>(value->data_ptr()), static_cast<size_t>(leaf->row_bytes()))});
    }
    h.drain();
    i = (i + 1) % kRows;
  }
  state.SetItemsProcessed(state.iterations());
}

// ---- reads ------------------------------------------------------------------------------------

at::Tensor decode(redisReply* r, const Leaf& l, int64_t rows) {
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), l.event.begin(), l.event.end());
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(l.dtype));
  std::memcpy(out.data_ptr(), r->str, r->len);
  return out;
}

at::Tensor random_rows(int64_t n) { return at::randint(0, kRows, {n}, at::kLong); }

void BM_RandomRows_Cpp(benchmark::State& state) {
  td::TensorDictStore& store = buffer();
  for (auto _ : state) {
    const at::Tensor idx = random_rows(state.range(0));
    benchmark::DoNotOptimize(store.index({idx}));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_RandomRows_Floor(benchmark::State& state) {
  buffer();
  ServerHiredis h;
  for (auto _ : state) {
    const at::Tensor idx = random_rows(state.range(0));
    const int64_t* p = idx.data_ptr<int64_t>();
    // One GETRANGE per row and leaf, pipelined (what the store sends; random rows are rarely
    // consecutive, so it merges almost none).
    for (const Leaf& l : kLeaves) {
      for (int64_t i = 0; i < idx.numel(); ++i) {
        const int64_t first = p[i] * l.row_bytes();
        h.append({"GETRANGE", key("buffer", std::string("d:") + l.name), std::to_string(first),
                  std::to_string(first + l.row_bytes() - 1)});
      }
    }
    std::vector<redisReply*> replies = h.flush();
    size_t k = 0;
    for (const Leaf& l : kLeaves) {
      std::vector<int64_t> shape{idx.numel()};
      shape.insert(shape.end(), l.event.begin(), l.event.end());
      at::Tensor out = at::empty(shape, at::TensorOptions().dtype(l.dtype));
      char* dst = static_cast<char*>(out.data_ptr());
      for (int64_t i = 0; i < idx.numel(); ++i, ++k) {
        std::memcpy(dst + i * l.row_bytes(), replies[k]->str, replies[k]->len);
        freeReplyObject(replies[k]);
      }
      benchmark::DoNotOptimize(out);
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_SliceRows_Cpp(benchmark::State& state) {
  td::TensorDictStore& store = buffer();
  int64_t start = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(store.index({at::indexing::Slice(start, start + state.range(0))}));
    start = (start + state.range(0)) % (kRows - state.range(0));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_SliceRows_Floor(benchmark::State& state) {
  buffer();
  ServerHiredis h;
  int64_t start = 0;
  for (auto _ : state) {
    for (const Leaf& l : kLeaves)
      h.append({"GETRANGE", key("buffer", std::string("d:") + l.name), std::to_string(start * l.row_bytes()),
                std::to_string((start + state.range(0)) * l.row_bytes() - 1)});
    std::vector<redisReply*> replies = h.flush();
    for (size_t k = 0; k < replies.size(); ++k) {
      benchmark::DoNotOptimize(decode(replies[k], kLeaves[k], state.range(0)));
      freeReplyObject(replies[k]);
    }
    start = (start + state.range(0)) % (kRows - state.range(0));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_ToTensorDict_Cpp(benchmark::State& state) {
  td::TensorDictStore& store = buffer();
  for (auto _ : state) benchmark::DoNotOptimize(store.to_tensordict());
  state.SetItemsProcessed(state.iterations() * kRows);
}

void BM_ToTensorDict_Floor(benchmark::State& state) {
  buffer();
  ServerHiredis h;
  for (auto _ : state) {
    for (const Leaf& l : kLeaves) h.append({"GET", key("buffer", std::string("d:") + l.name)});
    std::vector<redisReply*> replies = h.flush();
    for (size_t k = 0; k < replies.size(); ++k) {
      benchmark::DoNotOptimize(decode(replies[k], kLeaves[k], kRows));
      freeReplyObject(replies[k]);
    }
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}

}  // namespace

BENCHMARK(BM_FromSchema_Cpp)->Arg(1000)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FromSchema_Floor)->Arg(1000)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RowWrite_Cpp)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RowWrite_Floor)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RandomRows_Cpp)->Arg(32)->Arg(256)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RandomRows_Floor)->Arg(32)->Arg(256)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SliceRows_Cpp)->Arg(32)->Arg(256)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SliceRows_Floor)->Arg(32)->Arg(256)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ToTensorDict_Cpp)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ToTensorDict_Floor)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FromSchemaRss_Cpp)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
