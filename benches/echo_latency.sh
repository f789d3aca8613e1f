#!/usr/bin/env bash
# The median time of one `echo` tool call against @modelcontextprotocol/server-everything over
# stdio, from C, Python and Node, with the client and the server pinned to one CPU (taskset -c 0;
# the server inherits the affinity). Several runs each, interleaved; prints one JSON line per run.
#   benches/echo_latency.sh [N=2000] [RUNS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}; RUNS=${2:-3}
tests/install-deps.sh
cargo build --release --lib >&2
mkdir -p target/bench
cc -O2 -std=c11 -Wall -Wextra -Werror -Iinclude benches/echo_latency.c -Ltarget/release -lmcplug \
   -Wl,-rpath,"$(pwd)/target/release" -o target/bench/echo_latency
EV=(node .deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js)
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); N=$N, pinned: taskset -c 0"
for run in $(seq "$RUNS"); do
  taskset -c 0 target/bench/echo_latency "$N" -- "${EV[@]}"
  PYTHONPATH=bindings/python taskset -c 0 .deps/venv/bin/python benches/echo_latency.py "$N" "${EV[@]}"
  taskset -c 0 node benches/echo_latency.js "$N" "${EV[@]}"
done
