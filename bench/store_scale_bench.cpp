// TensorDictStore as a replay buffer, against the same buffer in memory, and scaled over writer
// processes and a Redis Cluster (issue 35). Fixture: 16,384 rows of obs float[64], action
// float[4], reward float. Rows: BM_<Op>_<Store|StorePerRow|Memory>/<rows>: filling 256 rows by
// slice and sampling 256 random rows, in the per-leaf (Python's) and per-row layouts, with the
// hand-written hiredis floors of the per-row layout's commands (BM_<Op>_RecordFloor: one MSET or
// MGET of 256 records, and their bytes moved to or from the tensors) and the least any layout
// sends for a fill (BM_Fill_OneValueFloor: the 256 rows' bytes in one SETRANGE); BM_FillProcesses/<writers>: one store filled by 1, 2 or 4 writer
// processes (this binary run with --writer), rows/s; BM_FillStores/<cluster>: 4 stores filled
// by 4 writers on one server (0) or a 3-master cluster (1). The servers are started here and
// stopped at exit. On a 2-core machine the writers and servers share the cores.
#include <benchmark/benchmark.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <tensordict/backends/store.h>
#include <tensordict/backends/store_group.h>
#include <tensordict/tensordict.h>

#include "hiredis_floor.h"
#include "support/child_process.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"

namespace td = tensordict;
using at::indexing::Slice;

namespace {

constexpr int64_t kRows = 16384;
constexpr int64_t kChunk = 256;
std::string g_self;  // this binary, for the writer processes

td::TensorDict zeros(int64_t n) {
  td::TensorDict out = td::TensorDict::empty_with({n});
  out.set("obs", at::zeros({n, 64}));
  out.set("action", at::zeros({n, 4}));
  out.set("reward", at::zeros({n}));
  return out;
}

td::TensorDict chunk(float value) {
  td::TensorDict out = td::TensorDict::empty_with({kChunk});
  out.set("obs", at::full({kChunk, 64}, value));
  out.set("action", at::full({kChunk, 4}, value));
  out.set("reward", at::full({kChunk}, value));
  return out;
}

testing_support::RedisServer& server() {
  static testing_support::RedisServer instance;
  return instance;
}

testing_support::RedisCluster& cluster() {
  static testing_support::RedisCluster instance(3, 0);
  return instance;
}

td::StoreOptions server_options(const std::string& id) {
  td::StoreOptions out = testing_support::store_options(server());
  out.td_id = id;
  out.overwrite = true;
  return out;
}

// Where a writer connects, as one argument: "unix:<socket>" or "cluster:<host:port>,...".
std::string where(const td::StoreOptions& options) {
  if (options.cluster_nodes.empty()) return "unix:" + options.unix_socket;
  std::string out = "cluster:";
  for (size_t i = 0; i < options.cluster_nodes.size(); ++i) out += (i ? "," : "") + options.cluster_nodes[i];
  return out;
}

td::StoreOptions parse_where(const std::string& text, const std::string& id) {
  td::StoreOptions out;
  out.td_id = id;
  if (text.rfind("unix:", 0) == 0) {
    out.unix_socket = text.substr(5);
    return out;
  }
  std::string rest = text.substr(8);
  for (size_t at = 0; at <= rest.size();) {
    const size_t comma = rest.find(',', at);
    out.cluster_nodes.push_back(rest.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// The writer process: opens the store, says "ready", waits for SIGUSR1, writes its rows in
// 256-row slices, says "done".
int writer_main(const std::string& at, const std::string& id, int64_t first, int64_t count) {
  sigset_t go;
  sigemptyset(&go);
  sigaddset(&go, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &go, nullptr);
  td::TensorDictStore store = td::TensorDictStore::from_store(id, parse_where(at, id));
  const td::TensorDict values = chunk(1.f);
  std::cout << "ready" << std::endl;
  int signal = 0;
  sigwait(&go, &signal);
  for (int64_t row = first; row < first + count; row += kChunk) store.index_put_({Slice(row, row + kChunk)}, values);
  std::cout << "done" << std::endl;
  return 0;
}

// Fills `ids` (kRows each) with `per_store` writers each, started first and released together;
// the time from the release to the last "done".
double timed_fill(const td::StoreOptions& options, const std::vector<std::string>& ids, int per_store) {
  std::vector<std::unique_ptr<testing_support::ChildProcess>> writers;
  const int64_t share = kRows / per_store;
  for (const std::string& id : ids)
    for (int w = 0; w < per_store; ++w)
      writers.push_back(std::make_unique<testing_support::ChildProcess>(std::vector<std::string>{
          g_self, "--writer", where(options), id, std::to_string(w * share), std::to_string(share)}));
  for (auto& w : writers)
    if (!w->wait_for_line("ready")) throw std::runtime_error("a writer did not start");
  const auto start = std::chrono::steady_clock::now();
  for (auto& w : writers) ::kill(w->pid(), SIGUSR1);
  for (auto& w : writers)
    if (!w->wait_for_line("done")) throw std::runtime_error("a writer failed");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& w : writers) w->wait();
  return seconds;
}

// ---- one process: fill and sample, store against memory ---------------------------------------

// 256-row slices written in turn into `buffer` (in memory, or a store: both are TensorDicts).
void fill_slices(benchmark::State& state, td::TensorDict buffer) {
  const td::TensorDict values = chunk(1.f);
  int64_t row = 0;
  for (auto _ : state) {
    buffer.index_put_({Slice(row, row + kChunk)}, values);
    row = (row + kChunk) % kRows;
  }
  state.SetItemsProcessed(state.iterations() * kChunk);
}

void BM_Fill_Memory(benchmark::State& state) { fill_slices(state, zeros(kRows)); }

void BM_Fill_Store(benchmark::State& state) {
  fill_slices(state, td::TensorDictStore::from_tensordict(zeros(kRows), server_options("fill")));
}

void BM_Sample_Memory(benchmark::State& state) {
  const td::TensorDict buffer = zeros(kRows);
  for (auto _ : state) benchmark::DoNotOptimize(buffer.index({at::randint(kRows, {kChunk}, at::kLong)}));
  state.SetItemsProcessed(state.iterations() * kChunk);
}

void BM_Sample_Store(benchmark::State& state) {
  td::TensorDictStore store = td::TensorDictStore::from_tensordict(zeros(kRows), server_options("sample"));
  for (auto _ : state) benchmark::DoNotOptimize(store.index({at::randint(kRows, {kChunk}, at::kLong)}));
  state.SetItemsProcessed(state.iterations() * kChunk);
}

void BM_Fill_StorePerRow(benchmark::State& state) {
  td::StoreOptions options = server_options("fill_rows");
  options.layout = td::StoreLayout::per_row;
  td::TensorDict store = td::TensorDictStore::from_tensordict(zeros(kRows), options);
  store.unlock_();  // as the other buffers; a per-row store's leaves are fixed anyway
  fill_slices(state, store);
}

void BM_Sample_StorePerRow(benchmark::State& state) {
  td::StoreOptions options = server_options("sample_rows");
  options.layout = td::StoreLayout::per_row;
  td::TensorDictStore store = td::TensorDictStore::from_tensordict(zeros(kRows), options);
  for (auto _ : state) benchmark::DoNotOptimize(store.index({at::randint(kRows, {kChunk}, at::kLong)}));
  state.SetItemsProcessed(state.iterations() * kChunk);
}

// ---- hand-written floors (hiredis) ----------------------------------------------------------

constexpr size_t kRecordBytes = (64 + 4 + 1) * sizeof(float);

// Keys as long as a store's (its prefix and a uuid4 id): the server hashes and compares them.
std::string record_key(int64_t row) { return "tensordict:{00000000-0000-4000-8000-00000000f100}:r:" + std::to_string(row); }

// Rows of the chunk's three leaves packed into records and sent as one MSET, as by hand.
void BM_Fill_RecordFloor(benchmark::State& state) {
  Hiredis h(server().socket());
  const td::TensorDict values = chunk(1.f);
  const at::Tensor obs = values.get("obs"), action = values.get("action"), reward = values.get("reward");
  int64_t row = 0;
  for (auto _ : state) {
    std::vector<std::string> mset{"MSET"};
    for (int64_t i = 0; i < kChunk; ++i) {
      std::string record(kRecordBytes, '\0');
      std::memcpy(&record[0], obs.data_ptr<float>() + i * 64, 64 * sizeof(float));
      std::memcpy(&record[64 * sizeof(float)], action.data_ptr<float>() + i * 4, 4 * sizeof(float));
      std::memcpy(&record[68 * sizeof(float)], reward.data_ptr<float>() + i, sizeof(float));
      mset.push_back(record_key(row + i));
      mset.push_back(std::move(record));
    }
    h.append(mset);
    h.drain();
    row = (row + kChunk) % kRows;
  }
  state.SetItemsProcessed(state.iterations() * kChunk);
}

// The least a fill of these rows can send through Redis, whatever the layout: their bytes as
// one value (one SETRANGE), one round trip.
void BM_Fill_OneValueFloor(benchmark::State& state) {
  Hiredis h(server().socket());
  const std::string bytes(static_cast<size_t>(kChunk) * kRecordBytes, '\1');
  int64_t row = 0;
  for (auto _ : state) {
    h.append({"SETRANGE", "tensordict:{00000000-0000-4000-8000-00000000f100}:all", std::to_string(row * kRecordBytes), bytes});
    h.drain();
    row = (row + kChunk) % kRows;
  }
  state.SetItemsProcessed(state.iterations() * kChunk);
}

// 256 random records read with one MGET and cut into three new tensors, as by hand.
void BM_Sample_RecordFloor(benchmark::State& state) {
  Hiredis h(server().socket());
  for (int64_t first = 0; first < kRows; first += 1024) {
    std::vector<std::string> mset{"MSET"};
    for (int64_t r = first; r < first + 1024; ++r) {
      mset.push_back(record_key(r));
      mset.push_back(std::string(kRecordBytes, '\0'));
    }
    h.append(mset);
  }
  h.drain();
  for (auto _ : state) {
    const at::Tensor picks = at::randint(kRows, {kChunk}, at::kLong);
    std::vector<std::string> mget{"MGET"};
    for (int64_t i = 0; i < kChunk; ++i) mget.push_back(record_key(picks.data_ptr<int64_t>()[i]));
    h.append(mget);
    std::vector<redisReply*> replies = h.flush();
    at::Tensor obs = at::empty({kChunk, 64}), action = at::empty({kChunk, 4}), reward = at::empty({kChunk});
    for (int64_t i = 0; i < kChunk; ++i) {
      const char* record = replies[0]->element[i]->str;
      std::memcpy(obs.data_ptr<float>() + i * 64, record, 64 * sizeof(float));
      std::memcpy(action.data_ptr<float>() + i * 4, record + 64 * sizeof(float), 4 * sizeof(float));
      std::memcpy(reward.data_ptr<float>() + i, record + 68 * sizeof(float), sizeof(float));
    }
    freeReplyObject(replies[0]);
    benchmark::DoNotOptimize(obs);
  }
  state.SetItemsProcessed(state.iterations() * kChunk);
}

// ---- writer processes --------------------------------------------------------------------------

void BM_FillProcesses(benchmark::State& state) {
  const td::StoreOptions options = server_options("shared");
  td::TensorDictStore::from_tensordict(zeros(kRows), options);
  for (auto _ : state) state.SetIterationTime(timed_fill(options, {"shared"}, static_cast<int>(state.range(0))));
  state.SetItemsProcessed(state.iterations() * kRows);
}

void BM_FillStores(benchmark::State& state) {
  const bool on_cluster = state.range(0) == 1;
  td::StoreOptions options = on_cluster ? cluster().options() : server_options("");
  options.overwrite = true;
  const std::vector<std::string> ids = td::spread_store_ids("fill", 4, options);
  for (const std::string& id : ids) {
    options.td_id = id;
    td::TensorDictStore::from_tensordict(zeros(kRows), options);
  }
  for (auto _ : state) state.SetIterationTime(timed_fill(options, ids, 1));
  state.SetItemsProcessed(state.iterations() * kRows * static_cast<int64_t>(ids.size()));
}

// 256 rows from 4 stores spread over the cluster's 3 masters: through a StoreGroup (two round
// trips per master, all masters at once) against each store read in turn (two each).
std::vector<td::TensorDictStore> cluster_stores() {
  td::StoreOptions options = cluster().options();
  options.overwrite = true;
  std::vector<td::TensorDictStore> out;
  for (const std::string& id : td::spread_store_ids("sampled", 4, options)) {
    options.td_id = id;
    out.push_back(td::TensorDictStore::from_tensordict(zeros(kRows), options));
  }
  return out;
}

void BM_SampleStores_Group(benchmark::State& state) {
  const td::StoreGroup group(cluster_stores());
  for (auto _ : state) benchmark::DoNotOptimize(group.sample(kChunk));
  state.SetItemsProcessed(state.iterations() * kChunk);
}

void BM_SampleStores_EachStore(benchmark::State& state) {
  const std::vector<td::TensorDictStore> stores = cluster_stores();
  for (auto _ : state) {
    std::vector<td::TensorDict> parts;
    for (const td::TensorDictStore& store : stores)
      parts.push_back(store.index({at::randint(kRows, {kChunk / 4}, at::kLong)}));
    benchmark::DoNotOptimize(td::cat(parts, 0));
  }
  state.SetItemsProcessed(state.iterations() * kChunk);
}

}  // namespace

BENCHMARK(BM_SampleStores_Group)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SampleStores_EachStore)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Fill_Memory)->Arg(kChunk)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Fill_Store)->Arg(kChunk)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample_Memory)->Arg(kChunk)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample_Store)->Arg(kChunk)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Fill_StorePerRow)->Arg(kChunk)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample_StorePerRow)->Arg(kChunk)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Fill_RecordFloor)->Arg(kChunk)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Fill_OneValueFloor)->Arg(kChunk)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sample_RecordFloor)->Arg(kChunk)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FillProcesses)->Arg(1)->Arg(2)->Arg(4)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FillStores)->Arg(0)->Arg(1)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  char self[4096] = {};
  g_self = ::readlink("/proc/self/exe", self, sizeof(self) - 1) > 0 ? self : argv[0];
  if (argc == 6 && std::string(argv[1]) == "--writer")
    return writer_main(argv[2], argv[3], std::stoll(argv[4]), std::stoll(argv[5]));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
