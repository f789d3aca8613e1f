#!/usr/bin/env bash
# Runs every test of mcplug, from a fresh clone: the README's test command, and what .ci/run runs.
#   1. installs the test peers and binding dependencies into this checkout (tests/install-deps.sh)
#   2. Rust: unit tests, the C ABI tests (C programs compiled with -Werror against the library),
#      the header check, the demo (examples/demo.rs) — then the C tests again under valgrind (no
#      definite leak allowed) and built with AddressSanitizer (no memory error allowed)
#   3. the bindings' type declarations (mypy --strict, tsc --strict), then the Python binding
#      (pytest) and the Node binding (node --test), against the release library
#   4. the official conformance suite (0.1.16 and 0.2.0-alpha.12), scenario by scenario, through
#      the C, Python and Node conformance clients (tests/conformance/run.sh prints the table);
#      then its server scenarios against a conformance server of ours, directly and through
#      `mcplug serve --http` (tests/conformance/server.sh)
#   5. the Python and Node packages installed and used from outside the checkout
#      (tests/install_python.sh, tests/install_node.sh; the C install is tests/install_c.sh)
# Environment: MCPLUG_SKIP_VALGRIND=1 skips step 2's valgrind pass, MCPLUG_SKIP_ASAN=1 its ASan
# pass.
set -euo pipefail
cd "$(dirname "$0")/.."

# `stage NAME` starts a stage: prints its name, and how long the one before took (CI's budget is
# 30 minutes on 2 cores: these figures say where it goes).
stage_name="" stage_start=$SECONDS
stage() {
  [ -z "$stage_name" ] || echo "   [$stage_name: $((SECONDS - stage_start)) s; $((SECONDS / 60)) min $((SECONDS % 60)) s in all]"
  stage_name="$1" stage_start=$SECONDS
  [ -z "$1" ] || echo "== $1"
}

stage "the test peers and binding dependencies (tests/install-deps.sh)"
tests/install-deps.sh

stage "cargo build --release (the library the bindings load, and the command line)"
cargo build --release

stage "cargo test (unit tests, C ABI tests, header check; builds the examples too)"
cargo test

# The README's first command runs this demo in release mode; here the build cargo test just made
# is run (a release build of the example would cost CI another minute of LTO for no more proof).
stage "the demo (examples/demo.rs, against its bundled server)"
target/debug/examples/demo

if [ "${MCPLUG_SKIP_VALGRIND:-0}" != 1 ] && command -v valgrind >/dev/null; then
  stage "C ABI tests under valgrind"
  MCPLUG_VALGRIND=1 cargo test --test c_abi
fi

# The C tests built with AddressSanitizer (the library is not instrumented, but ASan's runtime
# watches every malloc and free of the process, the library's included).
if [ "${MCPLUG_SKIP_ASAN:-0}" != 1 ] && echo 'int main(void){return 0;}' | ${CC:-cc} -fsanitize=address -x c - -o /tmp/mcplug-asan-probe.$$ 2>/dev/null; then
  rm -f /tmp/mcplug-asan-probe.$$
  stage "C ABI tests under AddressSanitizer"
  MCPLUG_ASAN=1 cargo test --test c_abi
fi

stage "the bindings' types: mypy --strict over the Python package, tsc --strict over a Node host (tests/node/types)"
.deps/venv/bin/python -m mypy --strict bindings/python/mcplug
.deps/npm/node_modules/.bin/tsc -p tests/node/types

stage "Python binding (pytest)"
PYTHONPATH=bindings/python .deps/venv/bin/python -m pytest tests/python -q

stage "Node binding (node --test)"
node --test tests/node/

stage "conformance suite through C, Python and Node (tests/conformance/run.sh)"
tests/conformance/run.sh

stage "the suite's server scenarios: our conformance server directly and through mcplug serve (tests/conformance/server.sh)"
tests/conformance/server.sh

stage "the packages: pip install ./bindings/python and npm pack's tarball, used from outside the checkout"
tests/install_python.sh
tests/install_node.sh

stage ""
echo "== all mcplug tests passed"
