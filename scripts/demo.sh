#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the quickstart example, showing its output. Then
# installs the build into ${INSTALL_PREFIX:-build/_install} and builds and runs examples/rollout,
# a standalone project using that installed package (find_package(TensorDict)).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
scripts/install-deps.sh
scripts/build.sh -DTENSORDICT_BUILD_BENCHMARKS=OFF
echo
echo "==== examples/quickstart.cpp ===="
"$build_dir/examples/quickstart"

prefix=${INSTALL_PREFIX:-$build_dir/_install}
prefix=$(mkdir -p "$prefix" && cd "$prefix" && pwd)
echo
echo "==== cmake --install $build_dir --prefix $prefix ===="
cmake --install "$build_dir" --prefix "$prefix" >"$build_dir/install.log"
echo "installed: $(cd "$prefix" && ls -d include/tensordict bin/* lib/cmake/TensorDict share/tensordict/templates 2>/dev/null | tr '\n' ' ')"

echo
echo "==== examples/rollout (standalone project, built against $prefix) ===="
rollout_build=$build_dir/_rollout
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S examples/rollout -B "$rollout_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" >"$rollout_build.configure.log" 2>&1 \
  || { cat "$rollout_build.configure.log"; exit 1; }
cmake --build "$rollout_build" -j"${JOBS:-$(nproc)}"
"$rollout_build/rollout" "$rollout_build/rollout.memmap"
