#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of tensordict-cpp from Debian 12's archive.
# Idempotent: when every package is already present it only runs dpkg-query and exits.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libgloo-dev
  libyaml-cpp-dev
  catch2
  libbenchmark-dev valgrind
  libhdf5-dev hdf5-tools
  libhiredis-dev redis-server redis-tools
  libcsv-dev
  libclang-cpp14-dev libclang-14-dev llvm-14-dev
  clang-14 libclang-rt-14-dev libfuzzer-14-dev
  python3 python3-numpy python3-h5py python3-redis python3-torch python3-dev python3-pytest pybind11-dev
)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
