#!/usr/bin/env bash
# Runs Python tensordict v0.14 against this port's stored data on a machine whose python3 has
# torch >= 2.1 (tests/interop/README.md). Usage: run_v014.sh CARRY OUT
#   CARRY: tensordict/ (v0.14's Python package with its csrc/), pydeps/ (redis-py), redis/
#          (redis-server, lib/ with the libraries it needs), cpp_written/ (write_cpp_fixtures'
#          output plus store_rich.rdb)
#   OUT:   gets v014_fixtures.tar (what v0.14 wrote) and the checks' log
# Exits 1 when v0.14 could not write its fixtures or read back what C++ wrote.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
carry=$(cd "$1" && pwd)
out=$2
work=$(mktemp -d /tmp/v014.XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT

cp -r "$carry/tensordict" "$work/"
suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
# v0.14 builds its key helpers (tensordict._C) with pybind11; a pure-Python copy stands in when
# this machine cannot compile them.
# shellcheck disable=SC2046  # the include flags are a list
if ! c++ -O1 -shared -fPIC -std=c++20 $(python3 -m pybind11 --includes) "$work/tensordict/csrc/pybind.cpp" \
    "$work/tensordict/csrc/utils.cpp" -o "$work/tensordict/_C$suffix" 2>"$work/c_build.log"; then
  echo "run_v014: tensordict._C did not build, using the pure-Python stand-in:"
  tail -3 "$work/c_build.log"
  cp "$here/shims/tensordict_c_fallback.py" "$work/tensordict/_C.py"
fi
export PYTHONPATH="$work:$here/shims:$carry/pydeps" PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$carry/redis/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -c 'import tensordict, torch, redis; print("tensordict", tensordict.__version__, "torch", torch.__version__, "redis-py", redis.__version__)' || exit 1

# start_redis DIR [RDB]: a server on DIR/redis.sock (loading DIR/RDB when given), persistence off.
start_redis() {
  mkdir -p "$1"
  "$carry/redis/redis-server" --port 0 --unixsocket "$1/redis.sock" --save "" --appendonly no --dir "$1" \
    --dbfilename "${2:-dump.rdb}" --logfile "$1/redis.log" &
  pids+=($!)
  for _ in $(seq 200); do
    python3 -c "import redis, sys; redis.Redis(unix_socket_path=sys.argv[1]).ping()" "$1/redis.sock" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "run_v014: redis-server did not start:"; tail -5 "$1/redis.log"
  return 1
}

status=0
mkdir -p "$out"
if start_redis "$work/writer"; then
  python3 "$here/write_v014_fixtures.py" "$work/fixtures" "$work/writer/redis.sock" || status=1
else
  status=1
fi
[[ -d $work/fixtures ]] && tar -C "$work/fixtures" -cf "$out/v014_fixtures.tar" .

if [[ -d $carry/cpp_written ]]; then
  mkdir -p "$work/reader"
  cp "$carry/cpp_written/store_rich.rdb" "$work/reader/"
  if start_redis "$work/reader" store_rich.rdb; then
    python3 "$here/check_cpp_written.py" "$carry/cpp_written" "$work/reader/redis.sock" || status=1
  else
    status=1
  fi
fi
exit $status
