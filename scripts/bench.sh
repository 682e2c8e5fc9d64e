#!/usr/bin/env bash
# Builds the benchmarks in Release mode and runs the fixed op set of ../shared/bench/ops.md on
# fixture F: every op through tensordict-cpp and as hand-written LibTorch (the floor), in the
# same binary. Prints one line per op, `op_id cpp_us floor_us ratio`, then
# `median ratio X, worst ratio Y (op_id)`.
#
# Environment: BUILD_DIR (default build-release), BENCH_REPETITIONS (default 5),
# BENCH_MIN_TIME seconds per repetition (default 0.2), BENCH_FILTER (a Google Benchmark regex),
# BENCH_SKIP_BUILD=1 to run the binary already in BUILD_DIR without (re)building it.
# Extra arguments go to the benchmark binary. Benchmarks are not tests: CI builds them only.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-release}
if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
  BUILD_DIR=$build_dir BUILD_TYPE=Release scripts/build.sh -DTENSORDICT_BUILD_BENCHMARKS=ON >/dev/null
fi
if [[ ! -x "$build_dir/bench/ops_bench" ]]; then
  echo "bench: $build_dir/bench/ops_bench was not built (is libbenchmark-dev installed?)" >&2
  exit 1
fi
json=$(mktemp /tmp/tensordict-bench.XXXXXX.json)
trap 'rm -f "$json"' EXIT
"$build_dir/bench/ops_bench" \
  --benchmark_repetitions="${BENCH_REPETITIONS:-5}" \
  --benchmark_min_time="${BENCH_MIN_TIME:-0.2}" \
  --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true \
  --benchmark_filter="${BENCH_FILTER:-.}" \
  --benchmark_out="$json" --benchmark_out_format=json "$@" >/dev/null
/usr/bin/python3 - "$json" <<'PY'
import json, statistics, sys

runs = json.load(open(sys.argv[1]))["benchmarks"]
median_us = {}
for b in runs:
    if b.get("aggregate_name") != "median":
        continue
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
    median_us[b["run_name"]] = b["real_time"] * scale

ops = []
for name in median_us:
    if name.startswith("cpp/"):
        op = name[len("cpp/"):]
        if "floor/" + op in median_us:
            ops.append(op)
ratios = {}
for op in ops:
    cpp, floor = median_us["cpp/" + op], median_us["floor/" + op]
    ratios[op] = cpp / floor
    print(f"{op} {cpp:.2f} {floor:.2f} {ratios[op]:.3f}")
if ratios:
    worst = max(ratios, key=ratios.get)
    print(f"median ratio {statistics.median(ratios.values()):.3f}, worst ratio {ratios[worst]:.3f} ({worst})")
PY
