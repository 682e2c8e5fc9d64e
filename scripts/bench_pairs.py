"""Medians of a Google Benchmark JSON whose runs come in pairs, BM_<Op>_<Side>[/<n>]
(Side: Cpp for tensordict-cpp, Floor for the hand-written code), for scripts/bench.sh.

    from bench_pairs import medians
    seconds, rates, ops = medians("results.json")   # seconds[("Cpp", "Op/256")], ops in order
"""
import json


def medians(path):
    seconds, rates, order = {}, {}, []
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        parts = b["run_name"].split("/")
        op, side = parts[0][len("BM_"):].rsplit("_", 1)
        if len(parts) > 1 and parts[1].isdigit():
            op = f"{op}/{parts[1]}"
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        seconds[(side, op)] = b["real_time"] * scale
        rates[(side, op)] = b.get("items_per_second", 0.0)
        if op not in order:
            order.append(op)
    return seconds, rates, order
