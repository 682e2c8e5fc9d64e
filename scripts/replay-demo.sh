#!/usr/bin/env bash
# Runs examples/distributed_replay on this machine: a redis-server on a free loopback port
# (stopped on exit, whatever happens), a learner and ACTORS actor processes joined by c10d.
#
#   scripts/replay-demo.sh [ACTORS (default 3)] [ROUNDS (default 20)]
#
# Builds the example into ${BUILD_DIR:-build} first when it is missing. Exits non-zero when a
# process fails. docs/distributed.md says how to run the same binary across machines.
set -euo pipefail
cd "$(dirname "$0")/.."
actors=${1:-3}
rounds=${2:-20}
build_dir=${BUILD_DIR:-build}
binary=$build_dir/examples/distributed_replay
if [[ ! -x $binary ]]; then BUILD_TARGETS=distributed_replay scripts/build.sh >/dev/null; fi

free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
redis_port=$(free_port)
master_port=$(free_port)
dir=$(mktemp -d /tmp/tensordict-replay-demo.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [[ -f $dir/redis.pid ]] && kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no --daemonize yes \
  --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null
for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
echo "redis-server on 127.0.0.1:$redis_port, c10d master on 127.0.0.1:$master_port, $actors actors, $rounds rounds"

world=$((actors + 1))
for rank in $(seq 0 "$actors"); do
  "$binary" --rank "$rank" --world "$world" --master "127.0.0.1:$master_port" --redis "127.0.0.1:$redis_port" \
    --rounds "$rounds" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
pids=()
exit $status
