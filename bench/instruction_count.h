#pragma once
// Instructions per call, for telling a regression from timing noise on a shared machine
// (scripts/bench_instructions.sh). With TD_BENCH_ITERATIONS=n in the environment, a benchmark
// wrapped in counted_loop runs exactly n iterations, once, after one uncounted call; under
// callgrind (--instr-atstart=no) only that loop is instrumented, and its count is dumped under the
// benchmark's name. Without valgrind the client requests are a few no-op instructions, and without
// TD_BENCH_ITERATIONS nothing changes.

#include <algorithm>
#include <cstdlib>
#include <string>

#include <benchmark/benchmark.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(name) (void)(name)
#endif

namespace bench_count {

// TD_BENCH_ITERATIONS, or 0: time-based iterations as usual.
inline int fixed_iterations() {
  static const int n = [] {
    const char* s = std::getenv("TD_BENCH_ITERATIONS");
    return s != nullptr ? std::max(0, std::atoi(s)) : 0;
  }();
  return n;
}

// Fixes the iteration count of `b` when counting.
inline void configure(benchmark::internal::Benchmark* b) {
  if (fixed_iterations() > 0) b->Iterations(fixed_iterations())->Repetitions(1);
}

// The benchmark loop over `body`; counted under callgrind when TD_BENCH_ITERATIONS is set.
template <typename Body>
void counted_loop(benchmark::State& state, const std::string& name, Body&& body) {
  const bool counting = fixed_iterations() > 0;
  if (counting) {
    body();  // first-call costs (dispatcher caches, lazily built tables) stay out of the count
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
  }
  for (auto _ : state) body();
  if (counting) {
    CALLGRIND_DUMP_STATS_AT(name.c_str());
    CALLGRIND_STOP_INSTRUMENTATION;
  }
}

}  // namespace bench_count
