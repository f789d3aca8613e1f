#!/usr/bin/env bash
# The Node package, as a user installs it: `npm pack` in bindings/node (cargo builds the
# libraries; the tarball carries them stripped), the tarball installed into an empty folder, and
# from there, with no environment variable, a host connects to the reference server, calls a tool
# with an outputSchema and gets its result checked against it — with the package's own libmcplug
# and libmcplug_schema (/proc/self/maps). Needs npm's registry for koffi, and the reference server
# (tests/install-deps.sh puts it under .deps/).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
everything="$root/.deps/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
[ -f "$everything" ] || { echo "the reference server is missing: run tests/install-deps.sh" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd bindings/node && npm pack --silent --pack-destination "$scratch" >/dev/null)
tarball=$(ls "$scratch"/mcplug-*.tgz)
listing=$(tar -tzf "$tarball" | sort)
echo "$listing"
for f in package/libmcplug.so package/libmcplug_schema.so package/index.js package/index.d.ts package/lib/client.js package/lib/handle.js; do
  grep -qx "$f" <<<"$listing" || { echo "the tarball lacks $f" >&2; exit 1; }
done
if [ -e bindings/node/libmcplug.so ]; then
  echo "npm pack left its copy of libmcplug.so in bindings/node" >&2; exit 1
fi
mkdir "$scratch/host"
cd "$scratch/host"
npm init -y >/dev/null
npm install --silent --no-audit --no-fund "$tarball"
env -u MCPLUG_LIBRARY -u MCPLUG_SCHEMA_LIBRARY node - "$everything" <<'JS'
const fs = require('node:fs');
const path = require('node:path');
const mcplug = require('mcplug');
const pkg = path.dirname(require.resolve('mcplug'));
if (mcplug.libraryPath !== path.join(pkg, 'libmcplug.so')) throw new Error(`loaded ${mcplug.libraryPath}`);
(async () => {
  const c = await mcplug.Client.connect({ command: 'node', args: [process.argv[2]] });
  try {
    const tools = await c.listTools();
    const tool = tools.find((t) => t.name === 'get-structured-content');
    if (!tool || !tool.outputSchema) throw new Error('no get-structured-content with an outputSchema');
    const result = await c.callTool('get-structured-content', { location: 'Chicago' });
    if (typeof result.structuredContent !== 'object') throw new Error(JSON.stringify(result));
    const schema = path.join(pkg, 'libmcplug_schema.so');
    if (!fs.readFileSync('/proc/self/maps', 'utf8').includes(schema)) throw new Error('the validator library is not the package\'s');
    console.log('structuredContent:', JSON.stringify(result.structuredContent));
    console.log('libraries:', mcplug.libraryPath, 'and', schema);
  } finally {
    await c.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
JS
echo "Node install: ok"
