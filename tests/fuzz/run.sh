#!/usr/bin/env bash
# Fuzzes every target of tests/fuzz in turn (cargo-fuzz, on the nightly toolchain), each for
# FUZZ_RUNS executions (default 10 million) or FUZZ_SECONDS (default 1800), whichever comes
# first, and prints its executions and whether it found anything; new
# interesting inputs land in tests/fuzz/corpus/<target> (commit them: tests/fuzz_corpus.rs replays
# them on stable in every test run), crashes in tests/fuzz/artifacts/<target>.
#   cargo install cargo-fuzz; tests/fuzz/run.sh [target ...]
set -euo pipefail
cd "$(dirname "$0")"
seconds=${FUZZ_SECONDS:-1800}
runs=${FUZZ_RUNS:-10000000}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(protocol_line http_response config_merge frontmatter www_authenticate url_policy_expand)
status=0
for t in "${targets[@]}"; do
  log=$(mktemp)
  if cargo +nightly fuzz run --fuzz-dir . "$t" -- -max_total_time="$seconds" -runs="$runs" -timeout=5 -rss_limit_mb=2048 >"$log" 2>&1; then
    result=ok
  else
    result="FOUND SOMETHING (see tests/fuzz/artifacts/$t)"
    status=1
  fi
  done_line=$(grep -E '^#[0-9]+.*DONE' "$log" | tail -1 || true)
  echo "$t: ${done_line:-$(tail -3 "$log")} -> $result"
  [ "$result" = ok ] || tail -40 "$log"
  rm -f "$log"
done
exit $status
