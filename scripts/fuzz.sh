#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang-14, ASan + UBSan, the whole project instrumented)
# into ${SAN_BUILD_DIR:-build-san}, writes their seed corpora from the test fixtures, and runs them.
#
#   scripts/fuzz.sh                  every target for 60 s
#   scripts/fuzz.sh TARGET [SECONDS] one target (json, memmap, consolidated, tabular, yaml_schema,
#                                    h5, store_metadata) for SECONDS (default 60)
#   scripts/fuzz.sh all SECONDS      every target for SECONDS
#   scripts/fuzz.sh --replay         runs every input of every corpus once (seeds, what earlier
#                                    runs found, and fuzz/regressions/)
#   scripts/fuzz.sh --ci [SECONDS]   what CI does: --replay, then every target for SECONDS
#                                    (default 30), one per core at a time; h5_fuzzer goes on past
#                                    crashes inside libhdf5 itself (docs/reliability.md) and fails
#                                    on any other
#
# Findings go to $build/fuzz-findings/<target>/; a crash's input becomes a file under
# fuzz/regressions/<target>/ and a test of the reader it broke.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SAN_BUILD_DIR:-build-san}
targets=(json memmap consolidated tabular yaml_schema h5 store_metadata)

BUILD_TARGETS="fuzz_seeds $(printf '%s_fuzzer ' "${targets[@]}")" scripts/sanitize-build.sh >/dev/null
corpus=$build/fuzz-corpus
rm -rf "$build/fuzz-seeds" && "$build/fuzz/fuzz_seeds" "$PWD" "$build/fuzz-seeds"
# LibTorch's allocations at start-up are still reachable at exit: only leaks are reported.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run() {  # run TARGET SECONDS
  local t=$1 seconds=$2 dict=()
  mkdir -p "$corpus/$t" "$build/fuzz-findings/$t" "fuzz/regressions/$t"
  [[ -f fuzz/$t.dict ]] && dict=(-dict="fuzz/$t.dict")
  echo "== ${t}_fuzzer: ${seconds} s"
  # -rss_limit_mb: an input may not make a reader allocate more than it can really hold.
  local status=0
  "$build/fuzz/${t}_fuzzer" "$corpus/$t" "$build/fuzz-seeds/$t" "fuzz/regressions/$t" "${dict[@]}" \
    -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=10 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-findings/$t/" >"$build/fuzz-$t.log" 2>&1 || status=$?
  grep -E "^(stat::|Done|==[0-9]+==ERROR|SUMMARY|INFO: Seed: )|cov: .* DONE" "$build/fuzz-$t.log" || true
  ((status == 0)) || { echo "${t}_fuzzer failed: $build/fuzz-$t.log, input in $build/fuzz-findings/$t/"; return 1; }
}

replay() {  # replay TARGET: every corpus input once (-runs=0 executes the corpora and stops)
  local t=$1 dirs=()
  mkdir -p "fuzz/regressions/$t"
  for dir in "$build/fuzz-seeds/$t" "$corpus/$t" "fuzz/regressions/$t"; do [[ -d $dir ]] && dirs+=("$dir"); done
  echo "== ${t}_fuzzer: replaying $(find "${dirs[@]}" -type f | wc -l) inputs"
  "$build/fuzz/${t}_fuzzer" "${dirs[@]}" -runs=0 -rss_limit_mb=4096 -timeout=10 >"$build/fuzz-$t.log" 2>&1 \
    || { tail -40 "$build/fuzz-$t.log"; return 1; }
}

# A report (crash, leak or allocation over the limit) whose first frame in a library that
# matters is libhdf5's: the library's own bug on a corrupt file (fuzz/known-crashes/h5/),
# which no caller can prevent. A first frame in this project, LibTorch or c10 is ours.
# One process and no pipe: under pipefail, `grep | head -1` failed whenever head closed the pipe
# before grep had written every frame (a long trace), so a libhdf5 crash read as ours.
in_libhdf5() {
  local first
  first=$(awk '/^ +#[0-9]+ / && /libhdf5|tensordict::|c10::|at::/ { print; exit }' "$1")
  [[ $first == *libhdf5* ]]
}

ci_h5() {  # ci_h5 SECONDS: fuzz h5 in fork mode, then fail on any crash not inside libhdf5
  local seconds=$1 t=h5 own=0
  mkdir -p "$corpus/$t" "$build/fuzz-findings/$t" "fuzz/regressions/$t"
  rm -f "$build/fuzz-findings/$t"/*
  echo "== ${t}_fuzzer: ${seconds} s, past crashes inside libhdf5"
  "$build/fuzz/${t}_fuzzer" "$corpus/$t" "$build/fuzz-seeds/$t" "fuzz/regressions/$t" -dict=fuzz/h5.dict \
    -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 -max_total_time="$seconds" -rss_limit_mb=4096 \
    -timeout=10 -artifact_prefix="$build/fuzz-findings/$t/" >"$build/fuzz-$t.log" 2>&1 || true
  for crash in "$build/fuzz-findings/$t"/{crash,leak,oom}-*; do
    [[ -e $crash ]] || continue
    "$build/fuzz/${t}_fuzzer" -rss_limit_mb=4096 "$crash" >"$crash.log" 2>&1 || true
    grep -qE "ERROR|deadly" "$crash.log" || continue  # does not happen again alone
    in_libhdf5 "$crash.log" || { echo "h5_fuzzer: a crash outside libhdf5: $crash"; tail -40 "$crash.log"; own=1; }
  done
  return $own
}

ci_all() {  # ci_all SECONDS: every target (h5 through ci_h5), as many at once as there are cores
  local seconds=$1 slots=${JOBS:-$(nproc)} failed=0 t
  for t in "${targets[@]}"; do
    while (($(jobs -rp | wc -l) >= slots)); do wait -n || true; done
    # Each target is one process; its report is printed whole once all are done.
    ( status=0
      if [[ $t == h5 ]]; then ci_h5 "$seconds" || status=$?; else run "$t" "$seconds" || status=$?; fi
      echo "$status" >"$build/fuzz-$t.status" ) >"$build/fuzz-$t.report" 2>&1 &
  done
  wait
  for t in "${targets[@]}"; do
    cat "$build/fuzz-$t.report"
    [[ $(cat "$build/fuzz-$t.status" 2>/dev/null) == 0 ]] || failed=1
  done
  return $failed
}

case "${1:-all}" in
  --replay) for t in "${targets[@]}"; do replay "$t"; done ;;
  --ci)
    for t in "${targets[@]}"; do replay "$t"; done
    ci_all "${2:-30}" ;;
  all) failed=0; for t in "${targets[@]}"; do run "$t" "${2:-60}" || failed=1; done; exit $failed ;;
  *) run "$1" "${2:-60}" ;;
esac
