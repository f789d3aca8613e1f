#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, both versions in
# .deps/conformance) against mcplug through each binding — C, Python, Node — one scenario at a
# time (never the suite's parallel mode: sse-retry is timing-based), and prints a table
# scenario × (suite version, binding).
#
# A run passes when the suite exits 0 and its checks.json holds at least one SUCCESS and no
# FAILURE or WARNING; a run that checked nothing (only SKIPPED/INFO) is "skip" and does not pass.
# tests/conformance/expected-failures.txt lists the scenarios that may fail, each with its reason
# (`<scenario> <reason>`, or `<scenario>@<suite version> <reason>` for one version only).
# Exits non-zero when a scenario not listed there fails in any column, when a listed one passes
# in any column (the entry is stale: remove it — the file can only shrink), or when a listed
# scenario is in neither suite version.
#
# Usage: tests/conformance/run.sh [scenario ...]    (default: every client scenario)
# Environment:
#   CONFORMANCE_VERSIONS  default "0.1.16 0.2.0-alpha.12"
#   CONFORMANCE_BINDINGS  default "c python node"
#   MCPLUG_LIBRARY        the library to test (default target/release/libmcplug.so, built by
#                         tests/run.sh; `cargo build --release --lib` makes it)
# Needs tests/install-deps.sh to have run (Node 22 and the suites in .deps).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

# A version is a suite package version, or `<package version>@<spec version>` for that suite's
# scenarios of one spec revision run at that revision (--spec-version: the 2026-07-28 stateless
# wire for every scenario it requires, the 2025-11-25 ones included).
versions=${CONFORMANCE_VERSIONS:-"0.1.16 0.2.0-alpha.12 0.2.0-alpha.12@2026-07-28"}
bindings=${CONFORMANCE_BINDINGS:-"c python node"}
lib=${MCPLUG_LIBRARY:-$root/target/release/libmcplug.so}
expected=tests/conformance/expected-failures.txt
work=$root/target/conformance
host_node=$(command -v node) # the Node binding runs on the machine's node, as its tests do
node22=$root/.deps/node22/node_modules/node/bin/node

[ -f "$lib" ] || { echo "conformance: no library at $lib (cargo build --release --lib)" >&2; exit 1; }
[ -x "$node22" ] || { echo "conformance: no Node 22 in .deps (run tests/install-deps.sh)" >&2; exit 1; }
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
export MCPLUG_LIBRARY=$lib
export PYTHONPATH=$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}
python=$root/.deps/venv/bin/python
[ -x "$python" ] || python=$(command -v python3)

rm -rf "$work/results"
mkdir -p "$work/results"

# The C client, built against the library under test (as the C ABI tests are).
libdir=$(dirname "$lib")
${CC:-cc} -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -I include tests/conformance/client.c \
  -L "$libdir" -l:"$(basename "$lib")" -Wl,-rpath,"$libdir" -pthread -o "$work/client"

client_command() {
  case $1 in
    c) echo "exec $work/client" ;;
    python) echo "exec $python $root/tests/conformance/client.py" ;;
    node) echo "exec $host_node $root/tests/conformance/client.js" ;;
    *) echo "conformance: unknown binding $1" >&2; exit 1 ;;
  esac
}

suite() { # <version> <args...>: the suite on Node 22 (first on PATH), bounded in time
  local v=$1 spec=; shift
  case $v in *@*) spec=${v#*@}; v=${v%%@*} ;; esac
  PATH="$(dirname "$node22"):$PATH" timeout 120 "$node22" \
    "$root/.deps/conformance/node_modules/conformance-$v/dist/index.js" "$@" \
    ${spec:+--spec-version "$spec"}
}

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); } # bash 5, no bc needed
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }   # milliseconds as seconds

results=$work/results.tsv # version binding scenario status seconds
: >"$results"
start_all=$(now_ms)
for v in $versions; do
  [ -f ".deps/conformance/node_modules/conformance-${v%%@*}/package.json" ] \
    || { echo "conformance: suite $v is not in .deps (run tests/install-deps.sh)" >&2; exit 1; }
  suite "$v" list --client | sed -n 's/^  - \([^ ]*\).*/\1/p' >"$work/scenarios-$v.txt"
  if [ $# -gt 0 ]; then
    printf '%s\n' "$@" | grep -Fxf "$work/scenarios-$v.txt" >"$work/run-$v.txt" || true
  else
    cp "$work/scenarios-$v.txt" "$work/run-$v.txt"
  fi
  for b in $bindings; do
    cmd=$(client_command "$b")
    start=$(now_ms)
    count=0
    while read -r s; do
      out=$work/results/$v/$b/${s//\//_}
      mkdir -p "$out"
      t0=$(now_ms)
      rc=0
      suite "$v" client --command "$cmd" --scenario "$s" --timeout 30000 -o "$out" \
        >"$out/suite.log" 2>&1 </dev/null || rc=$?
      t1=$(now_ms)
      status=$("$python" - "$out" "$rc" <<'EOF'
import glob, json, sys
out, rc = sys.argv[1], int(sys.argv[2])
found = glob.glob(f"{out}/**/checks.json", recursive=True)
statuses = [c.get("status") for f in found for c in json.load(open(f))]
bad = any(s in ("FAILURE", "WARNING") for s in statuses)
if rc == 0 and not bad:
    print("pass" if "SUCCESS" in statuses else "skip")
else:
    print("fail")
EOF
)
      printf '%s\t%s\t%s\t%s\t%s\n' "$v" "$b" "$s" "$status" "$(secs $((t1 - t0)))" >>"$results"
      count=$((count + 1))
    done <"$work/run-$v.txt"
    printf 'conformance %s %-6s %3d scenarios in %5s s\n' "$v" "$b" "$count" \
      "$(secs $(($(now_ms) - start)))" >&2
  done
done
elapsed=$(secs $(($(now_ms) - start_all)))

# The table, and the verdict against the expected failures.
complete=1 # every scenario of every version: only then is an unknown expected-failure entry stale
[ $# -eq 0 ] && [ -z "${CONFORMANCE_VERSIONS:-}" ] || complete=0
"$python" - "$results" "$expected" "$work" "$versions" "$bindings" "$elapsed" "$complete" <<'EOF'
import sys
results, expected_path, work, versions, bindings, elapsed, complete = sys.argv[1:]
versions, bindings = versions.split(), bindings.split()
rows = [line.rstrip("\n").split("\t") for line in open(results) if line.strip()]
cell = {(v, b, s): st for v, b, s, st, _secs in rows}
known = {v: [l.strip() for l in open(f"{work}/scenarios-{v}.txt") if l.strip()] for v in versions}
scenarios = []
for v in versions:
    for s in known[v]:
        if s not in scenarios and any(r[2] == s for r in rows):
            scenarios.append(s)
expected = {}
for n, line in enumerate(open(expected_path), 1):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    entry, _, reason = line.partition(" ")
    if not reason.strip():
        sys.exit(f"{expected_path}:{n}: '{entry}' has no reason")
    name, _, version = entry.partition("@")
    expected[(name, version or None)] = reason.strip()

short = {"python": "py", "node": "node", "c": "c"}
cols = [(v, b) for v in versions for b in bindings]
width = max([len(s) for s in scenarios] + [8])
group = {v: max(len(v), 6 * len(bindings) - 1) for v in versions}
head1 = " " * width + " | " + " | ".join(f"{v:<{group[v]}}" for v in versions)
head2 = f"{'scenario':<{width}} | " + " | ".join(
    f"{' '.join(f'{short.get(b, b):<5}' for b in bindings):<{group[v]}}" for v in versions)
print(head1.rstrip())
print(head2.rstrip())
print("-" * len(head2))
problems, counts = [], {}
for s in scenarios:
    marks = []
    for v, b in cols:
        st = cell.get((v, b, s))
        if st is None:
            mark = "-"
        elif (s, v) in expected or (s, None) in expected:
            mark = "XPASS" if st == "pass" else "xfail"
            if st == "pass":
                problems.append(f"{s} is listed as an expected failure but passes ({v}, {b}): remove it from {expected_path}")
        else:
            mark = {"pass": "pass", "fail": "FAIL", "skip": "SKIP"}[st]
            if st != "pass":
                problems.append(f"{s} {'checked nothing' if st == 'skip' else 'failed'} ({v}, {b}): see {work}/results/{v}/{b}/{s.replace('/', '_')}/suite.log")
        counts[mark] = counts.get(mark, 0) + 1
        marks.append(mark)
    nb = len(bindings)
    line = f"{s:<{width}} | " + " | ".join(
        f"{' '.join(f'{m:<5}' for m in marks[i * nb:(i + 1) * nb]):<{group[v]}}" for i, v in enumerate(versions))
    print(line.rstrip())
if complete == "1":
    for name, version in expected:
        if not any(name in known[v] for v in versions if version in (None, v)):
            where = f"suite {version}" if version else "any suite version"
            problems.append(f"{expected_path} lists '{name}{'@' + version if version else ''}', not a scenario of {where}: remove it")
print()
print("conformance: " + ", ".join(f"{n} {m}" for m, n in sorted(counts.items())) + f" in {float(elapsed):.0f} s"
      + " (xfail: expected failure, see tests/conformance/expected-failures.txt)")
slowest = sorted(rows, key=lambda r: -float(r[4]))[:3]
print("conformance: slowest runs: " + ", ".join(f"{r[2]} ({r[0]}, {r[1]}) {r[4]} s" for r in slowest))
for p in problems:
    print("conformance: " + p)
failed = sum(counts.get(m, 0) for m in ("FAIL", "SKIP", "XPASS"))
print(f"conformance: {counts.get('pass', 0)} passed, {failed} failed, {counts.get('xfail', 0)} skipped"
      " (skipped: the expected failures)")
sys.exit(1 if problems else 0)
EOF
