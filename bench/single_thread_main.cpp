// main() of the benchmarks that time one intra-op thread (scaling_bench, io_bench): both sides of
// every comparison run single-threaded, so ratios do not depend on the machine's core count.

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

int main(int argc, char** argv) {
  at::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
