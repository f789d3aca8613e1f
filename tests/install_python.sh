#!/usr/bin/env bash
# The Python package, as a user installs it: a new venv, `pip install ./bindings/python` (cargo
# builds the libraries; the wheel carries them stripped), then from a folder outside the checkout
# a host connects to the reference server, calls a tool with an outputSchema and gets its result
# checked against it — with the package's own libmcplug and libmcplug_schema (/proc/self/maps).
# Needs the reference server (tests/install-deps.sh puts it under .deps/).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
everything="$root/.deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
[ -f "$everything" ] || { echo "the reference server is missing: run tests/install-deps.sh" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install -q "$root/bindings/python"
"$scratch/venv/bin/pip" wheel -q --no-deps -w "$scratch/wheels" "$root/bindings/python"
ls "$scratch/wheels"
ls "$scratch/wheels" | grep -q -- '-py3-none-linux_x86_64\.whl$'
cd "$scratch"
env -u MCPLUG_LIBRARY -u MCPLUG_SCHEMA_LIBRARY "$scratch/venv/bin/python" - "$everything" <<'PY'
import os, sys
import mcplug
from mcplug import _ffi

site = os.path.dirname(os.path.realpath(mcplug.__file__))
assert _ffi.LIBRARY_PATH == os.path.join(site, "libmcplug.so"), _ffi.LIBRARY_PATH
with mcplug.Client.connect({"command": "node", "args": [sys.argv[1]]}) as c:
    tool = [t for t in c.list_tools() if t["name"] == "get-structured-content"][0]
    assert "outputSchema" in tool, tool
    result = c.call_tool("get-structured-content", {"location": "Chicago"})
    assert isinstance(result.get("structuredContent"), dict), result
    maps = open("/proc/self/maps").read()
    schema = os.path.join(site, "libmcplug_schema.so")
    assert schema in maps, "the validator library loaded is not the package's"
    print("structuredContent:", result["structuredContent"])
    print("libraries:", _ffi.LIBRARY_PATH, "and", schema)
PY
echo "Python install: ok"
