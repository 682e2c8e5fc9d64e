#!/usr/bin/env python3
"""A/B of two builds of a paired benchmark (`ops_bench --paired`, `packed_bench --paired`).

    cp build/bench/ops_bench /tmp/ops_before      # then change the code and rebuild
    scripts/bench_ab.py /tmp/ops_before build/bench/ops_bench [--runs 5] [--filter update]

Each run prints every op's time against its floor (bench/paired_timing.h). The two binaries run
alternately, `--runs` times each, so a drift of the machine between runs falls on both. Per op it
prints the median ratio of each binary, their difference, and `apart` when the ranges of the two
binaries' runs do not overlap and differ by more than `--threshold`. An op moving between two
builds that did not change its path is code layout (docs/performance.md, "Timing rules"): compare
the instruction counts (scripts/bench_instructions.sh) before calling it a gain or a loss.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

# "<op> [<side>] <cpp_us> <side_us> <ratio>  (rounds <p25>-<p75>)"
LINE = re.compile(r"^(?P<op>\S+(?: \S+)?) [0-9.]+ [0-9.]+ (?P<ratio>[0-9.]+)  \(rounds ")


def run_once(command, env):
    out = subprocess.run(command + ["--paired"], env=env, check=True, capture_output=True, text=True).stdout
    ratios = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            ratios[m["op"]] = float(m["ratio"])
    if not ratios:
        raise SystemExit(f"bench_ab: {' '.join(command)} --paired printed no paired ratio")
    return ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the binary before (a copy: the build overwrites its own)")
    parser.add_argument("b", help="the binary after")
    parser.add_argument("--runs", type=int, default=5, help="runs of each binary (default 5)")
    parser.add_argument("--filter", default="", help="only ops whose name holds this (TD_BENCH_FILTER)")
    parser.add_argument("--threshold", type=float, default=0.015,
                        help="smallest difference of medians reported as apart (default 0.015)")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.filter:
        env["TD_BENCH_FILTER"] = args.filter
    runs = {"a": [], "b": []}
    for _ in range(args.runs):
        runs["a"].append(run_once([args.a], env))
        runs["b"].append(run_once([args.b], env))
    ops = [op for op in runs["a"][0] if all(op in r for side in runs.values() for r in side)]
    print(f"{'op':24s} {'A median':>8s} {'A range':>12s} {'B median':>8s} {'B range':>12s} {'B-A':>7s}")
    apart, differences = [], []
    for op in ops:
        a = [r[op] for r in runs["a"]]
        b = [r[op] for r in runs["b"]]
        diff = statistics.median(b) - statistics.median(a)
        differences.append(abs(diff))
        flag = ""
        if (min(b) > max(a) or max(b) < min(a)) and abs(diff) > args.threshold:
            flag = "  apart"
            apart.append(f"{op} {diff:+.3f}")
        print(f"{op:24s} {statistics.median(a):8.3f} {min(a):6.3f}-{max(a):.3f} {statistics.median(b):8.3f} "
              f"{min(b):6.3f}-{max(b):.3f} {diff:+7.3f}{flag}")
    for side in ("a", "b"):
        medians = " ".join(f"{statistics.median(r[op] for op in ops):.3f}" for r in runs[side])
        print(f"{side.upper()}: table median per run {medians}")
    print(f"median |B-A| {statistics.median(differences):.4f}; apart: {len(apart)} of {len(ops)}"
          + (f" ({', '.join(apart)})" if apart else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
