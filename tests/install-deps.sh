#!/usr/bin/env bash
# Installs what the tests need into folders of this checkout (nothing global), idempotently:
#   .deps/npm          @modelcontextprotocol/server-everything (the reference server)
#   .deps/venv         pytest and the Python SDK mcp 2.3 (a 2026-07-28 server for the tests)
#   bindings/node/node_modules   koffi, the Node binding's one dependency
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [ ! -f .deps/npm/node_modules/@modelcontextprotocol/server-everything/package.json ]; then
  echo "installing the npm test peers into .deps/npm ..." >&2
  mkdir -p .deps/npm
  cp tests/deps/package.json .deps/npm/package.json
  (cd .deps/npm && npm install --no-audit --no-fund --loglevel=error >&2)
fi

if [ ! -f bindings/node/node_modules/koffi/package.json ]; then
  echo "installing koffi into bindings/node ..." >&2
  (cd bindings/node && npm install --no-audit --no-fund --loglevel=error >&2)
fi

if ! .deps/venv/bin/python -c 'import pytest, mcp' 2>/dev/null; then
  echo "creating .deps/venv with pytest and mcp ..." >&2
  python3 -m venv .deps/venv
  .deps/venv/bin/pip install -q --disable-pip-version-check -r tests/deps/requirements.txt >&2
fi
echo "test dependencies are in $root/.deps and $root/bindings/node/node_modules" >&2
