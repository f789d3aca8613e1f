#!/usr/bin/env bash
# Installs what the tests need into folders of this checkout (nothing global), idempotently:
#   .deps/npm          @modelcontextprotocol/server-everything (the reference server), typescript,
#                      server-filesystem and server-memory (more independent servers)
#   .deps/venv         pytest, the Python SDK mcp 2.3 (a 2026-07-28 server for the tests) and mypy
#   bindings/node/node_modules   koffi, the Node binding's one dependency
#   .deps/node22       Node 22 (npm package node@22): the conformance suite needs it
#   .deps/conformance  @modelcontextprotocol/conformance 0.1.16 and 0.2.0-alpha.12
# and, from Debian's packages (apt-get, as root), what the company-network tests start: nginx
# (TLS in front of the test servers), tinyproxy (a forward proxy) and openssl (their certificates).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if ! cmp -s tests/deps/package.json .deps/npm/package.json \
    || [ ! -f .deps/npm/node_modules/@modelcontextprotocol/server-everything/package.json ]; then
  echo "installing the npm test peers into .deps/npm ..." >&2
  mkdir -p .deps/npm
  cp tests/deps/package.json .deps/npm/package.json
  (cd .deps/npm && npm install --no-audit --no-fund --loglevel=error >&2)
fi

missing=()
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null || missing+=(nginx-light)
[ -x /usr/bin/tinyproxy ] || command -v tinyproxy >/dev/null || missing+=(tinyproxy)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${missing[*]} (Debian packages) ..." >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    # Packaged services are started by their install; the tests start their own.
    for s in nginx tinyproxy; do
      command -v systemctl >/dev/null && systemctl stop "$s" >/dev/null 2>&1 || true
      pkill -x "$s" >/dev/null 2>&1 || true
    done
  else
    echo "install-deps: the network tests need ${missing[*]}: sudo apt-get install ${missing[*]}" >&2
  fi
fi

if [ ! -f bindings/node/node_modules/koffi/package.json ]; then
  echo "installing koffi into bindings/node ..." >&2
  (cd bindings/node && npm install --no-audit --no-fund --loglevel=error >&2)
fi

# Each folder gets its own package.json first: without one npm installs into whichever parent
# folder has one. node@22's preinstall runs only because that package.json allows it (npm 11).
npm_folder() { # <folder under .deps> <package that proves it is installed>
  if ! cmp -s "tests/deps/$1/package.json" ".deps/$1/package.json" \
      || [ ! -f ".deps/$1/node_modules/$2/package.json" ]; then
    echo "installing .deps/$1 ..." >&2
    mkdir -p ".deps/$1"
    cp "tests/deps/$1/package.json" ".deps/$1/package.json"
    (cd ".deps/$1" && PATH="$root/.deps/node22/node_modules/node/bin:$PATH" \
      npm install --no-audit --no-fund --loglevel=error >&2)
  fi
}
npm_folder node22 node
if ! .deps/node22/node_modules/node/bin/node --version >/dev/null 2>&1; then
  echo "install-deps: .deps/node22 has no working node binary (node@22's install script did not run?)" >&2
  exit 1
fi
npm_folder conformance conformance-0.1.16
npm_folder conformance conformance-0.2.0-alpha.12

if ! .deps/venv/bin/python -c 'import pytest, mcp, mypy' 2>/dev/null; then
  echo "creating .deps/venv with pytest, mcp and mypy ..." >&2
  python3 -m venv .deps/venv
  .deps/venv/bin/pip install -q --disable-pip-version-check -r tests/deps/requirements.txt >&2
fi
echo "test dependencies are in $root/.deps and $root/bindings/node/node_modules" >&2
