// send/recv and all_reduce_ between 2 processes on loopback (TCPStore + Gloo), against
// hand-written c10d code moving the same tensors: one call per leaf (the naive floor) and one
// flat buffer (cat, one call, copy out). Rows are BM_<Op>_<Side>: Cpp (tensordict-cpp),
// Consolidated (a consolidated tensordict into a consolidated one), FloorLeaf, FloorFlat;
// scripts/bench.sh prints the ratios.
//
// Point-to-point rows are round trips (rank 0 sends, rank 1 sends it back), so that both the
// sender's and the receiver's work is timed. This binary is rank 0; it starts itself as rank 1
// with the same arguments, and every benchmark has a fixed iteration count, so the two run the
// same calls in the same order. Fixture F: 30 leaves of [64, 16] float32. Fixture B: 3 groups
// of 10 float32 [rows, 256] leaves (rows 4096: 120 MiB; 1024 shows the growth).
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <tensordict/distributed.h>
#include <tensordict/tensordict.h>

#include "distributed/process_group.h"

namespace td = tensordict;
namespace dist = tensordict::distributed;

namespace {

int g_rank = 0;
c10::intrusive_ptr<c10d::ProcessGroupGloo> g_group;

c10d::ProcessGroup& pg() { return *g_group; }
int peer() { return 1 - g_rank; }

td::TensorDict fixture_f() {
  td::TensorDict out = td::TensorDict::empty_with({64});
  for (int i = 0; i < 30; ++i) out.set("leaf" + std::to_string(i), at::randn({64, 16}));
  return out;
}

td::TensorDict fixture_b(int64_t rows) {
  td::TensorDict out = td::TensorDict::empty_with({rows});
  for (const char* group : {"obs", "next", "extra"})
    for (int i = 0; i < 10; ++i) out.set({group, "leaf" + std::to_string(i)}, at::randn({rows, 256}));
  return out;
}

std::vector<at::Tensor> leaves_of(const td::TensorDict& t) {
  std::vector<at::Tensor> out;
  for (const auto& v : t.values(/*include_nested=*/true, /*leaves_only=*/true)) out.push_back(v.tensor());
  return out;
}

void wait(const c10::intrusive_ptr<c10d::Work>& w) { w->wait(); }

// ---- the floors: c10d by hand ------------------------------------------------------------------
void leaf_by_leaf(std::vector<at::Tensor>& leaves, bool sending) {
  for (auto& leaf : leaves) {
    std::vector<at::Tensor> one{leaf};
    wait(sending ? pg().send(one, peer(), 0) : pg().recv(one, peer(), 0));
  }
}

void flat(std::vector<at::Tensor>& leaves, bool sending) {
  int64_t n = 0;
  for (const auto& l : leaves) n += l.numel();
  if (sending) {
    std::vector<at::Tensor> parts;
    for (const auto& l : leaves) parts.push_back(l.view({-1}));
    std::vector<at::Tensor> one{at::cat(parts)};
    wait(pg().send(one, peer(), 0));
  } else {
    std::vector<at::Tensor> one{at::empty({n})};
    wait(pg().recv(one, peer(), 0));
    int64_t offset = 0;
    for (auto& l : leaves) {
      l.view({-1}).copy_(one[0].narrow(0, offset, l.numel()));
      offset += l.numel();
    }
  }
}

// Rank 0 sends then receives; rank 1 receives then sends back.
template <class Move>
void round_trips(benchmark::State& state, Move move, int64_t bytes) {
  for (auto _ : state) {
    move(g_rank == 0);
    move(g_rank != 0);
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
}

int64_t nbytes(const td::TensorDict& t) {
  int64_t n = 0;
  for (const auto& l : leaves_of(t)) n += l.numel() * static_cast<int64_t>(l.element_size());
  return n;
}

// ---- fixture F -----------------------------------------------------------------------------------
void BM_SendRecvF_Cpp(benchmark::State& state) {
  td::TensorDict f = fixture_f();
  round_trips(state, [&](bool sending) { sending ? dist::send(f, pg(), peer()) : dist::recv(f, pg(), peer()); }, nbytes(f));
}
void BM_SendRecvF_Consolidated(benchmark::State& state) {
  td::TensorDict f = td::consolidate(fixture_f());
  round_trips(state, [&](bool sending) { sending ? dist::send(f, pg(), peer()) : dist::recv(f, pg(), peer()); }, nbytes(f));
}
void BM_SendRecvF_FloorLeaf(benchmark::State& state) {
  td::TensorDict f = fixture_f();
  std::vector<at::Tensor> leaves = leaves_of(f);
  round_trips(state, [&](bool sending) { leaf_by_leaf(leaves, sending); }, nbytes(f));
}
void BM_SendRecvF_FloorFlat(benchmark::State& state) {
  td::TensorDict f = fixture_f();
  std::vector<at::Tensor> leaves = leaves_of(f);
  round_trips(state, [&](bool sending) { flat(leaves, sending); }, nbytes(f));
}

// ---- fixture B -----------------------------------------------------------------------------------
void BM_SendRecvB_Cpp(benchmark::State& state) {
  td::TensorDict b = fixture_b(state.range(0));
  round_trips(state, [&](bool sending) { sending ? dist::send(b, pg(), peer()) : dist::recv(b, pg(), peer()); }, nbytes(b));
}
void BM_SendRecvB_FloorFlat(benchmark::State& state) {
  td::TensorDict b = fixture_b(state.range(0));
  std::vector<at::Tensor> leaves = leaves_of(b);
  round_trips(state, [&](bool sending) { flat(leaves, sending); }, nbytes(b));
}
void BM_SendRecvB_FloorLeaf(benchmark::State& state) {
  td::TensorDict b = fixture_b(state.range(0));
  std::vector<at::Tensor> leaves = leaves_of(b);
  round_trips(state, [&](bool sending) { leaf_by_leaf(leaves, sending); }, nbytes(b));
}

// ---- all_reduce_ of fixture F --------------------------------------------------------------------
void BM_AllReduceF_Cpp(benchmark::State& state) {
  td::TensorDict f = fixture_f();
  for (auto _ : state) dist::all_reduce_(f, pg());
  state.SetBytesProcessed(state.iterations() * nbytes(f));
}
void BM_AllReduceF_FloorLeaf(benchmark::State& state) {
  std::vector<at::Tensor> leaves = leaves_of(fixture_f());
  for (auto _ : state) {
    for (auto& leaf : leaves) {
      std::vector<at::Tensor> one{leaf};
      wait(pg().allreduce(one));
    }
  }
}
void BM_AllReduceF_FloorFlat(benchmark::State& state) {
  std::vector<at::Tensor> leaves = leaves_of(fixture_f());
  for (auto _ : state) {
    std::vector<at::Tensor> parts;
    for (const auto& l : leaves) parts.push_back(l.view({-1}));
    std::vector<at::Tensor> one{at::cat(parts)};
    wait(pg().allreduce(one));
    int64_t offset = 0;
    for (auto& l : leaves) {
      l.view({-1}).copy_(one[0].narrow(0, offset, l.numel()));
      offset += l.numel();
    }
  }
}

}  // namespace

// Fixed iteration counts: both ranks must run every benchmark the same number of times.
BENCHMARK(BM_SendRecvF_Cpp)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SendRecvF_Consolidated)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SendRecvF_FloorLeaf)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SendRecvF_FloorFlat)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SendRecvB_Cpp)->Arg(1024)->Arg(4096)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SendRecvB_FloorFlat)->Arg(1024)->Arg(4096)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SendRecvB_FloorLeaf)->Arg(1024)->Arg(4096)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllReduceF_Cpp)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AllReduceF_FloorLeaf)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AllReduceF_FloorFlat)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  // "--rank1 PORT" (first): this process is the peer rank 0 started.
  std::vector<char*> args(argv, argv + argc);
  if (argc > 2 && std::strcmp(argv[1], "--rank1") == 0) {
    g_rank = 1;
    const auto port = static_cast<uint16_t>(std::atoi(argv[2]));
    args.erase(args.begin() + 1, args.begin() + 3);
    g_group = testing_support::loopback_group(1, 2, port);
  } else {
    // Rank 0 takes a free port for the store, then starts rank 1 with it and these arguments.
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return 1;
    const pid_t child = ::fork();
    if (child == 0) {
      // Waits for the port on the pipe, then becomes rank 1 (its output is dropped).
      ::close(pipe_fds[1]);
      char buf[16] = {0};
      if (::read(pipe_fds[0], buf, sizeof(buf) - 1) <= 0) ::_exit(1);
      std::vector<std::string> own{argv[0], "--rank1", buf};
      for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], "--benchmark_out", 15) != 0) own.emplace_back(argv[i]);  // rank 0 reports
      }
      std::vector<char*> exec_args;
      for (auto& a : own) exec_args.push_back(a.data());
      exec_args.push_back(nullptr);
      const int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, STDOUT_FILENO);
      ::execv("/proc/self/exe", exec_args.data());
      ::_exit(127);
    }
    ::close(pipe_fds[0]);
    c10d::TCPStoreOptions store_options;
    store_options.port = 0;
    store_options.isServer = true;
    store_options.numWorkers = 2;
    store_options.waitWorkers = false;
    auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
    const std::string port = std::to_string(store->getPort());
    if (::write(pipe_fds[1], port.c_str(), port.size()) < 0) return 1;
    ::close(pipe_fds[1]);
    auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(60));
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    g_group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, 0, 2, options);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_group.reset();
  if (g_rank == 0) ::wait(nullptr);
  return 0;
}
