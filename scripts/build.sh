#!/usr/bin/env bash
# Configures and builds tensordict-cpp with Ninja (and ccache when present) into ${BUILD_DIR:-build}.
# Extra arguments go to cmake's configure step; BUILD_TARGETS (space-separated) builds only those.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
# Paths relative to the checkout, so ccache hits across clones and build directories.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
# ccache caches compiles that use a precompiled header only with these (its manual, "Precompiled headers").
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
# RelWithDebInfo with line tables only (-g1): stack traces, profilers and sanitizer reports keep
# file:line, and GCC compiles a runtime source in half the time of -g (docs/reliability.md).
# Pass -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG" for full debug info.
relwithdebinfo="${RELWITHDEBINFO_FLAGS:--O2 -g1 -DNDEBUG}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$relwithdebinfo" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$relwithdebinfo" "$@" >"${build_dir}.configure.log" 2>&1 \
  || { cat "${build_dir}.configure.log"; exit 1; }
grep -E "^-- tensordict-cpp" "${build_dir}.configure.log" || true
# shellcheck disable=SC2086  # BUILD_TARGETS is a list
cmake --build "$build_dir" -j"${JOBS:-$(nproc)}" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
