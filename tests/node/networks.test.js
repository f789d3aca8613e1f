'use strict';
// Company networks through the Node binding: server-everything (Streamable HTTP) behind nginx with
// TLS from a private CA made at test time (tests/servers/tls_front.py): refused without the CA,
// the error naming the reason and the trust consulted; connected with the entry's `tls.ca_file`
// and the connection's `tls`; through tinyproxy (a CONNECT tunnel in its log), HTTPS_PROXY with and
// without NO_PROXY naming the host, a proxy that is down, one that wants credentials; a client
// certificate (its key encrypted) where nginx requires one.

const h = require('./helpers');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const { Client, McpError } = h.mcplug;

async function tlsFront(dir, upstream) {
  const script = path.join(__dirname, '..', 'servers', 'tls_front.py');
  const child = spawn('python3', [script, dir, upstream, '--proxy'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((resolve) => readline.createInterface({ input: child.stdout }).once('line', resolve));
  const info = JSON.parse(line);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return { info, stop: async () => { child.stdin.end(); await exited; } };
}

test('TLS from a private CA and a client certificate', { timeout: 60000 }, async () => {
  const ev = await h.everythingHttp();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-tls-'));
  const front = await tlsFront(dir, new URL(ev.url).host);
  const { info } = front;
  const url = `https://localhost:${info.https_port}/mcp`;
  const echo = async (c) => (await c.callTool('echo', { message: 'tls' })).content[0].text;
  try {
    const err = await Client.connect({ type: 'http', url }, { connectTimeoutMs: 20000 }).then(() => null, (e) => e);
    assert.ok(err instanceof McpError && err.kind === 'transport', String(err));
    assert.match(err.message, /unknown issuer/);
    assert.match(err.message, /trusted: /);
    let c = await Client.connect({ type: 'http', url, tls: { ca_file: info.ca } }, { connectTimeoutMs: 20000 });
    assert.equal(await echo(c), 'Echo: tls');
    await c.close();
    c = await Client.connect({ type: 'http', url }, { connectTimeoutMs: 20000, options: { tls: { ca_file: info.ca } } });
    assert.equal(await echo(c), 'Echo: tls');
    await c.close();
    // Through the proxy: the server's own `proxy`, a CONNECT tunnel in the proxy's log.
    c = await Client.connect({ type: 'http', url, tls: { ca_file: info.ca }, proxy: `http://127.0.0.1:${info.proxy_port}` },
      { connectTimeoutMs: 20000 });
    assert.equal(await echo(c), 'Echo: tls');
    await c.close();
    assert.ok(fs.readFileSync(info.proxy_log, 'utf8').includes(`CONNECT localhost:${info.https_port}`));
    const down = await Client.connect({ type: 'http', url, tls: { ca_file: info.ca }, proxy: 'http://u:s3cret@127.0.0.1:1' },
      { connectTimeoutMs: 20000 }).then(() => null, (e) => e);
    assert.ok(down instanceof McpError && /through the proxy http:\/\/127\.0\.0\.1:1/.test(down.message), String(down));
    assert.ok(!down.message.includes('s3cret'));
    // The environment's proxy, and NO_PROXY naming the host (a dead proxy shows which way it went).
    const tls = { ca_file: info.ca };
    process.env.HTTPS_PROXY = 'http://127.0.0.1:1';
    try {
      process.env.NO_PROXY = 'localhost';
      c = await Client.connect({ type: 'http', url, tls }, { connectTimeoutMs: 20000 });
      assert.equal(await echo(c), 'Echo: tls');
      await c.close();
      process.env.NO_PROXY = 'example.com,10.0.0.0/8';
      const via = await Client.connect({ type: 'http', url, tls }, { connectTimeoutMs: 20000 }).then(() => null, (e) => e);
      assert.ok(via instanceof McpError && /through the proxy http:\/\/127\.0\.0\.1:1/.test(via.message), String(via));
    } finally {
      delete process.env.HTTPS_PROXY;
      delete process.env.NO_PROXY;
    }
    // A proxy that wants credentials: its 407 explained, wrong ones never shown, then through it.
    const guarded = (auth) => `http://${auth ? `${auth}@` : ''}127.0.0.1:${info.guarded_proxy_port}`;
    const refused = await Client.connect({ type: 'http', url, tls, proxy: guarded() }, { connectTimeoutMs: 20000 })
      .then(() => null, (e) => e);
    assert.ok(refused instanceof McpError && /407/.test(refused.message) && /credentials/.test(refused.message), String(refused));
    const wrong = await Client.connect({ type: 'http', url, tls, proxy: guarded('alice:wr0ng') }, { connectTimeoutMs: 20000 })
      .then(() => null, (e) => e);
    assert.ok(wrong instanceof McpError && !wrong.message.includes('wr0ng'), String(wrong));
    c = await Client.connect({ type: 'http', url, tls, proxy: guarded(info.guarded_proxy_auth) }, { connectTimeoutMs: 20000 });
    assert.equal(await echo(c), 'Echo: tls');
    await c.close();
    c = await Client.connect({
      type: 'http',
      url: `https://localhost:${info.mtls_port}/mcp`,
      tls: { ca_file: info.ca, client_cert: info.client_cert, client_key: info.client_key_enc, client_key_passphrase: info.passphrase },
    }, { connectTimeoutMs: 20000 });
    assert.equal(await echo(c), 'Echo: tls');
    await c.close();
  } finally {
    await front.stop();
    await ev.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
