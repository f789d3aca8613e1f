'use strict';
// Cross-App Access (`oauth.xaa: true`) through the Node manager, against the test IdP of the
// project's own (tests/servers/xaa_server.py: an IdP, an authorization server, two MCP servers):
// one login at the IdP unlocks both servers; `xaa: true` without `xaa_idp` is named.

const h = require('./helpers');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Manager } = h.mcplug;

function startXaaPeer() {
  const script = path.join(__dirname, '..', 'servers', 'xaa_server.py');
  return new Promise((resolve, reject) => {
    const p = spawn('python3', [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    p.stdout.once('data', (d) => {
      const m = /PORT (\d+)/.exec(String(d));
      if (!m) return reject(new Error(`xaa_server said ${d}`));
      resolve({ proc: p, base: `http://127.0.0.1:${m[1]}` });
    });
    p.once('error', reject);
  });
}

test('one IdP login unlocks two servers', { timeout: 60000 }, async () => {
  const peer = await startXaaPeer();
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-xaa-'));
  const counts = async () => JSON.parse((await h.httpGet(`${peer.base}/stats`)).body).counts;
  const oauth = { xaa: true, clientId: 'mcp-client', clientSecret: 'mcp-secret' };
  const config = { mcpServers: {
    a: { type: 'http', url: `${peer.base}/mcp/a`, oauth },
    b: { type: 'http', url: `${peer.base}/mcp/b`, oauth },
  } };
  const m = new Manager({ connection: {
    auth_store: store, connectTimeoutMs: 20000, xaa_idp: { issuer: `${peer.base}/idp`, client_id: 'idp-client' },
  } });
  const bare = new Manager({ connection: { auth_store: path.join(store, 'other'), connectTimeoutMs: 20000 } });
  try {
    await m.connect(config);
    const st = (await m.wait(20000)).servers;
    assert.equal(st.a.state, 'needs-auth');
    assert.equal(st.a.auth.idp, true);
    const started = await m.authenticate('a');
    assert.equal(started.authorization.issuer, `${peer.base}/idp`);
    const loc = (await h.httpGet(started.authorization.url)).headers.location;
    assert.equal((await m.authenticate('a', { callbackUrl: loc })).state, 'connected');
    assert.equal((await m.authenticate('b', { wait: true, timeoutMs: 20000 })).state, 'connected');
    const c = await counts();
    assert.deepEqual([c.logins, c.exchanges, c.jwt_bearer], [1, 2, 2]);
    assert.equal((await m.callTool('mcp__b__whoami', {})).content[0].text, 'b for alice');

    await bare.connect(config);
    const failed = (await bare.wait(20000)).servers.a;
    assert.equal(failed.state, 'failed');
    assert.match(failed.error.message, /xaa_idp/);
  } finally {
    await m.close();
    await bare.close();
    peer.proc.kill();
    fs.rmSync(store, { recursive: true, force: true });
  }
});
