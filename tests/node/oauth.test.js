'use strict';
// OAuth through the Node binding, against the fault-injecting authorization server of ours
// (tests/servers/oauth_server.py): an `auth/authorize` handler that follows the redirect
// (callback_url), one that lets the library's loopback listener take it ({}), the stored token
// reused, a declined authorization, and logout.

const h = require('./helpers');
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Client, Manager, McpError, authLogout } = h.mcplug;


const startPeer = () => h.startOauthPeer();
const get = h.httpGet;
const follow = h.followRedirect;

describe('OAuth', { timeout: 60000 }, () => {
  let peer;
  let store;
  before(async () => {
    peer = await startPeer();
    store = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-oauth-'));
  });
  after(() => {
    peer.proc.kill();
    fs.rmSync(store, { recursive: true, force: true });
  });
  const stats = async () => JSON.parse((await get(`${peer.base}/stats`)).body);
  const connect = (handlers, extra = {}) => Client.connect({ type: 'http', url: peer.url }, {
    connectTimeoutMs: 20000, handlers, options: { auth_store: store, ...extra },
  });

  test('authorizes with callback_url, then the stored token is used without asking', async () => {
    const c = await connect({ 'auth/authorize': follow });
    assert.equal((await c.callTool('whoami', {})).content[0].text, 'ok');
    await c.close();
    const c2 = await connect({});
    assert.equal((await c2.callTool('whoami', {})).content[0].text, 'ok');
    await c2.close();
    assert.equal((await stats()).counts.authorize, 1);
  });

  test('logout forgets it: the next connect needs authorization, and the loopback listener takes it', async () => {
    assert.deepEqual(await authLogout({ type: 'http', url: peer.url }, { authStore: store }), { forgotten: true });
    const err = await connect({}).then(() => null, (e) => e);
    assert.ok(err instanceof McpError && err.kind === 'needs_auth', String(err));
    assert.equal(err.data.reason, 'no_token');
    const c = await connect({
      // A browser: the redirect goes to the library's own listener; the handler answers {}.
      'auth/authorize': async (params) => {
        const loc = (await get(params.url)).headers.location;
        assert.ok(loc.startsWith(params.redirect_uri));
        setTimeout(() => get(loc).catch(() => {}), 50);
      },
    }, { auth_cache_ttl_ms: 0 });
    assert.equal((await c.callTool('whoami', {})).content[0].text, 'ok');
    await c.close();
    assert.equal((await stats()).counts.authorize, 2);
  });

  test('a handler that throws declines: needs_auth, reason declined', async () => {
    await authLogout({ type: 'http', url: peer.url }, { authStore: store });
    const err = await connect({ 'auth/authorize': async () => { throw new Error('the user said no'); } })
      .then(() => null, (e) => e);
    assert.ok(err instanceof McpError && err.kind === 'needs_auth', String(err));
    assert.equal(err.data.reason, 'declined');
    assert.match(err.message, /the user said no/);
  });
});

describe('OAuth in the manager', { timeout: 60000 }, () => {
  let peer;
  let store;
  let m;
  before(async () => {
    peer = await startPeer();
    store = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-oauth-m-'));
  });
  after(async () => {
    if (m) await m.close();
    peer.proc.kill();
    fs.rmSync(store, { recursive: true, force: true });
  });
  const stats = async () => JSON.parse((await get(`${peer.base}/stats`)).body);
  const pool = async () => (await m.listTools()).tools.map((t) => t.name);

  test('needs-auth with the pseudo-tool; authenticate, the browser, then the real tools; logout', async () => {
    m = new Manager({ connection: { auth_store: store, connectTimeoutMs: 20000 } });
    await m.connect({ mcpServers: { srv: { type: 'http', url: peer.url } } });
    const st = (await m.wait(20000)).servers.srv;
    assert.equal(st.state, 'needs-auth');
    assert.equal(st.auth.reason, 'no_token');
    assert.deepEqual(await pool(), ['mcp__srv__authenticate']);
    assert.equal((await stats()).counts.authorize, 0, 'the manager never authorizes on its own');
    const started = await m.authenticate('srv');
    assert.equal(started.state, 'pending');
    const { url, redirect_uri: redirect } = started.authorization;
    const loc = (await get(url)).headers.location;
    assert.ok(loc.startsWith(redirect), loc);
    const [done] = await Promise.all([m.authenticate('srv', { wait: true, timeoutMs: 20000 }), get(loc)]);
    assert.equal(done.state, 'connected');
    assert.deepEqual(await pool(), ['mcp__srv__whoami']);
    assert.equal((await m.callTool('mcp__srv__whoami', {})).content[0].text, 'ok');
    // The pseudo-tool, and a host-captured callback.
    const out = await m.logout('srv');
    assert.equal(out.forgotten, true);
    assert.equal(out.state, 'needs-auth');
    const text = (await m.callTool('mcp__srv__authenticate', {})).content[0].text;
    const url2 = text.split(/\s+/).find((w) => w.startsWith('http://') && w.includes('/authorize'));
    const loc2 = (await get(url2)).headers.location;
    const done2 = await m.authenticate('srv', { callbackUrl: loc2 });
    assert.equal(done2.state, 'connected');
    assert.equal((await stats()).counts.authorize, 2);
    await assert.rejects(m.authenticate('srv', { wait: 'yes' }), (e) => e instanceof McpError && e.kind === 'invalid_argument');
    // A 401 after connect (every token revoked, the refresh refused): needs-auth again, with
    // the pseudo-tool; after authenticate the real tools return.
    await new Promise((resolve, reject) => {
      const req = require('http').request(`${peer.base}/admin/revoke-refresh`, { method: 'POST' }, (res) => { res.resume(); res.on('end', resolve); });
      req.on('error', reject);
      req.end();
    });
    await assert.rejects(m.callTool('mcp__srv__whoami', {}), (e) => e instanceof McpError && e.kind === 'needs_auth');
    assert.equal((await m.status()).servers.srv.state, 'needs-auth');
    assert.deepEqual(await pool(), ['mcp__srv__authenticate']);
    const again = await m.authenticate('srv');
    const loc3 = (await get(again.authorization.url)).headers.location;
    const done3 = await m.authenticate('srv', { callbackUrl: loc3 });
    assert.equal(done3.state, 'connected');
    assert.equal((await m.callTool('mcp__srv__whoami', {})).content[0].text, 'ok');
  });
});
