#!/usr/bin/env bash
# Installs the dependencies, builds everything (tests, examples, benchmarks) and runs every test
# through CTest. This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DTENSORDICT_BUILD_BENCHMARKS=ON
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"${JOBS:-$(nproc)}" "$@"
