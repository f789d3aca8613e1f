// Median latency of one `echo` tool call through the Node binding.
//   node benches/echo_latency.js N command args...
// Prints {"client":"node","n":N,"p50_us":...,"p99_us":...}. Used by benches/echo_latency.sh.
const { Client } = require('../bindings/node');

async function main() {
  const [nS, command, ...args] = process.argv.slice(2);
  const n = Number(nS);
  const c = await Client.connect({ command, args });
  try {
    const lat = [];
    for (let i = -Math.floor(n / 10); i < n; i++) {
      const t0 = process.hrtime.bigint();
      const r = await c.callTool('echo', { message: 'hello' });
      const t1 = process.hrtime.bigint();
      if (r.content[0].text !== 'Echo: hello') throw new Error(JSON.stringify(r));
      if (i >= 0) lat.push(Number(t1 - t0) / 1e3);
    }
    lat.sort((a, b) => a - b);
    const r1 = (x) => Math.round(x * 10) / 10;
    console.log(JSON.stringify({ client: 'node', n, p50_us: r1(lat[n >> 1]), p99_us: r1(lat[Math.floor(n * 99 / 100)]) }));
  } finally {
    await c.close();
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
