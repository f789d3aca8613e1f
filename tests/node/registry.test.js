'use strict';
// The registry's marks (M9) through the Node manager: a registry of the tests' own
// (tests/servers/registry_server.py, the official `/v0.1/servers` format, paged by cursor) knows
// server-everything over Streamable HTTP by its URL and a stdio server by its npm package.

const h = require('./helpers');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');
const readline = require('readline');

const { Manager } = h.mcplug;
const SERVER = path.join(__dirname, '..', 'servers', 'registry_server.py');
const OFFICIAL = 'io.modelcontextprotocol.registry/official';

function item(name, server, meta = {}) {
  return {
    server: { name, description: name, version: '1.0.0', ...server },
    _meta: { [OFFICIAL]: { status: 'active', updatedAt: '2026-01-01T00:00:00Z', isLatest: true, ...meta } },
  };
}

async function registry(dir, items) {
  const entries = path.join(dir, 'entries.json');
  fs.writeFileSync(entries, JSON.stringify(items));
  const port = await h.freePort();
  const child = spawn('python3', [SERVER, String(port), entries], { stdio: ['ignore', 'pipe', 'ignore'] });
  const line = await new Promise((resolve) => readline.createInterface({ input: child.stdout }).once('line', resolve));
  assert.match(line, /^listening/);
  const requests = () => fs.readFileSync(`${entries}.log`, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  return { url: `http://127.0.0.1:${port}`, requests, close: () => child.kill('SIGKILL') };
}

test('a registry marks the servers it knows, in the status and the pool', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-registry-'));
  const saved = { xdg: process.env.XDG_CACHE_HOME, off: process.env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC };
  process.env.XDG_CACHE_HOME = path.join(dir, 'cache');
  delete process.env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC;
  const ev = await h.everythingHttp();
  const reg = await registry(dir, [
    item('io.test/filler', {}),
    item('io.test/everything', { remotes: [{ type: 'streamable-http', url: `${ev.url}/` }] }),
    item('io.test/old', { packages: [{ registryType: 'npm', identifier: '@acme/old', transport: { type: 'stdio' } }] },
      { status: 'deprecated', statusMessage: 'use io.test/new' }),
  ]);
  const m = new Manager({ registry: reg.url, disabled: ['old'] });
  try {
    assert.equal((await m.status()).registry.state, 'idle');
    await m.connect({ mcpServers: {
      ev: { type: 'http', url: ev.url },
      old: { command: 'npx', args: ['-y', '@acme/old@2'] },
    } });
    await m.wait(30000);
    await h.waitFor(async () => (await m.status()).registry.state !== 'loading', 30000, 'the registry fetch');
    const status = await m.status();
    assert.equal(status.registry.state, 'ready');
    assert.deepEqual(status.servers.ev.registry, { name: 'io.test/everything', status: 'active', match: 'url', version: '1.0.0' });
    assert.deepEqual(status.servers.old.registry,
      { name: 'io.test/old', status: 'deprecated', match: 'package', version: '1.0.0', statusMessage: 'use io.test/new' });
    const tools = (await m.listTools()).tools.filter((t) => t.server === 'ev');
    assert.ok(tools.length > 0 && tools.every((t) => t.registry.name === 'io.test/everything'));
    assert.deepEqual(reg.requests().map((r) => r.cursor), [undefined, '2']);
  } finally {
    await m.close();
    reg.close();
    await ev.close();
    if (saved.xdg === undefined) delete process.env.XDG_CACHE_HOME; else process.env.XDG_CACHE_HOME = saved.xdg;
    if (saved.off !== undefined) process.env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = saved.off;
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a bad registry option is refused naming it', () => {
  assert.throws(() => new Manager({ registry: 'ftp://x' }), (e) => e.kind === 'invalid_argument' && /registry/.test(e.message));
});
