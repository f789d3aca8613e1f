#!/usr/bin/env bash
# The conformance suite's server scenarios (issue 33), scenario by scenario, against the project's
# own conformance server (tests/servers/conformance_server.py, on the Python SDK) directly over
# Streamable HTTP, and through `mcplug serve --http --names unprefixed` fronting it over stdio.
# Prints a table: scenario × (direct, gateway) for each revision's wire. A run passes when the
# suite's checks.json has at least one SUCCESS and no FAILURE ("skip": it checked nothing); a
# gateway run also needs every check that succeeded directly to succeed, or be INFO (an optional
# way not taken), through it ("worse": one did not).
#
# Usage: tests/conformance/server.sh [scenario ...]   (default: the scenarios listed below)
# Environment: CONFORMANCE_SERVER_WIRES (default "2025-11-25 2026-07-28 extensions": the two revisions'
# wires, and the extensions' scenarios at theirs).
# Needs tests/install-deps.sh (Node 22, the suite, .deps/venv) and target/release/mcplug.
# A run fails when a scenario fails directly (the test server lacks it), or passes directly but
# not through the gateway (unless known below).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
node22=$root/.deps/node22/node_modules/node/bin/node
suite=$root/.deps/conformance/node_modules/conformance-0.2.0-alpha.12/dist/index.js
python=$root/.deps/venv/bin/python
server=$root/tests/servers/conformance_server.py
mcplug=$root/target/release/mcplug
work=$root/target/conformance-server
wires=${CONFORMANCE_SERVER_WIRES:-"2025-11-25 2026-07-28 extensions"}
rm -rf "$work" && mkdir -p "$work"

shared="tools-list tools-call-simple-text tools-call-image tools-call-audio tools-call-embedded-resource
tools-call-mixed-content tools-call-error tools-call-with-progress resources-list resources-read-text
resources-read-binary resources-templates-read prompts-list prompts-get-simple prompts-get-with-args
prompts-get-embedded-resource prompts-get-with-image completion-complete dns-rebinding-protection
server-sse-multiple-streams"
modern_only="server-stateless caching sep-2164-resource-not-found http-header-validation
input-required-result-basic-elicitation input-required-result-basic-sampling
input-required-result-basic-list-roots input-required-result-request-state
input-required-result-multiple-input-requests input-required-result-multi-round
input-required-result-missing-input-response input-required-result-non-tool-request
input-required-result-result-type input-required-result-unsupported-methods
input-required-result-tampered-state input-required-result-capability-check
input-required-result-ignore-extra-params input-required-result-validate-input"
# The tasks (io.modelcontextprotocol/tasks, SEP-2663) and skills (io.modelcontextprotocol/skills,
# SEP-2640) extensions, scored by neither revision.
# tasks-status-notifications is the suite's placeholder: it checks nothing yet.
extensions="tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal
tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-required-task-error
tasks-mrtr-composition sep-2640-skills-enumeration sep-2640-skills-manifest sep-2640-skills-directory"
legacy_only="server-initialize logging-set-level ping tools-call-with-logging tools-call-sampling
tools-call-elicitation elicitation-sep1034-defaults elicitation-sep1330-enums resources-subscribe
resources-unsubscribe"

# Known gaps through the gateway, each `<scenario>@<wire> <reason>`; one that passes is stale
# (the run fails: remove it).
known_gateway=""

free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# One scenario against a URL; prints pass, FAIL or skip.
verdict() {
  local url=$1 scenario=$2 wire=$3 out=$4 extra=()
  # The extensions' scenarios run at their own wire (2026-07-28), named by no --spec-version.
  [ "$wire" = 2026-07-28 ] && extra=(--spec-version 2026-07-28)
  mkdir -p "$out"
  PATH="$(dirname "$node22"):$PATH" timeout 90 "$node22" "$suite" server --url "$url" --scenario "$scenario" \
    "${extra[@]}" -o "$out" > "$out/stdout.txt" 2>&1 || true
  local checks
  checks=$(find "$out" -name checks.json | head -1)
  [ -n "$checks" ] || { echo "FAIL"; return; }
  "$python" - "$checks" <<'PY'
import json, sys
checks = json.load(open(sys.argv[1]))
statuses = [c.get("status") for c in checks]
print("FAIL" if "FAILURE" in statuses else "pass" if "SUCCESS" in statuses else "skip")
PY
}

# "pass" when every check that succeeded directly succeeded through the gateway, else "worse"
# (the checks lost are listed on stderr).
lost() {
  "$python" - "$(find "$1" -name checks.json | head -1)" "$(find "$2" -name checks.json | head -1)" <<'PY'
import json, sys
direct = {c["id"]: c["status"] for c in json.load(open(sys.argv[1]))}
gateway = {c["id"]: c for c in json.load(open(sys.argv[2]))}
# INFO is the suite saying an optional way was not taken (JSON answers instead of SSE ones).
worse = [f"{i}: {gateway[i]['status'] if i in gateway else 'missing'} {(gateway.get(i) or {}).get('errorMessage') or ''}"
         for i, st in direct.items() if st == "SUCCESS" and (gateway.get(i) or {}).get("status") not in ("SUCCESS", "INFO")]
for w in worse:
    print(f"  lost through the gateway: {w[:300]}", file=sys.stderr)
print("worse" if worse else "pass")
PY
}

direct_port=$(free_port)
"$python" "$server" --http "$direct_port" > "$work/direct-server.log" 2>&1 &
direct_pid=$!
printf '{"mcpServers":{"conformance":{"command":"%s","args":["%s"]}}}' "$python" "$server" > "$work/servers.json"
gateway_port=$(free_port)
HOME=$work "$mcplug" serve --strict-mcp-config --mcp-config "$work/servers.json" --names unprefixed \
  --http "127.0.0.1:$gateway_port" > "$work/gateway.url" 2> "$work/gateway.log" &
gateway_pid=$!
trap 'kill $direct_pid $gateway_pid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
wait_port "$direct_port" || { echo "the conformance server did not listen" >&2; exit 1; }
wait_port "$gateway_port" || { echo "mcplug serve did not listen" >&2; exit 1; }

failed=0
printf '%-34s %-11s %-8s %-8s\n' scenario wire direct gateway
for wire in $wires; do
  if [ $# -gt 0 ]; then list="$*"; elif [ "$wire" = 2025-11-25 ]; then list="$shared $legacy_only"; elif [ "$wire" = extensions ]; then list="$extensions"; else list="$shared $modern_only"; fi
  for scenario in $list; do
    d=$(verdict "http://127.0.0.1:$direct_port/mcp" "$scenario" "$wire" "$work/$wire/direct/$scenario")
    g=$(verdict "http://127.0.0.1:$gateway_port/mcp" "$scenario" "$wire" "$work/$wire/gateway/$scenario")
    # Through the gateway nothing may be lost: a check that succeeds directly must succeed
    # through it too (a WARNING there is a loss, "worse").
    if [ "$d" = pass ] && [ "$g" = pass ]; then g=$(lost "$work/$wire/direct/$scenario" "$work/$wire/gateway/$scenario"); fi
    known=$(printf '%s\n' "$known_gateway" | grep -c "^$scenario@$wire " || true)
    if [ "$known" = 1 ] && [ "$g" != pass ]; then g="$g(known)"
    elif [ "$known" = 1 ]; then g="$g(STALE)"; failed=1
    elif [ "$d" = pass ] && [ "$g" != pass ]; then failed=1
    fi
    [ "$d" = pass ] || failed=1
    printf '%-34s %-11s %-8s %-8s\n' "$scenario" "$wire" "$d" "$g"
  done
done
exit $failed
