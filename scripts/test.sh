#!/usr/bin/env bash
# Installs the dependencies, builds everything (tests, examples, benchmarks) and runs every test
# through CTest; then the sanitizer run and the fuzz targets' CI run. This is the README's test
# command and what CI runs.
#
#   scripts/test.sh [ctest args]             all of it (TEST_SANITIZE=0 or TEST_FUZZ=0 skip a part)
#   scripts/test.sh --sanitize [ctest args]  only the unit, contract, generator, typed, reliability
#                                            and distributed tests built with clang-14, ASan and UBSan
#                                            (scripts/sanitize-build.sh, target sanitizer_tests)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ "${1:-}" == --sanitize ]]; then
  shift
  BUILD_TARGETS=sanitizer_tests scripts/sanitize-build.sh
  cd "${SAN_BUILD_DIR:-build-san}"
  # Every report stops the test that made it (halt_on_error); leaks are reported at exit.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  exec ctest --output-on-failure -j"${JOBS:-$(nproc)}" -R '^(unit_tests|contract_tests|generator_tests|typed_tests|reliability_tests|dist_tests):' "$@"
fi
# Each step's end, in seconds since the start (docs/reliability.md keeps the figures).
step_done() { echo "test.sh: $1 done at ${SECONDS} s"; }
scripts/build.sh -DTENSORDICT_BUILD_BENCHMARKS=ON -DTENSORDICT_BENCH_COMPILE_ONLY=ON
step_done build
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"${JOBS:-$(nproc)}" "$@")
step_done tests
if [[ "${TEST_SANITIZE:-1}" != 0 ]]; then scripts/test.sh --sanitize; step_done "sanitizer build and tests"; fi
# Every corpus replayed, then every fuzz target for 20 s: a smoke run; longer runs are
# scripts/fuzz.sh by hand (docs/reliability.md).
if [[ "${TEST_FUZZ:-1}" != 0 ]]; then scripts/fuzz.sh --ci 20; step_done fuzzing; fi
