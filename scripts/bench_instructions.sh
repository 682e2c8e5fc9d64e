#!/usr/bin/env bash
# The op table in instructions: each op of bench/ops_bench.cpp (fixture F) and its hand-written
# floor counted by callgrind, per call. Timing on a shared VM moves single medians by up to 2x
# within an hour; instruction counts do not move, so a ratio that rises here is a regression and
# one that rises only in scripts/bench.sh is noise (or memory: callgrind counts no cache misses
# or atomic contention, so it bounds what timing can show, it does not replace it).
#
#   scripts/bench_instructions.sh                 BUILD_DIR (default build-release) must hold bench/ops_bench
#   BENCH_ITERATIONS=20 BENCH_FILTER=add_td scripts/bench_instructions.sh
#   BENCH=packed_bench scripts/bench_instructions.sh    the one-kernel table (cpp against the per-leaf floor)
#
# Prints `op cpp_instructions floor_instructions ratio` (packed_bench: then `storage N views N`,
# its other hand-written floors) and the median and worst ratio. Needs
# valgrind (scripts/install-deps.sh installs it); about 2 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-release}
bin="$build_dir/bench/${BENCH:-ops_bench}"
[[ -x "$bin" ]] || { echo "bench_instructions: $bin not built (scripts/bench.sh builds it)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "bench_instructions: valgrind is not installed" >&2; exit 1; }
out=$(mktemp -d /tmp/tensordict-instructions.XXXXXX)
trap 'rm -rf "$out"' EXIT
n=${BENCH_ITERATIONS:-20}
# Debian's LibTorch loads libhwy (through OpenCV and libjxl), whose start-up timer runs `rdtscp`.
# On a CPU that does not report it (some VMs), valgrind stops there with SIGILL: a stand-in for
# that one timer, preloaded, keeps libhwy's start-up off the instruction (nothing counted calls it).
preload=()
libs=$(ldd "$bin")  # not piped into grep -q: under pipefail, ldd's SIGPIPE would read as "absent"
if ! grep -qw rdtscp /proc/cpuinfo && [[ $libs == *libhwy.so* ]]; then
  printf '#include <cstdint>\nnamespace hwy { namespace platform { uint64_t TimerResolution() { return 1; } } }\n' \
    > "$out/hwy_timer.cc"
  g++ -O2 -shared -fPIC -o "$out/libhwy_timer.so" "$out/hwy_timer.cc"
  preload=(env "LD_PRELOAD=$out/libhwy_timer.so")
fi
# The I/O ops (120 MiB files) are left out; set_new_nested is counted with its erase.
# LD_BIND_NOW: symbols bound at start-up, so no lazy binding (a few thousand instructions once) lands
# in a counted loop.
LD_BIND_NOW=1 TD_BENCH_ITERATIONS=$n "${preload[@]}" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/cg.out" \
  "$bin" --benchmark_filter="${BENCH_FILTER:-.}" > "$out/log" 2>&1 \
  || { tail -20 "$out/log" >&2; exit 1; }
/usr/bin/python3 - "$out" "$n" <<'PY'
import glob, os, re, statistics, sys

out, n = sys.argv[1], int(sys.argv[2])
count, order = {}, []
for path in glob.glob(os.path.join(out, "cg.out.*")):
    text = open(path).read()
    trigger = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
    total = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
    if trigger and total:
        count[trigger.group(1)] = int(total.group(1)) / n
        order.append((int(path.rsplit(".", 1)[1]), trigger.group(1)))
ratios = {}
for _, name in sorted(order):
    side, op = name.split("/", 1)
    if side == "cpp" and f"floor/{op}" in count:
        ratios[op] = count[name] / count[f"floor/{op}"]
        # packed_bench's other floors: one call over the storage, and that call cut into leaves.
        extra = "".join(f" {side} {count[f'{side}/{op}']:.0f}" for side in ("storage", "views") if f"{side}/{op}" in count)
        print(f"{op} {count[name]:.0f} {count['floor/' + op]:.0f} {ratios[op]:.3f}{extra}")
if not ratios:
    sys.exit("bench_instructions: no counts were dumped (was ops_bench built with <valgrind/callgrind.h>?)")
worst = max(ratios, key=ratios.get)
print(f"median ratio {statistics.median(ratios.values()):.3f}, worst ratio {ratios[worst]:.3f} ({worst}), "
      f"instructions per call, {n} calls each")
PY
