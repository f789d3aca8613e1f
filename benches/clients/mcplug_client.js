// peer-bench client for mcplug over its Node binding (bindings/node).
//   node mcplug_client.js SERVER SCEN [N] [CONC] [SIZE]
// SERVER is the stdio server's command, or an http:// or https:// URL (a Streamable HTTP server).
// Prints one JSON line, as peer-bench's node/client.mjs does (see /work/shared/peer-bench/README.md).
// S3 runs CONC concurrent promises on one Client. callTool is a started call (written from the JS
// thread, settled by a completion event the event loop picks up): no threadpool hop per call.
'use strict';
const { performance } = require('node:perf_hooks');
const t0 = performance.now();
const { readFileSync } = require('node:fs');
const path = require('node:path');
const { Client } = require(path.join(__dirname, '..', '..', 'bindings', 'node'));

const [server, scen, nS, concS, sizeS] = process.argv.slice(2);
const n = Number(nS ?? 10000), conc = Number(concS ?? 64), size = Number(sizeS ?? 1 << 20);

function hwmKiB() {
  return Number(readFileSync('/proc/self/status', 'utf8').match(/VmHWM:\s+(\d+)/)[1]);
}
function cpuUs(c0) { const d = process.cpuUsage(c0); return d.user + d.system; }
function pct(sorted, p) { return sorted[Math.min(sorted.length - 1, Math.round(p / 100 * (sorted.length - 1)))]; }
function payload(size) {
  const A = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ';
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = A.charCodeAt((i * 7 + Math.floor(i / 63)) % A.length);
  return b.toString('latin1');
}
function emit(obj) { console.log(JSON.stringify({ client: 'mcplug-node', scenario: scen, ...obj })); }

async function main() {
  const entry = /^https?:\/\//.test(server) ? { type: 'http', url: server } : { command: server, args: [] };
  // MCPB_MCPLUG_OPTIONS: connect options (JSON), e.g. {"protocol_versions":["2025-11-25"]}
  const options = process.env.MCPB_MCPLUG_OPTIONS ? JSON.parse(process.env.MCPB_MCPLUG_OPTIONS) : undefined;
  const client = await Client.connect(entry, options);
  try {
    const tools = await client.listTools();
    const tList = process.env.MCPB_T0
      ? (performance.timeOrigin + performance.now()) - Number(BigInt(process.env.MCPB_T0) / 1000n) / 1e3
      : performance.now() - t0;
    if (tools.length < 2) throw new Error('tools/list: fewer than 2 tools');
    const echo = (text) => client.callTool('echo', { text });
    if (scen !== 's1') {
      for (let i = 0; i < 200; i++) {
        if ((await echo('warmup')).content[0].text !== 'warmup') throw new Error('warmup mismatch');
      }
    }
    if (scen === 's1') {
      emit({ ttl_ms: tList });
    } else if (scen === 's2') {
      const lat = new Float64Array(n);
      const cpu0 = process.cpuUsage(); // the whole process: threadpool and library threads included
      const t = performance.now();
      for (let i = 0; i < n; i++) {
        const s = `hello ${i}`;
        const c0 = performance.now();
        const r = await echo(s);
        lat[i] = performance.now() - c0;
        if (r.content[0].text !== s) throw new Error(`mismatch: ${JSON.stringify(r)}`);
      }
      const el = (performance.now() - t) / 1e3;
      const cpu = cpuUs(cpu0);
      lat.sort();
      emit({ n, p50_us: pct(lat, 50) * 1e3, p99_us: pct(lat, 99) * 1e3, calls_per_s: n / el, hwm_kib: hwmKiB(), cpu_us_per_call: cpu / n });
    } else if (scen === 's3') {
      let next = 0;
      const cpu0 = process.cpuUsage();
      const t = performance.now();
      async function worker() {
        while (next < n) {
          const i = next++;
          const s = `hello ${i}`;
          const r = await echo(s);
          if (r.content[0].text !== s) throw new Error(`mismatch: ${JSON.stringify(r)}`);
        }
      }
      await Promise.all(Array.from({ length: conc }, worker));
      const el = (performance.now() - t) / 1e3;
      emit({ n, conc, calls_per_s: n / el, cpu_us_per_call: cpuUs(cpu0) / n });
    } else if (scen === 's4') {
      const big = payload(size);
      const t = performance.now();
      for (let i = 0; i < n; i++) {
        const r = await echo(big);
        if (r.content[0].text !== big) throw new Error('mismatch');
      }
      const el = (performance.now() - t) / 1e3;
      emit({ n, size, mib_per_s: n * size / 1048576 / el, ms_per_call: el * 1e3 / n });
    } else {
      throw new Error(`unknown scenario ${scen}`);
    }
  } finally {
    await client.close();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
