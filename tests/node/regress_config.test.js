'use strict';
// Issue 32's regressions of the credential store and the listing options, through the Node
// binding: a token record the store cannot use (the connect says to log out instead of asking
// the user to log in for a token it cannot keep; logout removes it, not what a link leads to),
// and unknown listing keys.

const h = require('./helpers');
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { spawn, execFileSync } = require('node:child_process');
const { Client, Manager, McpError, authLogout } = h.mcplug;
const { mnative } = require(path.join(__dirname, '..', '..', 'bindings', 'node', 'lib', 'native.js'));

const SERVER = path.join(__dirname, '..', 'servers', 'oauth_server.py');

function startPeer() {
  return new Promise((resolve, reject) => {
    const p = spawn('python3', [SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
    p.stdout.once('data', (d) => {
      const m = /PORT (\d+)/.exec(String(d));
      if (!m) return reject(new Error(`oauth_server said ${d}`));
      resolve({ proc: p, url: `http://127.0.0.1:${m[1]}/mcp` });
    });
    p.once('error', reject);
  });
}

function get(url) {
  return new Promise((resolve, reject) => {
    http.get(url, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers }));
    }).on('error', reject);
  });
}

/** The store's file of the server at `url`: the first 32 hex digits of SHA-256 of its key. */
function recordOf(store, url) {
  const stem = crypto.createHash('sha256').update(`server ${url}`).digest('hex').slice(0, 32);
  return path.join(store, `${stem}.json`);
}

function exists(p) {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

function plant(kind, record, outside) {
  fs.rmSync(record, { recursive: true, force: true });
  if (kind === 'not JSON') fs.writeFileSync(record, '{"key": "server ', { mode: 0o600 });
  else if (kind === 'not an object') fs.writeFileSync(record, '[1, 2]', { mode: 0o600 });
  else if (kind === 'a FIFO') execFileSync('mkfifo', ['-m', '600', record]);
  else if (kind === 'a symlink') {
    fs.writeFileSync(outside, '{"key": "elsewhere", "record": {}}', { mode: 0o600 });
    fs.symlinkSync(outside, record);
  } else if (kind === 'a directory') {
    fs.mkdirSync(record);
    fs.writeFileSync(path.join(record, 'inside'), 'x');
  }
}

describe('an unusable token record', { timeout: 120000 }, () => {
  let peer;
  let dir;
  before(async () => {
    peer = await startPeer();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-regress-'));
  });
  after(() => {
    peer.proc.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const kind of ['not JSON', 'not an object', 'a FIFO', 'a symlink', 'a directory']) {
    test(`${kind}: the connect names logout without asking the user, and logout removes it`, async () => {
      const store = path.join(dir, kind.replace(/ /g, '-'));
      const entry = { type: 'http', url: peer.url, name: 'srv' };
      let asked = 0;
      const connect = () => Client.connect(entry, {
        connectTimeoutMs: 20000,
        options: { auth_store: store },
        handlers: {
          'auth/authorize': async (params) => {
            asked += 1;
            return { callback_url: (await get(params.url)).headers.location };
          },
        },
      });
      let c = await connect();
      assert.equal((await c.callTool('whoami', {})).content[0].text, 'ok');
      await c.close();
      assert.equal(asked, 1);
      const record = recordOf(store, peer.url);
      assert.ok(fs.statSync(record).isFile());

      const outside = path.join(dir, `outside-${kind.replace(/ /g, '-')}.json`);
      plant(kind, record, outside);
      const err = await connect().then(() => null, (e) => e);
      assert.ok(err instanceof McpError && err.kind === 'config', String(err));
      for (const way of ['mcplug logout srv', 'mcplug_auth_logout', 'authLogout', 'manager.logout("srv")']) {
        assert.ok(err.message.includes(way), `${way} not in: ${err.message}`);
      }
      assert.equal(asked, 1, 'the user was asked to log in for a token that could not be kept');

      assert.deepEqual(await authLogout(entry, { authStore: store }), { forgotten: true });
      assert.equal(exists(record), false);
      if (kind === 'a symlink') assert.ok(fs.statSync(outside).isFile(), 'logout followed the link');
      assert.deepEqual(await authLogout(entry, { authStore: store }), { forgotten: false });

      c = await connect();
      assert.equal((await c.callTool('whoami', {})).content[0].text, 'ok');
      await c.close();
      assert.equal(asked, 2);
    });
  }

  test("the manager's server fails naming logout, and the manager's logout removes it", async () => {
    const store = path.join(dir, 'manager');
    fs.mkdirSync(store, { mode: 0o700 });
    const record = recordOf(store, peer.url);
    plant('not JSON', record, null);
    const m = new Manager({ connection: { auth_store: store, connect_timeout_ms: 20000 } });
    try {
      await m.connect({ mcpServers: { srv: { type: 'http', url: peer.url } } });
      const st = (await m.wait({ timeoutMs: 20000 })).servers.srv;
      assert.equal(st.state, 'failed', JSON.stringify(st));
      assert.ok(st.error.message.includes('mcplug logout srv'), JSON.stringify(st));
      const out = await m.logout('srv');
      assert.equal(out.forgotten, true, JSON.stringify(out));
      assert.equal(out.state, 'needs-auth', JSON.stringify(out));
    } finally {
      await m.close();
    }
  });
});

describe('listing options', () => {
  test('an unknown key is invalid_argument naming it, at list_tools and search_tools', async () => {
    // The binding's methods build their options; a host's own JSON reaches the C call beneath.
    const m = new Manager();
    try {
      for (const [fn, args] of [[mnative.list_tools, []], [mnative.search_tools, ['echo']]]) {
        let err = null;
        try {
          m._sync(fn, [...args, '{"sever": "x"}']);
        } catch (e) {
          err = e;
        }
        assert.ok(err instanceof McpError && err.kind === 'invalid_argument', String(err));
        assert.ok(err.message.includes('unknown option `sever`') && err.message.includes('server'), err.message);
      }
    } finally {
      await m.close();
    }
  });
});

// connect() calls not awaited apply in the order they were made: the control lane runs several
// native calls at once, and a configuration (or a host server's connect) once overtook a later
// one, leaving the manager on the earlier configuration.
test('configurations given without awaiting apply in call order; the last one stays', async () => {
  const m = new h.mcplug.Manager();
  try {
    const names = [];
    const calls = [];
    for (let i = 0; i < 12; i++) {
      const name = `s${i}`;
      names.push(name);
      calls.push(m.connect({ mcpServers: { [name]: { command: 'mcplug-no-such-command', args: [String(i)] } } }));
    }
    calls.push(m.addHostServer('host', [{ name: 'ping', handler: () => 'pong' }]));
    await Promise.all(calls);
    assert.deepStrictEqual(Object.keys((await m.status()).servers).sort(), ['host', 's11']);
  } finally {
    await m.close();
  }
});
