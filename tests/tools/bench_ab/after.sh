#!/bin/sh
# The build after: `update` slower by 0.07, `construct` by 0.005 (under the threshold).
echo "construct 2.000 1.621 1.235  (rounds 1.210-1.250)"
echo "update 0.300 0.268 1.120  (rounds 1.100-1.140)"
echo "exp floor 14.307 36.181 0.400  (rounds 0.386-0.414)"
echo "paired: median ratio 1.120, worst ratio 1.235 (construct), 41 rounds of ~2 ms a side"
