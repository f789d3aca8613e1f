'use strict';
// Bad input and broken servers, through the Node binding: each gets a clear McpError of the right
// kind, within a bound, and loses nothing (the handle stays usable where it can).

const h = require('./helpers');
const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const { Client, McpError } = h.mcplug;

async function rejection(promise) {
  const o = await h.outcome(promise);
  assert.ok(!o.ok, `expected a rejection, got ${JSON.stringify(o.value)}`);
  assert.ok(o.error instanceof McpError, `expected an McpError, got ${o.error && o.error.stack}`);
  o.error.ms = o.ms;
  return o.error;
}

describe('connect failures', { timeout: 30000 }, () => {
  test('a command that does not exist: transport, naming the command', async () => {
    const err = await rejection(Client.connect({ command: 'mcplug-no-such-command-xyz', args: [] }, { connectTimeoutMs: 5000 }));
    assert.equal(err.kind, 'transport');
    assert.equal(err.status, h.mcplug.Status.TRANSPORT);
    assert.match(err.message, /mcplug-no-such-command-xyz/);
  });

  test('a server that exits at once: closed, with its exit code and stderr', async () => {
    const err = await rejection(Client.connect(h.faultServer('exit-now'), { connectTimeoutMs: 10000 }));
    assert.equal(err.kind, 'closed');
    assert.match(err.message, /exit code 3/);
    assert.match(err.message, /fatal: exiting at once/);
    assert.ok(err.ms < 5000, `took ${err.ms} ms`);
  });

  test('a server that prints garbage and exits: closed', async () => {
    const err = await rejection(Client.connect(h.faultServer('garbage-exit'), { connectTimeoutMs: 10000 }));
    assert.equal(err.kind, 'closed');
    assert.match(err.message, /exit code 1/);
  });

  test('a server that never answers initialize: timeout, and no process left', async () => {
    const pidfile = h.tmpFile('hang.pid');
    const err = await rejection(Client.connect(h.faultServer('hang-init', { pidfile }), { connectTimeoutMs: 500 }));
    assert.equal(err.kind, 'timeout');
    assert.match(err.message, /500 ms/);
    assert.ok(err.ms >= 450 && err.ms < 5000, `took ${err.ms} ms`);
    const pid = h.readPid(pidfile);
    assert.ok(pid, 'the server wrote its pid');
    assert.equal(h.pidExists(pid), false, `server ${pid} still exists after the failed connect`);
  });

  test('invalid server entries and options are invalid_argument', async () => {
    let err = await rejection(Client.connect({ args: ['x'] }));
    assert.equal(err.kind, 'invalid_argument');
    err = await rejection(Client.connect(h.faultServer(), { connectTimeoutMs: 0 }));
    assert.equal(err.kind, 'invalid_argument');
    assert.match(err.message, /connectTimeoutMs/);
    err = await rejection(Client.connect(h.faultServer(), { options: { connect_timeout_ms: -5 } }));
    assert.equal(err.kind, 'invalid_argument');
    err = await rejection(Client.connect({ type: 'http', url: 'http://127.0.0.1:9/mcp' }));
    assert.equal(err.kind, 'transport');
    assert.match(err.message, /http:\/\/127\.0\.0\.1:9\/mcp/);
    // An in-process server is served by the host through a Manager, never by a Client.
    err = await rejection(Client.connect({ type: 'sdk', name: 'x' }));
    assert.equal(err.kind, 'invalid_argument');
    assert.match(err.message, /manager/);
  });

  test('connect aborted by an AbortSignal: cancelled, and no process left', async () => {
    const pidfile = h.tmpFile('abort.pid');
    const ac = new AbortController();
    const pending = Client.connect(h.faultServer('hang-init', { pidfile }), { connectTimeoutMs: 20000, signal: ac.signal });
    await h.waitFor(() => h.readPid(pidfile), 5000, 'the server to start');
    ac.abort();
    const err = await rejection(h.within(5000, pending, 'the aborted connect'));
    assert.equal(err.kind, 'cancelled');
    assert.equal(h.pidExists(h.readPid(pidfile)), false);
  });
});

describe('a running connection', { timeout: 30000 }, () => {
  test('garbage on stdout: invalid_message events, and the connection still works', async (t) => {
    const client = await h.connect(t, h.faultServer('garbage'), { connectTimeoutMs: 10000 });
    const invalid = [];
    client.on('invalidMessage', (m) => invalid.push(m));
    assert.equal(client.instructions, 'mode garbage');
    assert.equal(h.textOf(await client.callTool('echo', { message: 'fine' })), 'Echo: fine');
    await h.waitFor(() => invalid.length >= 3, 5000, 'three invalidMessage events');
    assert.deepEqual(invalid.map((m) => m.line), ['this is not json', '{broken', 'Server starting on stdout, sorry']);
    assert.ok(invalid.every((m) => /not valid JSON/.test(m.error)));
  });

  test('an unknown tool on the fault server is an rpc McpError with code -32602', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const err = await rejection(client.callTool('no-such-tool', {}));
    assert.equal(err.kind, 'rpc');
    assert.equal(err.code, -32602);
    assert.match(err.message, /Unknown tool: no-such-tool/);
    assert.equal(h.textOf(await client.callTool('echo', { message: 'ok' })), 'Echo: ok');
  });

  test('arguments that are not JSON-serialisable: invalid_argument before any native call', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    let err = await rejection(client.callTool('echo', { message: 10n }));
    assert.equal(err.kind, 'invalid_argument');
    assert.match(err.message, /BigInt/);
    const cyclic = { message: 'x' };
    cyclic.self = cyclic;
    err = await rejection(client.callTool('echo', cyclic));
    assert.equal(err.kind, 'invalid_argument');
    assert.match(err.message, /circular/i);
    err = await rejection(client.callTool('echo', [1, 2]));
    assert.equal(err.kind, 'invalid_argument');
    err = await rejection(client.request('resources/read', { uri: 1n }));
    assert.equal(err.kind, 'invalid_argument');
    err = await rejection(client.callTool(42, {}));
    assert.equal(err.kind, 'invalid_argument');
    err = await rejection(client.callTool('echo', { message: 'x' }, { timeoutMs: -1 }));
    assert.equal(err.kind, 'invalid_argument');
    assert.equal(h.textOf(await client.callTool('echo', { message: 'intact' })), 'Echo: intact');
  });

  test('a lone UTF-16 surrogate (not valid UTF-8) is refused clearly; paired ones round-trip', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const err = await rejection(client.callTool('echo', { message: 'a\ud800b' }));
    assert.equal(err.kind, 'invalid_argument');
    assert.match(err.message, /lone UTF-16 surrogate at \.message/);
    const nested = await rejection(client.callTool('echo', { message: 'ok', list: ['fine', 'bad\udfff'] }));
    assert.match(nested.message, /\.list\[1\]/);
    const name = await rejection(client.callTool('ech\ud800o', {}));
    assert.equal(name.kind, 'invalid_argument');
    // A literal backslash-u text is not a surrogate.
    assert.equal(h.textOf(await client.callTool('echo', { message: '\\ud800 literally' })), 'Echo: \\ud800 literally');
    assert.equal(h.textOf(await client.callTool('echo', { message: 'pair 😀 ok' })), 'Echo: pair 😀 ok');
  });

  test('a server killed during a call: the call fails within 1 s, the client ends closed', async (t) => {
    const pidfile = h.tmpFile('killed.pid');
    const client = await h.connect(t, h.faultServer('normal', { pidfile }), { connectTimeoutMs: 10000 });
    const closed = new Promise((resolve) => client.once('closed', resolve));
    const pid = h.readPid(pidfile);
    assert.ok(pid);
    const call = h.outcome(client.callTool('sleep', { ms: 20000 }));
    await h.sleep(200);
    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');
    const o = await h.within(5000, call, 'the call on the killed server');
    const elapsed = Date.now() - killedAt;
    assert.equal(o.ok, false);
    assert.ok(o.error instanceof McpError);
    assert.equal(o.error.kind, 'closed');
    assert.ok(elapsed < 1000, `the call failed ${elapsed} ms after the kill`);
    const info = await h.within(5000, closed, 'the closed event');
    assert.equal(typeof info.reason, 'string');
    // The handle is released by itself; later calls fail closed without touching it.
    await h.waitFor(() => client.state === 'closed', 5000, 'the client to be released');
    const after = await rejection(client.callTool('echo', { message: 'x' }));
    assert.equal(after.kind, 'closed');
  });

  test('a server that crashes mid-call: closed within 1 s', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const err = await rejection(h.within(5000, client.callTool('crash', {}), 'the crash call'));
    assert.equal(err.kind, 'closed');
    assert.ok(err.ms < 1000, `took ${err.ms} ms`);
  });

  test('a call timeout: kind timeout, and the connection stays usable', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const err = await rejection(client.callTool('sleep', { ms: 3000 }, { timeoutMs: 300 }));
    assert.equal(err.kind, 'timeout');
    assert.equal(err.status, h.mcplug.Status.TIMEOUT);
    assert.ok(err.ms >= 250 && err.ms < 2500, `took ${err.ms} ms`);
    assert.equal(h.textOf(await client.callTool('echo', { message: 'alive' }, { timeoutMs: 5000 })), 'Echo: alive');
    // The connection's default tool timeout applies too.
    const c2 = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000, toolTimeoutMs: 300 });
    const err2 = await rejection(c2.callTool('sleep', { ms: 3000 }));
    assert.equal(err2.kind, 'timeout');
    // ...and Infinity lifts it for one call.
    assert.equal(h.textOf(await c2.callTool('sleep', { ms: 500 }, { timeoutMs: Infinity })), 'slept');
  });

  test('cancel by AbortSignal: kind cancelled, and notifications/cancelled reaches the server', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    assert.equal(h.textOf(await client.callTool('cancelled_ids', {})), '[]');
    const ac = new AbortController();
    const call = client.callTool('sleep', { ms: 10000 }, { signal: ac.signal });
    await h.sleep(200);
    const abortedAt = Date.now();
    ac.abort();
    const err = await rejection(h.within(5000, call, 'the aborted call'));
    assert.equal(err.kind, 'cancelled');
    assert.ok(Date.now() - abortedAt < 1000, 'cancelled promptly');
    const ids = await h.waitFor(async () => {
      const list = JSON.parse(h.textOf(await client.callTool('cancelled_ids', {})));
      return list.length ? list : null;
    }, 3000, 'the server to record notifications/cancelled');
    assert.equal(ids.length, 1);
    assert.ok(typeof ids[0] === 'number' || typeof ids[0] === 'string');
    // An already aborted signal rejects at once, without a call.
    const err2 = await rejection(client.callTool('echo', { message: 'x' }, { signal: AbortSignal.abort() }));
    assert.equal(err2.kind, 'cancelled');
    assert.equal(JSON.parse(h.textOf(await client.callTool('cancelled_ids', {}))).length, 1);
  });

  test('cancel(tag) from outside the call', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const call = client.callTool('sleep', { ms: 10000 }, { tag: 'node-test-cancel-tag' });
    await h.sleep(200);
    assert.equal(h.mcplug.cancel('node-test-cancel-tag'), true);
    const err = await rejection(h.within(5000, call, 'the cancelled call'));
    assert.equal(err.kind, 'cancelled');
    assert.equal(h.mcplug.cancel('node-test-cancel-tag'), false, 'nothing left with that tag');
    const ids = await h.waitFor(async () => {
      const list = JSON.parse(h.textOf(await client.callTool('cancelled_ids', {})));
      return list.length ? list : null;
    }, 3000, 'notifications/cancelled at the server');
    assert.equal(ids.length, 1);
  });

  test('close() while calls are in flight: they fail closed, close() is bounded', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const calls = [1, 2, 3].map(() => h.outcome(client.callTool('sleep', { ms: 20000 })));
    await h.sleep(200);
    const start = Date.now();
    await h.within(5000, client.close(), 'close()');
    assert.ok(Date.now() - start < 4000);
    for (const o of await Promise.all(calls)) {
      assert.equal(o.ok, false);
      assert.equal(o.error.kind, 'closed');
    }
    assert.equal(client.state, 'closed');
    await client.close(); // a second close is a no-op
    const err = await rejection(client.listTools());
    assert.equal(err.kind, 'closed');
  });
});

describe('a server that stops reading its stdin', { timeout: 30000 }, () => {
  test('a call bigger than the pipe still times out, and close() is bounded', async () => {
    const pidfile = h.tmpFile('stop-reading.pid');
    const client = await Client.connect(h.faultServer('normal', { pidfile }), {
      connectTimeoutMs: 10000,
      options: { shutdown_grace_ms: 200 },
    });
    assert.equal(h.textOf(await client.callTool('stop_reading', {})), 'ok');
    const big = 'y'.repeat(1024 * 1024); // far more than a pipe holds
    const err = await rejection(h.within(10000, client.callTool('echo', { message: big }, { timeoutMs: 500 }), 'the blocked call'));
    assert.equal(err.kind, 'timeout');
    assert.ok(err.ms < 3000, `took ${err.ms} ms`);
    const start = Date.now();
    await h.within(10000, client.close(), 'close()');
    assert.ok(Date.now() - start < 6000, `close took ${Date.now() - start} ms`);
    assert.throws(() => process.kill(h.readPid(pidfile), 0), { code: 'ESRCH' });
  });
});
