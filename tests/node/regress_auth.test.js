'use strict';
// Issue 32, items 1-4, through the Node binding, against tests/servers/oauth_server.py: a login
// slower than the server/discover probe, tokens of 60 s, 299 s and an absurd lifetime, the
// loopback listener crowded by idle connections and a forged callback, a token answer that
// trickles.

const h = require('./helpers');
const { test, describe, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { Client, McpError } = h.mcplug;

const peers = [];
const stores = [];

async function startPeer(...flags) {
  const peer = await h.startOauthPeer(...flags);
  peers.push(peer.proc);
  return peer;
}

const get = h.httpGet;
const follow = h.followRedirect;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function connect(peer, handlers, extra = {}) {
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-regress-auth-'));
  stores.push(store);
  return Client.connect({ type: 'http', url: peer.url, name: 'srv' }, {
    connectTimeoutMs: 20000, handlers, options: { auth_store: store, ...extra },
  });
}

describe('issue 32: a slow human, a hostile or slow authorization server', { timeout: 90000 }, () => {
  after(() => {
    for (const p of peers) p.kill();
    for (const s of stores) fs.rmSync(s, { recursive: true, force: true });
  });

  test('a login slower than the probe still finds the 2026-07-28 era, asking once', async () => {
    const peer = await startPeer('--era', 'modern');
    let asked = 0;
    const c = await connect(peer, {
      'auth/authorize': async (params) => { asked += 1; await sleep(6500); return follow(params); },
    });
    assert.equal(c.protocolVersion, '2026-07-28');
    assert.equal((await c.callTool('whoami', {})).content[0].text, 'ok');
    await c.close();
    assert.equal(asked, 1);
  });

  for (const lifetime of ['60', '299', '18446744073709551615']) {
    test(`a token that lives ${lifetime} s is sent`, async () => {
      const peer = await startPeer('--expires-in', lifetime);
      const c = await connect(peer, { 'auth/authorize': follow });
      for (let i = 0; i < 3; i++) assert.equal((await c.callTool('whoami', {})).content[0].text, 'ok');
      await c.close();
      const s = JSON.parse((await get(`${peer.base}/stats`)).body);
      assert.equal(s.counts.authorize, 1);
      assert.equal(s.counts.refresh, 0);
    });
  }

  test('idle connections and a forged callback delay nothing; the forged one gets 400', async () => {
    const peer = await startPeer();
    const idle = [];
    let forged;
    const started = Date.now();
    const c = await connect(peer, {
      'auth/authorize': async (params) => {
        const port = Number(new URL(params.redirect_uri).port);
        for (let i = 0; i < 8; i++) idle.push(net.connect(port, '127.0.0.1'));
        const loc = (await get(params.url)).headers.location;
        setTimeout(async () => {
          forged = await get(`${params.redirect_uri}?code=evil&state=forged`);
          await get(loc);
        }, 100);
      },
    });
    for (const s of idle) s.destroy();
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
    assert.equal(forged.status, 400);
    assert.match(forged.body, /does not belong/);
    assert.equal((await c.callTool('whoami', {})).content[0].text, 'ok');
    await c.close();
  });

  test('a trickling token answer is a timeout, asking once', async () => {
    const peer = await startPeer('--token-trickle', '30');
    let asked = 0;
    const err = await connect(peer, {
      'auth/authorize': async (params) => { asked += 1; return follow(params); },
    }, { auth_request_timeout_ms: 2000 }).then(() => null, (e) => e);
    assert.ok(err instanceof McpError && err.kind === 'needs_auth', String(err));
    assert.equal(err.data.reason, 'timeout');
    assert.doesNotMatch(err.message, /refused/);
    assert.equal(asked, 1);
  });
});
