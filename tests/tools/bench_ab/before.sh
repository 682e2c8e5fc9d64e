#!/bin/sh
# A stand-in for `ops_bench --paired` (scripts/bench_ab.py's test): fixed ratios.
echo "construct 2.000 1.626 1.230  (rounds 1.210-1.250)"
echo "update 0.300 0.286 1.050  (rounds 1.040-1.060)"
echo "exp floor 14.307 36.181 0.400  (rounds 0.386-0.414)"
echo "paired: median ratio 1.050, worst ratio 1.230 (construct), 41 rounds of ~2 ms a side"
