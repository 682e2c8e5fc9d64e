#!/usr/bin/env bash
# The deployment path end to end: Python trains and scripts a policy, C++ runs it in an
# environment loop and stores the rollout, Python reads the rollout back and checks that it
# computes the same actions (1e-6). Usage: run.sh DEPLOY_POLICY_BINARY [WORK_DIR]
# Exit 77 (CTest's skip) when /usr/bin/python3 has no torch.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=$1
work=${2:-$(mktemp -d)}
python=/usr/bin/python3
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "deploy_policy: skipped, $python has no torch (python3-torch; scripts/install-deps.sh installs it)"
  exit 77
fi
rm -rf "$work/rollout"  # memmap_like refuses to replace an earlier run's rollout
mkdir -p "$work"
"$python" "$here/train_policy.py" "$work"
"$binary" "$work/policy.pt" "$work"
"$python" "$here/check_rollout.py" "$work"
