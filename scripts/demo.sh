#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the quickstart example, showing its output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DTENSORDICT_BUILD_BENCHMARKS=OFF
echo
echo "==== examples/quickstart.cpp ===="
"${BUILD_DIR:-build}/examples/quickstart"
