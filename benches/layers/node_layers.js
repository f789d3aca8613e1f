// Where the Node binding's CPU per call goes: the same echo loop through ever more of the binding.
//   taskset -c 0 node benches/layers/node_layers.js SERVER [N]
// SERVER is peer-bench's mcp_server. CPU is the whole process (threadpool and library threads
// included). Reaches into the Client for its raw handle: a diagnostic, not an example of the API.
'use strict';
const path = require('path');
const binding = path.join(__dirname, '..', '..', 'bindings', 'node');
const { Client, libraryPath } = require(binding);
const koffi = require(path.join(binding, 'node_modules', 'koffi'));

const lib = koffi.load(libraryPath);
const free = lib.func('mcplug_string_free', 'void', ['void *']);
const Owned = koffi.disposable('str', (p) => free(p));
const callTool = lib.func('mcplug_client_call_tool', 'int', ['void *', 'str', 'str', 'str', koffi.out(koffi.pointer(Owned))]);
const N = Number(process.argv[3] ?? 20000);

function viaAsync(h, args, opts, out) {
  return new Promise((resolve, reject) => callTool.async(h, 'echo', args, opts, out, (e, st) => (e ? reject(e) : resolve(st))));
}

async function main() {
  const c = await Client.connect({ command: process.argv[2], args: [] });
  const h = c._handle;
  const layers = {
    'sync koffi, main thread': async () => {
      for (let i = 0; i < N; i++) {
        const out = [null];
        const s = `hello ${i}`;
        callTool(h, 'echo', JSON.stringify({ text: s }), null, out);
        if (JSON.parse(out[0]).content[0].text !== s) throw new Error('mismatch');
      }
    },
    'koffi .async': async () => {
      for (let i = 0; i < N; i++) {
        const out = [null];
        const s = `hello ${i}`;
        await viaAsync(h, JSON.stringify({ text: s }), null, out);
        if (JSON.parse(out[0]).content[0].text !== s) throw new Error('mismatch');
      }
    },
    '.async + a tag per call': async () => {
      for (let i = 0; i < N; i++) {
        const out = [null];
        const s = `hello ${i}`;
        await viaAsync(h, JSON.stringify({ text: s }), JSON.stringify({ tag: `t${i}` }), out);
        if (JSON.parse(out[0]).content[0].text !== s) throw new Error('mismatch');
      }
    },
    'Client.callTool': async () => {
      for (let i = 0; i < N; i++) {
        const s = `hello ${i}`;
        if ((await c.callTool('echo', { text: s })).content[0].text !== s) throw new Error('mismatch');
      }
    },
  };
  for (let rep = 0; rep < 2; rep++) {
    for (const [name, run] of Object.entries(layers)) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      await run();
      const d = process.cpuUsage(c0);
      console.log(`${name.padEnd(26)} CPU ${((d.user + d.system) / N).toFixed(1).padStart(5)} us/call   wall ${((performance.now() - t0) * 1e3 / N).toFixed(1).padStart(5)} us/call`);
    }
  }
  await c.close();
}
main().catch((e) => { console.error(e); process.exit(1); });
