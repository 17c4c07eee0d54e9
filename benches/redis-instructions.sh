#!/usr/bin/env bash
# What one decision costs Redis, counted in instructions: redis-server runs under callgrind, and
# each case is sent as a pipelined redis-benchmark run whose instructions are divided by its
# calls. Instructions are what Redis's own clock (`INFO commandstats`) measures on a quiet
# machine, without the noise of a shared one: two builds compare exactly.
#
#   bash benches/redis-instructions.sh            # this checkout's lua/
#   bash benches/redis-instructions.sh OTHER_DIR  # another checkout's, to compare
#
# Cases (1,000 keys in turn, state kept between calls as in production):
# - floor: the HTTP benchmark's ten-line GCRA script (benches/http/floor.rs), one request a call;
# - gcra: the crate's decision (lua/decide.lua as the function library runs it), GCRA, one
#   request a call, as a request with no other of its policy in flight;
# - gcra x11: a batch of 11 requests of one GCRA policy in one call, per request (the HTTP
#   benchmark's 0.088 calls per request);
# - fixed window: one request a call, one rule (an Envoy descriptor's).
# Needs valgrind (`apt-get install valgrind`), redis-server and redis-benchmark.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
source_dir=${1:-$here}
calls=${CALLS:-4000}
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# The library as src/store/redis/script/library.rs builds it: the helpers, every algorithm,
# then the entry point as a function.
{
  echo "#!lua name=bench"
  cat "$source_dir/lua/common.lua"
  for algorithm in fixed_window gcra sliding_log sliding_window token_bucket; do
    echo
    cat "$source_dir/lua/$algorithm.lua"
  done
  echo
  echo "redis.register_function('bench_decide', function(KEYS, ARGV)"
  cat "$source_dir/lua/decide.lua"
  echo "end)"
} >"$work/library.lua"
# The floor's script, as the HTTP benchmark sends it.
sed -n '/^const GCRA: &str = r"/,/^";/p' "$here/benches/http/floor.rs" | sed '1d;$d' >"$work/floor.lua"

valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
  redis-server --port "$port" --save '' --appendonly no >"$work/valgrind.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.2
done
redis-cli -p "$port" FUNCTION LOAD "$(cat "$work/library.lua")" >/dev/null
floor_sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$work/floor.lua")")

# count NAME REQUESTS_PER_CALL COMMAND...: instructions per request of COMMAND.
count() {
  local name=$1 per_call=$2
  shift 2
  # Every key seen first, so the counted calls meet state as a running service does.
  redis-benchmark -p "$port" -n 4000 -c 4 -P 16 -r 1000 -q "$@" >/dev/null
  callgrind_control -z "$server" >/dev/null 2>&1
  redis-benchmark -p "$port" -n "$calls" -c 4 -P 16 -r 1000 -q "$@" >/dev/null
  rm -f "$work"/callgrind.out.*
  callgrind_control -d "$server" >/dev/null 2>&1
  local dump total
  for _ in $(seq 50); do
    dump=$(ls "$work"/callgrind.out.* 2>/dev/null | head -1)
    [ -n "$dump" ] && grep -q '^totals:' "$dump" && break
    sleep 0.2
  done
  total=$(grep '^totals:' "$dump" | awk '{print $2}')
  printf '%-14s %8d instructions per request\n' "$name" $((total / calls / per_call))
}

batch_keys=()
batch_costs=()
for _ in $(seq 11); do
  batch_keys+=('rl:x:gcra-1000000/1s:{k__rand_int__}')
  batch_costs+=(1)
done
# decide.lua's arguments: keys, time ("" reads TIME), requests, minimum TTL, costs, then each
# rule's algorithm id, limit, period (µs), burst and parameter (GCRA: 1,000,000/s, burst
# 1,000,000; fixed window: 1,000,000,000 an hour).
count floor 1 EVALSHA "$floor_sha" 1 'floor:{k__rand_int__}' 1 1000000
count gcra 1 FCALL bench_decide 1 'rl:x:gcra-1000000/1s:{k__rand_int__}' '' 1 0 1 2 1 1 1000000 0
count 'gcra x11' 11 FCALL bench_decide 11 "${batch_keys[@]}" '' 11 0 "${batch_costs[@]}" 2 1 1 1000000 0
count 'fixed window' 1 FCALL bench_decide 1 'rl:x:fw-1000000000/1h:{k__rand_int__}' '' 1 0 1 \
  1 1000000000 3600000000 0 0
