#!/usr/bin/env bash
# The installed package, end to end (issue 6):
#  1. `cmake --install` of the current build tree into a temporary prefix, which is then moved
#     (the package must be relocatable) and checked for absolute build or source paths;
#  2. a copy of examples/rollout configured with find_package(TensorDict) against it, built
#     and run;
#  3. a field added to the copy's schema and a source file using it: the incremental rebuild
#     must regenerate rollout.td.h, recompile only what includes it, and the program must run
#     and print the new field; a further build must have nothing to do;
#  4. the same example with its record generated from the C++ schema (schemas/rollout.h,
#     tensordict_generate HEADERS): built and run; a field added through the header rollout.h
#     includes regenerates rollout.td.h and recompiles what includes it; an edit of that
#     header that changes nothing regenerates but compiles nothing; a further build does
#     nothing. Skipped when the package's tdgen has no C++ frontend (TENSORDICT_WITH_CLANG=OFF).
#
# Usage: installed_package_test.sh BUILD_DIR SOURCE_DIR WORK_DIR CXX_COMPILER [LAUNCHER] [TORCH_DIR]
#        [WITH_CLANG: ON (default) or OFF]
set -euo pipefail

build_dir=$1 source_dir=$2 work_dir=$3 cxx=$4 launcher=${5:-} torch_dir=${6:-} with_clang=${7:-ON}
here=$(cd "$(dirname "$0")" && pwd)

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo; echo "==== $*"; }
mtime() { stat -c %.9Y "$1"; }
expect_in() {  # expect_in FILE TEXT
  grep -qF -- "$2" "$1" || { cat "$1"; fail "expected '$2' in $1"; }
}

# configure_rollout SRC BUILD LOG [ARGS...]: configures the copy $work_dir/SRC of the example in
# $work_dir/BUILD against the installed prefix, logging to $work_dir/LOG.log.
configure_rollout() {
  local src=$1 build=$2 log=$3
  shift 3
  # -O0 without debug info: the test checks the package, not the example's speed, and this
  # halves its compiles.
  local args=(-S "$work_dir/$src" -B "$work_dir/$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0
              -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" "$@")
  [[ -n "$launcher" ]] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
  [[ -n "$torch_dir" ]] && args+=(-DTorch_DIR="$torch_dir")
  cmake "${args[@]}" >"$work_dir/$log.log" 2>&1 || { cat "$work_dir/$log.log"; fail "configure $src"; }
}

rm -rf "$work_dir"
mkdir -p "$work_dir"

step "install the build tree into a temporary prefix"
cmake --install "$build_dir" --prefix "$work_dir/prefix-staged" >"$work_dir/install.log"
mv "$work_dir/prefix-staged" "$work_dir/prefix"
prefix=$work_dir/prefix
for f in lib/cmake/TensorDict/TensorDictConfig.cmake lib/cmake/TensorDict/TensorDictConfigVersion.cmake \
         lib/cmake/TensorDict/TensorDictTargets.cmake lib/cmake/TensorDict/TensorDictGenerate.cmake \
         include/tensordict/tensordict.h bin/tdgen; do
  [[ -e "$prefix/$f" ]] || fail "not installed: $f"
done
ls "$prefix"/share/tensordict/templates/* >/dev/null || fail "templates not installed"
if grep -rlF -e "$(cd "$build_dir" && pwd)" -e "$(cd "$source_dir" && pwd)" -e "prefix-staged" \
     "$prefix/lib/cmake" "$prefix/share"; then
  fail "installed CMake files or templates name the build tree, the source tree or the staging prefix"
fi
echo "installed to $prefix (moved after install; no absolute build paths)"

if compgen -G "$build_dir/python/tensordict_cpp*.so" >/dev/null; then
  step "the installed Python module imports from the moved prefix"
  PYTHONPATH=$(echo "$prefix"/lib*/python3/dist-packages) /usr/bin/python3 -c \
    'import torch, tensordict_cpp as t; d = t.TensorDict({"a": torch.ones(2)}, batch_size=[2]); assert d["a"].sum() == 2' \
    || fail "tensordict_cpp does not import from $prefix"
  [[ -e "$prefix/include/tensordict/python/caster.h" ]] || fail "not installed: the pybind11 caster header"
fi

step "installed tdgen finds its templates without --templates"
printf 'namespace: probe\nclasses:\n  Probe:\n    kind: typed_tensordict\n    fields:\n      x: {dtype: float32}\n' \
  >"$work_dir/probe.yaml"
(cd "$work_dir" && "$prefix/bin/tdgen" --out "$work_dir/probe-out" probe.yaml)
expect_in "$work_dir/probe-out/probe.td.h" "class Probe"
"$prefix/bin/tdgen" --help >"$work_dir/help.log"
expect_in "$work_dir/help.log" "$prefix/share/tensordict/templates"

step "a program built with pkg-config against the moved prefix"
cat >"$work_dir/pc.cpp" <<'CPP'
#include <ATen/ATen.h>
#include <tensordict/tensordict.h>
int main() {
  tensordict::TensorDict td({{"x", at::ones({2})}}, {2});
  return td.get("x").sum().item<float>() == 2.f ? 0 : 1;
}
CPP
pc_flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs tensordict) || fail "pkg-config tensordict"
# shellcheck disable=SC2086
"$cxx" "$work_dir/pc.cpp" -o "$work_dir/pc" $pc_flags || fail "build with pkg-config flags: $pc_flags"
"$work_dir/pc" || fail "the pkg-config program ran wrongly"

step "configure and build examples/rollout against the installed package"
cp -r "$source_dir/examples/rollout" "$work_dir/rollout"
configure_rollout rollout build configure
expect_in "$work_dir/build/CMakeCache.txt" "TensorDict_DIR:PATH=$prefix/lib/cmake/TensorDict"
cmake --build "$work_dir/build" >"$work_dir/build1.log" 2>&1 || { cat "$work_dir/build1.log"; fail "build"; }
expect_in "$work_dir/build1.log" "tdgen: generating rollout.td.h"

step "run it"
"$work_dir/build/rollout" "$work_dir/rollout.memmap" | tee "$work_dir/run1.log"
expect_in "$work_dir/run1.log" "collected 64 steps x 8 envs into rollout::Rollout"
expect_in "$work_dir/run1.log" "reloaded: memmapped true, same data true"
expect_in "$work_dir/run1.log" "trained one step on [512] records"
[[ -f "$work_dir/rollout.memmap/meta.json" && -f "$work_dir/rollout.memmap/obs.memmap" ]] \
  || fail "no memmap directory written"

step "add a field to the schema and use it in summary.cpp, rebuild"
header=$(find "$work_dir/build" -name rollout.td.h)
[[ -n "$header" ]] || fail "generated header not found"
header_time=$(mtime "$header")
header_sum=$(sha256sum <"$header")
policy_obj=$(find "$work_dir/build" -name 'policy.cpp.o')
policy_time=$(mtime "$policy_obj")
summary_obj=$(find "$work_dir/build" -name 'summary.cpp.o')
summary_time=$(mtime "$summary_obj")
sleep 1  # file systems with coarse timestamps
sed -i 's/^\(      done: .*\)$/\1\n      advantage: {dtype: float32, shape: [], optional: true}  # added by the test/' \
  "$work_dir/rollout/schemas/rollout.yaml"
expect_in "$work_dir/rollout/schemas/rollout.yaml" "advantage:"
cp "$here/summary_with_advantage.cpp" "$work_dir/rollout/src/summary.cpp"
cmake --build "$work_dir/build" >"$work_dir/build2.log" 2>&1 || { cat "$work_dir/build2.log"; fail "rebuild"; }
cat "$work_dir/build2.log"
expect_in "$work_dir/build2.log" "tdgen: generating rollout.td.h"
[[ "$(mtime "$header")" != "$header_time" ]] || fail "rollout.td.h was not regenerated"
[[ "$(sha256sum <"$header")" != "$header_sum" ]] || fail "rollout.td.h did not change"
expect_in "$header" "set_advantage"
[[ "$(mtime "$summary_obj")" != "$summary_time" ]] || fail "summary.cpp was not recompiled"
[[ "$(mtime "$policy_obj")" == "$policy_time" ]] || fail "policy.cpp (which does not include the header) was recompiled"
echo "rollout.td.h regenerated; summary.cpp recompiled; policy.cpp untouched"

step "run it again: the new field is usable"
"$work_dir/build/rollout" "$work_dir/rollout.memmap" | tee "$work_dir/run2.log"
expect_in "$work_dir/run2.log" "fields: obs action log_prob reward done advantage"
expect_in "$work_dir/run2.log" "advantage [64, 8], centred true"
expect_in "$work_dir/run2.log" "trained one step on [512] records"
[[ -f "$work_dir/rollout.memmap/advantage.memmap" ]] || fail "the new field was not stored"

step "a further build has nothing to do"
cmake --build "$work_dir/build" >"$work_dir/build3.log" 2>&1 || { cat "$work_dir/build3.log"; fail "third build"; }
cat "$work_dir/build3.log"
if grep -E "tdgen: generating|Building CXX|Linking CXX" "$work_dir/build3.log"; then
  fail "an up-to-date build regenerated, recompiled or relinked something"
fi
if [[ $with_clang != ON ]]; then
  echo "the C++ schema steps skipped: this package's tdgen was built without its C++ frontend"
  echo "PASS"
  exit 0
fi

step "the C++ schema: configure with -DROLLOUT_CPP_SCHEMA=ON, build and run"
cp -r "$source_dir/examples/rollout" "$work_dir/rollout-cpp"
configure_rollout rollout-cpp build-cpp configure-cpp -DROLLOUT_CPP_SCHEMA=ON
cmake --build "$work_dir/build-cpp" >"$work_dir/build-cpp1.log" 2>&1 || { cat "$work_dir/build-cpp1.log"; fail "build (C++ schema)"; }
expect_in "$work_dir/build-cpp1.log" "tdgen: generating rollout.td.h from rollout.h"
"$work_dir/build-cpp/rollout" "$work_dir/rollout-cpp.memmap" | tee "$work_dir/run-cpp1.log"
expect_in "$work_dir/run-cpp1.log" "collected 64 steps x 8 envs into rollout::Rollout"

step "the C++ schema: a field added in the header rollout.h includes, rebuild"
cpp_header=$(find "$work_dir/build-cpp" -name rollout.td.h)
cpp_header_time=$(mtime "$cpp_header")
cpp_policy_obj=$(find "$work_dir/build-cpp" -name 'policy.cpp.o')
cpp_policy_time=$(mtime "$cpp_policy_obj")
cpp_summary_obj=$(find "$work_dir/build-cpp" -name 'summary.cpp.o')
cpp_summary_time=$(mtime "$cpp_summary_obj")
sleep 1
sed -i 's/^#define ROLLOUT_EXTRA_FIELDS$/#define ROLLOUT_EXTRA_FIELDS TD_OPTIONAL td::schema::Tensor<float> advantage;/' \
  "$work_dir/rollout-cpp/schemas/rollout_options.h"
expect_in "$work_dir/rollout-cpp/schemas/rollout_options.h" "advantage"
cp "$here/summary_with_advantage.cpp" "$work_dir/rollout-cpp/src/summary.cpp"
cmake --build "$work_dir/build-cpp" >"$work_dir/build-cpp2.log" 2>&1 || { cat "$work_dir/build-cpp2.log"; fail "rebuild (C++ schema)"; }
cat "$work_dir/build-cpp2.log"
expect_in "$work_dir/build-cpp2.log" "tdgen: generating rollout.td.h from rollout.h"
[[ "$(mtime "$cpp_header")" != "$cpp_header_time" ]] || fail "rollout.td.h was not regenerated from the included header's edit"
expect_in "$cpp_header" "set_advantage"
[[ "$(mtime "$cpp_summary_obj")" != "$cpp_summary_time" ]] || fail "summary.cpp was not recompiled"
[[ "$(mtime "$cpp_policy_obj")" == "$cpp_policy_time" ]] || fail "policy.cpp was recompiled"
"$work_dir/build-cpp/rollout" "$work_dir/rollout-cpp.memmap" | tee "$work_dir/run-cpp2.log"
expect_in "$work_dir/run-cpp2.log" "fields: obs action log_prob reward done advantage"

step "the C++ schema: an edit of the included header that changes no field compiles nothing"
cpp_summary_time=$(mtime "$cpp_summary_obj")
sleep 1
echo "// a comment: the generated header stays the same" >>"$work_dir/rollout-cpp/schemas/rollout_options.h"
cmake --build "$work_dir/build-cpp" >"$work_dir/build-cpp3.log" 2>&1 || { cat "$work_dir/build-cpp3.log"; fail "third build (C++ schema)"; }
cat "$work_dir/build-cpp3.log"
expect_in "$work_dir/build-cpp3.log" "tdgen: generating rollout.td.h from rollout.h"
if grep -E "Building CXX|Linking CXX" "$work_dir/build-cpp3.log"; then
  fail "an unchanged generated header recompiled something (restat)"
fi
[[ "$(mtime "$cpp_summary_obj")" == "$cpp_summary_time" ]] || fail "summary.cpp was recompiled"
cmake --build "$work_dir/build-cpp" >"$work_dir/build-cpp4.log" 2>&1 || { cat "$work_dir/build-cpp4.log"; fail "fourth build"; }
if grep -E "tdgen: generating|Building CXX|Linking CXX" "$work_dir/build-cpp4.log"; then
  fail "a no-op build (C++ schema) regenerated, recompiled or relinked something"
fi
echo "PASS"
