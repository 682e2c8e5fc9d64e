// main() of the benchmarks that time one intra-op thread (scaling_bench, io_bench): both sides of
// every comparison run single-threaded, so ratios do not depend on the machine's core count.
// TD_BENCH_STEADY_MALLOC (scaling_bench) also fixes glibc's thresholds (steady_malloc.h); the I/O
// benchmarks keep the default allocator, whose page faults are part of what their floors measure.

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#ifdef TD_BENCH_STEADY_MALLOC
#include "steady_malloc.h"
#endif

int main(int argc, char** argv) {
  at::set_num_threads(1);
#ifdef TD_BENCH_STEADY_MALLOC
  bench_malloc::steady();
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
