'use strict';
// Started calls: callTool/request are written from the JS thread and settled by completion events
// that the client takes from its event descriptor. Many at once, cancellation of a call in flight
// (and of one still waiting to be written), timeouts timed by the library, close() with calls in
// flight, and a process that exits by itself once its client is closed or its server gone.

const h = require('./helpers');
const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const { spawn } = require('child_process');

/** The request ids the fault server saw in notifications/cancelled. */
async function cancelledIds(client) {
  return JSON.parse(h.textOf(await client.callTool('cancelled_ids', {})));
}

/** Runs a node script with MCPLUG set; resolves {code, signal, stdout, stderr, ms}. */
function runScript(source, { env = {}, killAfterMs = 20000 } = {}) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const child = spawn(process.execPath, ['-e', source], {
      env: { ...process.env, MCPLUG: path.join(h.ROOT, 'bindings', 'node'), FAULT_SERVER: h.FAULT_SERVER, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const guard = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - start });
    });
  });
}

describe('started calls', { timeout: 90000 }, () => {
  test('500 concurrent callTool on server-everything: each gets its own answer', async (t) => {
    const client = await h.connect(t, h.everythingServer(), { connectTimeoutMs: 15000 });
    const n = 500;
    const calls = Array.from({ length: n }, (_, i) => client.callTool('echo', { message: `everything-${i}` }));
    // A blocking call (listTools, on the threadpool) and requests in the middle of them.
    const tools = client.listTools();
    const pings = Array.from({ length: 10 }, () => client.request('ping'));
    const results = await h.within(45000, Promise.all(calls), '500 calls');
    results.forEach((r, i) => assert.equal(h.textOf(r), `Echo: everything-${i}`));
    assert.ok((await tools).some((x) => x.name === 'echo'));
    for (const p of await Promise.all(pings)) assert.deepEqual(p, {});
    // Calls made one at a time after the burst still work (each is written at once).
    for (let i = 0; i < 20; i++) assert.equal(h.textOf(await client.callTool('echo', { message: `seq-${i}` })), `Echo: seq-${i}`);
  });

  test('AbortSignal on a call in flight: cancelled, and the server got notifications/cancelled', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    assert.deepEqual(await cancelledIds(client), []);
    const ac = new AbortController();
    // No tag, no timeout: the library's direct way (no task).
    const call = h.outcome(client.callTool('sleep', { ms: 10000 }, { signal: ac.signal }));
    await h.sleep(200);
    ac.abort();
    const o = await h.within(3000, call, 'the aborted call');
    assert.equal(o.ok, false);
    assert.equal(o.error.kind, 'cancelled');
    assert.equal(o.error.status, h.mcplug.Status.CANCELLED);
    assert.match(o.error.message, /tools\/call sleep was cancelled/);
    assert.ok(o.ms < 1500, `settled ${o.ms} ms after the call`);
    const ids = await h.waitFor(async () => {
      const list = await cancelledIds(client);
      return list.length ? list : null;
    }, 3000, 'notifications/cancelled at the server');
    assert.equal(ids.length, 1);
    // The connection stays usable.
    assert.equal(h.textOf(await client.callTool('echo', { message: 'after' })), 'Echo: after');
  });

  test('abort in the same turn as the call (still deferred): cancelled, and the server is told', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const ac = new AbortController();
    // The first call of the turn is written at once, the second is deferred: abort that one.
    const first = client.callTool('echo', { message: 'first' });
    const second = h.outcome(client.callTool('sleep', { ms: 10000 }, { signal: ac.signal }));
    ac.abort();
    assert.equal(h.textOf(await first), 'Echo: first');
    const o = await h.within(3000, second, 'the aborted deferred call');
    assert.equal(o.error.kind, 'cancelled');
    // The deferred request was flushed, then cancelled: the server records the cancelled id.
    const ids = await h.waitFor(async () => {
      const list = await cancelledIds(client);
      return list.length ? list : null;
    }, 3000, 'notifications/cancelled at the server');
    assert.equal(ids.length, 1);
  });

  test('cancel(tag) right after the start, in the same turn', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const call = h.outcome(client.callTool('sleep', { ms: 10000 }, { tag: 'started-cancel-now' }));
    assert.equal(h.mcplug.cancel('started-cancel-now'), true);
    const o = await h.within(3000, call, 'the cancelled call');
    assert.equal(o.error.kind, 'cancelled');
    assert.equal(h.mcplug.cancel('started-cancel-now'), false, 'nothing left with that tag');
  });

  test('timeoutMs on a started call: the library times it, kind timeout, the server is told', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const o = await h.outcome(client.callTool('sleep', { ms: 5000 }, { timeoutMs: 300 }));
    assert.equal(o.ok, false);
    assert.equal(o.error.kind, 'timeout');
    assert.equal(o.error.status, h.mcplug.Status.TIMEOUT);
    assert.match(o.error.message, /300 ms/);
    assert.ok(o.ms >= 250 && o.ms < 2000, `took ${o.ms} ms`);
    const ids = await h.waitFor(async () => {
      const list = await cancelledIds(client);
      return list.length ? list : null;
    }, 3000, 'notifications/cancelled after the timeout');
    assert.equal(ids.length, 1);
    // A started request with a limit that is met resolves.
    assert.deepEqual(await client.request('ping', {}, { timeoutMs: 5000 }), {});
    // Several calls with timeouts at once: each its own outcome.
    const mixed = await Promise.all([
      h.outcome(client.callTool('sleep', { ms: 2000 }, { timeoutMs: 200 })),
      h.outcome(client.callTool('sleep', { ms: 100 }, { timeoutMs: 5000 })),
      h.outcome(client.callTool('echo', { message: 'quick' }, { timeoutMs: 5000 })),
    ]);
    assert.equal(mixed[0].error.kind, 'timeout');
    assert.equal(h.textOf(mixed[1].value), 'slept');
    assert.equal(h.textOf(mixed[2].value), 'Echo: quick');
  });

  test('close() with 200 calls in flight: every one rejects closed, nothing is left', async () => {
    const client = await h.mcplug.Client.connect(h.faultServer(), { connectTimeoutMs: 10000 });
    const slow = Array.from({ length: 150 }, () => h.outcome(client.callTool('sleep', { ms: 20000 })));
    await h.sleep(300);
    // 50 more started in the same turn as close(): some still deferred when it runs.
    const late = Array.from({ length: 50 }, (_, i) => h.outcome(client.callTool('echo', { message: `late-${i}` })));
    const aborts = new AbortController();
    const withSignal = h.outcome(client.callTool('sleep', { ms: 20000 }, { signal: aborts.signal, timeoutMs: 30000, tag: 'closing-tag' }));
    const start = Date.now();
    await h.within(8000, client.close(), 'close()');
    assert.ok(Date.now() - start < 6000, `close took ${Date.now() - start} ms`);
    for (const o of await h.within(2000, Promise.all([...slow, ...late, withSignal]), 'every call to settle')) {
      // An echo may have been answered before the close; nothing may hang or fail otherwise.
      if (o.ok) assert.match(h.textOf(o.value), /^Echo: late-/);
      else assert.equal(o.error.kind, 'closed', o.error.message);
    }
    assert.ok(slow.length === 150);
    for (const o of await Promise.all(slow)) assert.equal(o.ok, false);
    assert.equal((await withSignal).error.kind, 'closed');
    assert.equal(client._calls.size, 0, 'no started call left');
    assert.equal(client.state, 'closed');
    aborts.abort(); // after the close: nothing to do, nothing thrown
    assert.equal(h.mcplug.cancel('closing-tag'), false);
    const after = await h.outcome(client.callTool('echo', { message: 'x' }));
    assert.equal(after.error.kind, 'closed');
  });

  test('a script that connects, calls and closes with calls in flight exits by itself', async () => {
    const script = `
      const { Client } = require(process.env.MCPLUG);
      (async () => {
        const c = await Client.connect({ command: 'python3', args: [process.env.FAULT_SERVER] });
        const r = await c.callTool('echo', { message: 'bye' });
        const inflight = Array.from({ length: 20 }, () => c.callTool('sleep', { ms: 30000 }).catch((e) => e.kind));
        await c.close();
        console.log(r.content[0].text, (await Promise.all(inflight)).join(','));
      })().catch((e) => { console.error(e); process.exit(2); });`;
    const r = await runScript(script);
    assert.equal(r.signal, null, `killed (did not exit by itself): ${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), `Echo: bye ${Array(20).fill('closed').join(',')}`);
    assert.ok(r.ms < 15000, `took ${r.ms} ms`);
  });

  test('a script whose server dies exits by itself, without close()', async () => {
    const script = `
      const { Client } = require(process.env.MCPLUG);
      (async () => {
        const c = await Client.connect({ command: 'python3', args: [process.env.FAULT_SERVER] });
        c.on('closed', (info) => console.log('closed event'));
        const o = await c.callTool('crash', {}).then(() => 'answered', (e) => e.kind);
        console.log('crash call:', o);
      })().catch((e) => { console.error(e); process.exit(2); });`;
    const r = await runScript(script);
    assert.equal(r.signal, null, `killed (did not exit by itself): ${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /crash call: closed/);
    assert.match(r.stdout, /closed event/);
  });

  test('no threadpool thread is needed by calls or the event pump (UV_THREADPOOL_SIZE=1)', async () => {
    const script = `
      const fsp = require('fs/promises');
      const m = require(process.env.MCPLUG);
      (async () => {
        const c = await m.Client.connect({ command: 'python3', args: [process.env.FAULT_SERVER] });
        const start = Date.now();
        const calls = Array.from({ length: 16 }, () => c.callTool('sleep', { ms: 600 }));
        await new Promise((r) => setTimeout(r, 100));
        const fsStart = Date.now();
        await fsp.readFile(process.env.MCPLUG + '/index.js');
        const fsMs = Date.now() - fsStart;
        await Promise.all(calls);
        console.log(JSON.stringify({ pool: m.threadpoolSize, total: Date.now() - start, fsMs }));
        await c.close();
      })().catch((e) => { console.error(e); process.exit(2); });`;
    const r = await runScript(script, { env: { UV_THREADPOOL_SIZE: '1' } });
    assert.equal(r.code, 0, r.stderr);
    const { pool, total, fsMs } = JSON.parse(r.stdout.trim());
    assert.equal(pool, 1);
    // With the old design (one thread per call, plus the pump) this took 16 x 600 ms.
    assert.ok(total < 1800, `16 parallel 600 ms calls on a 1-thread pool took ${total} ms`);
    assert.ok(fsMs < 500, `fs.readFile waited ${fsMs} ms for the pool's only thread`);
  });

  test('if the event descriptor fails, calls still settle (polling) and close() still works', async () => {
    const client = await h.mcplug.Client.connect(h.faultServer(), { connectTimeoutMs: 10000 });
    const warnings = [];
    const onWarning = (w) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      const inflight = h.outcome(client.callTool('sleep', { ms: 300 }));
      client._eventSocket.destroy(new Error('simulated failure')); // white-box: the socket errors
      assert.equal(h.textOf((await h.within(3000, inflight, 'the call in flight')).value), 'slept');
      assert.equal(h.textOf(await h.within(3000, client.callTool('echo', { message: 'polled' }), 'a new call')), 'Echo: polled');
      await h.within(5000, client.close(), 'close()');
      assert.equal(client.state, 'closed');
      await h.waitFor(() => warnings.length > 0, 2000, 'the warning');
      assert.match(warnings[0], /event descriptor failed \(simulated failure\); polling/);
    } finally {
      process.off('warning', onWarning);
    }
  });

  test('a started call with bad input fails at once, without an event', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const bad = await h.outcome(client.request('ping', {}, { timeoutMs: -5 }));
    assert.equal(bad.error.kind, 'invalid_argument');
    // The library refuses all_pages for a started request; the binding runs those blocking.
    const paged = await client.request('tools/list', {}, { allPages: true });
    assert.ok(Array.isArray(paged.tools) && paged.tools.length > 0);
    assert.equal(client._calls.size, 0);
    assert.equal(h.textOf(await client.callTool('echo', { message: 'fine' })), 'Echo: fine');
  });
});
