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
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >"${build_dir}.configure.log" 2>&1 \
  || { cat "${build_dir}.configure.log"; exit 1; }
grep -E "^-- tensordict-cpp" "${build_dir}.configure.log" || true
# shellcheck disable=SC2086  # BUILD_TARGETS is a list
cmake --build "$build_dir" -j"${JOBS:-$(nproc)}" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
