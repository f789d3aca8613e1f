#!/usr/bin/env bash
# mcplug measured beside the other MCP clients, in one run, against one server (peer-bench).
#
#   benches/run.sh            the full run (about 10 min): writes BENCHMARKS.md at the top of the checkout
#   benches/run.sh --quick    the CI smoke test (about 2.5 min once peer-bench's dependencies are built): tiny
#                             N, REPS=1, every client once; fails if any mcplug client fails; judges no speed
#                             and writes target/bench/BENCHMARKS.quick.md instead
# Each run spends about 1.5 min in run_all.sh rebuilding peer-bench's own crate: it copies its sources
# afresh (new mtimes), so its binaries always look stale. The first run also builds rmcp (about 3.5 min).
#
# Steps: builds libmcplug (release) and the C clients; runs peer-bench's run_all.sh with the three
# mcplug clients added through MCPB_EXTRA_CLIENT (C ABI, Python binding, Node binding), so the floor,
# the peers and mcplug share the same server and the same repetitions; S1 again in rotated order; the
# bounds no client could beat here (a language's bare start-up, the server's CPU per call in S3);
# counts instructions per call
# with callgrind (C client, raw client, rmcp); measures what the library adds to a C host's peak RSS;
# runs S2 over Streamable HTTP (benches/http_bench.py: mcplug's clients beside the TS SDK's, against
# peer-bench's rmcp HTTP server with and without TCP_NODELAY, and through nginx over HTTPS and plain
# HTTP; run_all.sh's HTTP rows have its own clients only) with the C client's instructions per call
# over HTTP and HTTPS; what TLS costs a call (benches/https_bench.py: pinned CPU per call, HTTPS
# beside plain HTTP through the same nginx, and beside the TS SDK over HTTPS);
# then benches/report.py writes the report.
#
# Environment:
#   MCPLUG_PEER_BENCH   peer-bench's folder (default: <checkout>/../shared/peer-bench); run as it is
#   PEER_BENCH_WORK     where run_all.sh builds the peers and keeps results (default /tmp/peer-bench;
#                       the first run builds rmcp there, a few minutes)
#   REPS S1_REPS N2 N3 C3 N4 SZ4 NH   passed on to run_all.sh (defaults there; --quick sets tiny ones);
#                       REPS and NH (S2 calls over HTTP, default 2000) also to http_bench.py
#   CG_N1 CG_N2         the two S2 sizes of the callgrind difference (default 1000 and 3000)
set -euo pipefail

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
cd "$root"
PB=${MCPLUG_PEER_BENCH:-$root/../shared/peer-bench}
if [ ! -x "$PB/run_all.sh" ]; then
  echo "peer-bench not found at $PB (set MCPLUG_PEER_BENCH to its folder)" >&2
  exit 1
fi
PB=$(cd "$PB" && pwd)
export PEER_BENCH_WORK=${PEER_BENCH_WORK:-/tmp/peer-bench}
out=$root/target/bench
mkdir -p "$out"
case "$root" in *[[:space:]]*)
  # run_all.sh splits a client's command line on whitespace
  echo "the checkout path contains whitespace; peer-bench cannot run clients from it" >&2; exit 1 ;;
esac

if [ $quick = 1 ]; then
  # Small enough for CI, yet every scenario and every client runs once. The HTTP rows of run_all.sh
  # run too (NH tiny; their fixed Nagle rows take a few seconds) but nothing depends on them; mcplug's
  # own HTTP rows (http_bench.py, NH calls, both servers) must succeed like the rest.
  export REPS=${REPS:-1} S1_REPS=${S1_REPS:-1} N2=${N2:-50} N3=${N3:-256} C3=${C3:-64} N4=${N4:-2} \
    SZ4=${SZ4:-65536} NH=${NH:-5}
  CG_N1=${CG_N1:-20} CG_N2=${CG_N2:-60}
  RSS_N=200
  report=$out/BENCHMARKS.quick.md
else
  CG_N1=${CG_N1:-1000} CG_N2=${CG_N2:-3000}
  RSS_N=${N2:-10000}
  report=$root/BENCHMARKS.md
fi

# what is measured: this commit, plus whatever tracked code differs from it (said in the report)
commit=$(git rev-parse --short HEAD)
dirty=$(git status --porcelain --untracked-files=no -- src Cargo.toml Cargo.lock build.rs bindings benches | cut -c4- | tr '\n' ' ')

echo "== building libmcplug (release) and the C bench clients" >&2
cargo build --release --lib >&2
CC=${CC:-cc}
"$CC" -O2 -std=c11 -Wall -Wextra -Wpedantic -Werror -pthread -Iinclude benches/clients/mcplug_client.c \
  -o "$out/mcplug_client" -L"$root/target/release" -lmcplug -Wl,-rpath,"$root/target/release"
# the same client held to 2025-11-25 by default (no `env` wrapper whose exec would count in S1)
"$CC" -O2 -std=c11 -Wall -Wextra -Wpedantic -Werror -pthread -Iinclude benches/clients/mcplug_client.c \
  '-DMCPB_DEFAULT_OPTIONS="{\"protocol_versions\":[\"2025-11-25\"]}"' \
  -o "$out/mcplug_client_2025" -L"$root/target/release" -lmcplug -Wl,-rpath,"$root/target/release"
"$CC" -O2 -std=c11 -Wall -Wextra -Wpedantic -Werror benches/clients/rss_baseline.c -o "$out/rss_baseline"
if [ ! -f bindings/node/node_modules/koffi/package.json ]; then
  echo "== installing the Node binding's dependency (koffi)" >&2
  (cd bindings/node && npm install --no-audit --no-fund --loglevel=error >&2)
fi

# Like the Python SDK's client (a venv that pip byte-compiled), the binding runs from the tests'
# venv when there is one, byte-compiled: the machine's base interpreter loads extra .pth start-up
# code, and an uncompiled package would be compiled again at every cold start. Otherwise the
# interpreter itself, not a pyenv shim (a shell script that would add its start-up to S1).
if [ -x "$root/.deps/venv/bin/python" ]; then
  PY=$root/.deps/venv/bin/python
else
  PY=$(python3 -c 'import sys; print(sys.executable)')
fi
"$PY" -m compileall -q "$root/bindings/python" >/dev/null
NODE=$(command -v node)
# The C and Node clients also run held to 2025-11-25, the revision the raw client and the TS SDK
# speak here (by default mcplug and this server agree on 2026-07-28, whose requests are 3.2x longer):
# like-for-like rows, see report.py. Their clients set the options themselves (no `env` wrapper,
# whose exec would count in S1). run_all.sh splits a row's command on whitespace: no spaces below.
export MCPB_EXTRA_CLIENT="mcplug (C)|$out/mcplug_client;;mcplug (Python)|$PY $root/benches/clients/mcplug_client.py;;mcplug (Node)|$NODE $root/benches/clients/mcplug_client.js;;mcplug (C), 2025-11-25|$out/mcplug_client_2025;;mcplug (Node), 2025-11-25|$NODE $root/benches/clients/mcplug_client_2025.js"

echo "== peer-bench: $PB/run_all.sh (work dir $PEER_BENCH_WORK)" >&2
started=$(date -u +%FT%TZ)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)
# --quick judges no speed, so the peers (rmcp and peer-bench's crate, built afresh by a clean CI
# clone) are built the quick way: no LTO, 16 codegen units, opt-level 1 (about 45 s less there).
pb_env=()
[ $quick = 1 ] && pb_env=(CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1)
env "${pb_env[@]}" "$PB/run_all.sh" | tee "$out/run_all.out"
t_run_all=$(( $(date +%s) - t_start ))
load="before run_all.sh: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg)"

R=$PEER_BENCH_WORK/rust/target/release
SRV=$R/mcp_server

# ---- S1 again, C clients against the raw and rmcp clients only, the order rotated each round:
# in run_all.sh mcplug's rows always start right after the Python SDK's, whose exit leaves the caches
# cold (it slows the next cold start by ~0.5-0.8 ms here, a larger library more) ----
S1_ROUNDS=$([ $quick = 1 ] && echo 2 || echo "${S1_ROUNDS:-24}")
echo "== S1, $S1_ROUNDS rounds in rotated order (C clients, raw, rmcp)" >&2
python3 benches/layers/s1_loop.py --rounds "$S1_ROUNDS" --out "$out/s1.jsonl" \
  --client "mcplug (C)|$out/mcplug_client $SRV" --client "mcplug (C), 2025-11-25|$out/mcplug_client_2025 $SRV" \
  --client "raw Rust client (blocking pipes) -> server|env:MCPB_SERVER=$SRV $R/floor" \
  --client "rmcp 3.11 client, tokio current_thread|env:MCPB_RT=current $R/rmcp_client $SRV" >&2

# ---- what no client could beat here, for the report's "reach" column ----
# S1 of the Node and Python clients beside their language's bare start-up (a script that prints the
# time at its first line: benches/layers/start_floor.*), rotated; and the server's own CPU per call
# in S3 under the raw client and the C clients (benches/layers/server_cpu.py): S3 is bound by it.
S1L_ROUNDS=$([ $quick = 1 ] && echo 1 || echo "${S1L_ROUNDS:-12}")
echo "== S1, $S1L_ROUNDS rounds in rotated order (Node and Python clients, their SDKs, bare start-up)" >&2
python3 benches/layers/s1_loop.py --rounds "$S1L_ROUNDS" --scen s1y --out "$out/s1lang.jsonl" \
  --client "TS SDK 1.32.2 (Node 20) StdioClientTransport|$NODE $PEER_BENCH_WORK/node/client.mjs $SRV" \
  --client "mcplug (Node)|$NODE $root/benches/clients/mcplug_client.js $SRV" \
  --client "mcplug (Node), 2025-11-25|$NODE $root/benches/clients/mcplug_client_2025.js $SRV" \
  --client "Node start-up|$NODE $root/benches/layers/start_floor.js" \
  --client "Python SDK mcp 2.3.0 stdio_client|$PEER_BENCH_WORK/py/venv/bin/python $PEER_BENCH_WORK/py/client.py $SRV" \
  --client "mcplug (Python)|$PY $root/benches/clients/mcplug_client.py $SRV" \
  --client "Python start-up|$PY $root/benches/layers/start_floor.py" >&2
echo "== the server's CPU per call in S3 (raw client, C clients)" >&2
python3 benches/layers/server_cpu.py --server "$SRV" --n "$([ $quick = 1 ] && echo 256 || echo "${N3:-20000}")" \
  --conc "${C3:-64}" --rounds "$([ $quick = 1 ] && echo 1 || echo 3)" --out "$out/server_cpu.jsonl" \
  --client "raw Rust client (blocking pipes) -> server|env:MCPB_SERVER=SERVER $R/floor" \
  --client "mcplug (C)|$out/mcplug_client" --client "mcplug (C), 2025-11-25|$out/mcplug_client_2025" >&2

# ---- instructions per call: callgrind, S2 at two sizes; the difference / (N2 - N1) cancels start-up ----
cg=$out/callgrind
rm -rf "$cg"
mkdir -p "$cg"
if command -v valgrind >/dev/null; then
  echo "== callgrind: S2 x $CG_N1 and x $CG_N2 calls (C client, raw client, rmcp current_thread)" >&2
  for n in "$CG_N1" "$CG_N2"; do
    timeout 900 valgrind --tool=callgrind --callgrind-out-file="$cg/mcplug-c.$n.out" \
      "$out/mcplug_client" "$SRV" s2 "$n" >"$cg/mcplug-c.$n.json" 2>"$cg/mcplug-c.$n.log" ||
      { echo "mcplug (C) failed under callgrind: see $cg/mcplug-c.$n.log" >&2; exit 1; }
    MCPB_SERVER=$SRV timeout 900 valgrind --tool=callgrind --callgrind-out-file="$cg/raw.$n.out" \
      "$R/floor" s2 "$n" >"$cg/raw.$n.json" 2>"$cg/raw.$n.log" || echo "callgrind of the raw client failed" >&2
    MCPB_RT=current timeout 900 valgrind --tool=callgrind --callgrind-out-file="$cg/rmcp.$n.out" \
      "$R/rmcp_client" "$SRV" s2 "$n" >"$cg/rmcp.$n.json" 2>"$cg/rmcp.$n.log" || echo "callgrind of rmcp failed" >&2
  done
else
  echo "== valgrind not installed: no instruction counts" >&2
fi

# ---- S2 over Streamable HTTP: mcplug's clients and the TS SDK's against peer-bench's rmcp HTTP server,
# with TCP_NODELAY on the server and without (run_all.sh's own HTTP rows have its clients only) ----
TS_HTTP='TS SDK 1.32.2 StreamableHTTPClientTransport'
http_args=(--server-bin "$R/mcp_http_server" --reps "${REPS:-3}" --n "${NH:-2000}" --n-slow 100 --slow "$TS_HTTP"
  --client "$TS_HTTP|$NODE $PEER_BENCH_WORK/node/client.mjs"
  --client "mcplug (C)|$out/mcplug_client"
  --client "mcplug (Python)|$PY $root/benches/clients/mcplug_client.py"
  --client "mcplug (Node)|$NODE $root/benches/clients/mcplug_client.js"
  --out "$out/http.jsonl" --log "$out/http.stderr" --https)
# --quick: the TS SDK against the Nagle-on server is left out (its 200 warm-up calls alone take 8 s)
[ $quick = 1 ] && http_args+=(--skip "$TS_HTTP|h2n")
command -v valgrind >/dev/null &&
  http_args+=(--callgrind-dir "$cg" --callgrind-client "$out/mcplug_client" --cg-n "$CG_N1" "$CG_N2")
echo "== Streamable HTTP: S2 x ${NH:-2000}, server TCP_NODELAY and Nagle on, x ${REPS:-3}" >&2
python3 benches/http_bench.py "${http_args[@]}"

# ---- what TLS costs a call: nginx in front, HTTPS beside plain HTTP, pinned CPU per call, with the TS SDK ----
https_args=(--server-bin "$R/mcp_http_server" --ts "$TS_HTTP" --out "$out/https.json"
  --client "$TS_HTTP|$NODE $PEER_BENCH_WORK/node/client.mjs"
  --client "mcplug (C)|$out/mcplug_client"
  --client "mcplug (Python)|$PY $root/benches/clients/mcplug_client.py"
  --client "mcplug (Node)|$NODE $root/benches/clients/mcplug_client.js")
if [ $quick = 1 ]; then
  https_args+=(--rounds 1 --sizes "$TS_HTTP=5,15" --sizes "mcplug (C)=20,60" --sizes "mcplug (Python)=20,60"
    --sizes "mcplug (Node)=20,60")
else
  https_args+=(--rounds 4 --sizes "$TS_HTTP=200,1200" --sizes "mcplug (Node)=1000,6000")
fi
echo "== HTTPS through nginx beside plain HTTP (benches/https_bench.py)" >&2
python3 benches/https_bench.py "${https_args[@]}" | tee "$out/https.txt" >&2

# ---- a bearer token on the direct HTTP path: the C client with and without a stored OAuth token ----
bearer_args=(--server-bin "$R/mcp_http_server" --client "$out/mcplug_client" --out "$out/bearer.json")
[ $quick = 1 ] && bearer_args+=(--rounds 1 --n1 20 --n2 60)
echo "== bearer token on the direct HTTP path (benches/bearer_bench.py)" >&2
python3 benches/bearer_bench.py "${bearer_args[@]}" | tee "$out/bearer.txt" >&2

# ---- peak RSS: a C host with the library (after connect + S2) against the same host without it ----
echo "== peak RSS: mcplug_client rss $RSS_N vs rss_baseline $RSS_N (x3)" >&2
: >"$out/rss.jsonl"
for _ in 1 2 3; do
  "$out/mcplug_client" "$SRV" rss "$RSS_N" >>"$out/rss.jsonl"
  "$out/rss_baseline" "$RSS_N" >>"$out/rss.jsonl"
done

raw_jsonl=$(sed -n 's/^# raw runs: \([^ ]*\).*/\1/p' "$out/run_all.out" | tail -1)
stderr_log=$(sed -n 's/^# raw runs: .*client stderr: \([^ ]*\).*/\1/p' "$out/run_all.out" | tail -1)
args=(--table "$out/run_all.out" --raw "$raw_jsonl" --stderr-log "$stderr_log" --callgrind "$cg"
  --cg-n "$CG_N1" "$CG_N2" --rss "$out/rss.jsonl" --out "$report" --started "$started"
  --run-all-seconds "$t_run_all" --peer-bench "$PB" --commit "$commit" --dirty "$dirty" --load "$load"
  --http "$out/http.jsonl" --http-stderr-log "$out/http.stderr" --s1-loop "$out/s1.jsonl" --bearer "$out/bearer.json"
  --https "$out/https.json"
  --s1-lang "$out/s1lang.jsonl" --server-cpu "$out/server_cpu.jsonl")
[ $quick = 1 ] && args+=(--quick)
# kept so that the report can be written again from this run's outputs (after editing its analysis)
printf '#!/usr/bin/env bash\ncd %q && exec python3 benches/report.py%s\n' "$root" "$(printf ' %q' "${args[@]}")" >"$out/report.sh"
chmod +x "$out/report.sh"
python3 benches/report.py "${args[@]}"
