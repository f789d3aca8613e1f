'use strict';
// Many calls at once on one handle, and the event loop staying free: tool calls and requests are
// started from the JS thread and settled by completion events (no thread held while they run);
// connect, lists, close and answers still run on libuv's threadpool through koffi's `.async`.

const h = require('./helpers');
const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const fsp = require('fs/promises');

describe('concurrency', { timeout: 60000 }, () => {
  test('the binding widened libuv\'s threadpool (UV_THREADPOOL_SIZE was not set)', (t) => {
    if (h.userThreadpoolSize) return t.skip(`UV_THREADPOOL_SIZE=${h.userThreadpoolSize} was set by the environment`);
    assert.equal(process.env.UV_THREADPOOL_SIZE, '16');
    assert.equal(h.mcplug.threadpoolSize, 16);
    assert.ok(h.mcplug.workLimit < h.mcplug.threadpoolSize, 'threads are kept for control calls (answers, close)');
  });

  test('1,000 concurrent calls on one handle each get their own answer', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const n = 1000;
    const results = await h.within(45000, Promise.all(
      Array.from({ length: n }, (_, i) => client.callTool('echo', { message: `call-${i}` }, { timeoutMs: 30000 })),
    ), '1,000 calls');
    assert.equal(results.length, n);
    results.forEach((r, i) => assert.equal(h.textOf(r), `Echo: call-${i}`));
    // Mixed with generic requests and list calls on the same handle.
    const toolNames = (await client.listTools()).map((x) => x.name);
    assert.ok(toolNames.includes('echo') && toolNames.includes('sleep'));
    const mixed = await h.within(20000, Promise.all([
      ...Array.from({ length: 50 }, (_, i) => client.callTool('echo', { message: `m${i}` })),
      ...Array.from({ length: 20 }, () => client.listTools()),
      ...Array.from({ length: 20 }, () => client.request('ping')),
    ]), 'mixed calls');
    mixed.slice(0, 50).forEach((r, i) => assert.equal(h.textOf(r), `Echo: m${i}`));
    mixed.slice(50, 70).forEach((tools) => assert.deepEqual(tools.map((x) => x.name), toolNames));
    mixed.slice(70).forEach((r) => assert.deepEqual(r, {}));
  });

  test('the event loop keeps ticking during a long call', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    let ticks = 0;
    let last = Date.now();
    let maxGap = 0;
    const timer = setInterval(() => {
      const now = Date.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
      ticks++;
    }, 10);
    try {
      const r = await client.callTool('sleep', { ms: 1000 }, { timeoutMs: 10000 });
      assert.equal(h.textOf(r), 'slept');
    } finally {
      clearInterval(timer);
    }
    assert.ok(ticks >= 40, `only ${ticks} ticks of a 10 ms interval during a 1 s call`);
    assert.ok(maxGap < 300, `the loop stalled for ${maxGap} ms`);
  });

  test('more parallel slow calls than threadpool threads run in parallel, and fs keeps the pool', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const n = h.mcplug.threadpoolSize + 8; // a started call holds no thread
    const start = Date.now();
    const calls = Array.from({ length: n }, () => client.callTool('sleep', { ms: 600 }, { timeoutMs: 10000 }));
    await h.sleep(100);
    const fsStart = Date.now();
    await fsp.readFile(__filename);
    const fsMs = Date.now() - fsStart;
    const results = await h.within(10000, Promise.all(calls), `${n} slow calls`);
    const total = Date.now() - start;
    results.forEach((r) => assert.equal(h.textOf(r), 'slept'));
    assert.ok(total < 1800, `${n} parallel 600 ms calls took ${total} ms`);
    assert.ok(fsMs < 500, `fs.readFile waited ${fsMs} ms for a thread`);
  });

  test('many slow calls in flight: a server request is still answered at once', async (t) => {
    const client = await h.connect(t, h.everythingServer(), {
      connectTimeoutMs: 15000,
      handlers: {
        'sampling/createMessage': () => ({ role: 'assistant', content: { type: 'text', text: 'pumped' }, model: 'm' }),
      },
    });
    const slow = Array.from({ length: h.mcplug.threadpoolSize + 8 }, () =>
      client.callTool('trigger-long-running-operation', { duration: 2, steps: 1 }, { timeoutMs: 20000 }));
    await h.sleep(200);
    const started = Date.now();
    const sampled = await h.within(10000, client.callTool('trigger-sampling-request', { prompt: 'p' }, { timeoutMs: 10000 }), 'sampling');
    assert.match(h.textOf(sampled), /pumped/);
    assert.ok(Date.now() - started < 1500, 'answered while the slow calls were in flight');
    const extra = Array.from({ length: 40 }, (_, i) => client.callTool('echo', { message: `q${i}` }, { timeoutMs: 20000 }));
    const all = await h.within(20000, Promise.all([...slow, ...extra]), 'every call');
    all.slice(slow.length).forEach((r, i) => assert.equal(h.textOf(r), `Echo: q${i}`));
  });

  test('blocking calls beyond the work slots queue in JS: their timeout and abort count there', async (t) => {
    // Connects to a server that never answers initialize hold every work slot for 3 s.
    const blockers = Array.from({ length: h.mcplug.workLimit }, () =>
      h.outcome(h.mcplug.Client.connect(h.faultServer('hang-init'), { connectTimeoutMs: 3000 })));
    const client = await h.within(20000, (async () => {
      // This connect queues behind them (its own limit is long enough).
      return h.mcplug.Client.connect(h.faultServer(), { connectTimeoutMs: 15000 });
    })(), 'the queued connect');
    t.after(() => h.within(10000, client.close(), 'close() in cleanup'));
    for (const b of await Promise.all(blockers)) {
      assert.equal(b.ok, false);
      assert.equal(b.error.kind, 'timeout');
    }
    // Hold the slots again, then a listTools with a short limit must give up while queued.
    const again = Array.from({ length: h.mcplug.workLimit }, () =>
      h.outcome(h.mcplug.Client.connect(h.faultServer('hang-init'), { connectTimeoutMs: 2000 })));
    await h.sleep(100);
    const o = await h.outcome(h.within(5000, client.listTools({ timeoutMs: 300 }), 'queued listTools'));
    assert.equal(o.ok, false);
    assert.equal(o.error.kind, 'timeout');
    assert.match(o.error.message, /waiting for a free worker thread/);
    assert.ok(o.ms < 1200, `rejected after ${o.ms} ms`);
    // An abort reaches a queued blocking call too.
    const ac = new AbortController();
    const queued = h.outcome(client.listTools({ signal: ac.signal }));
    ac.abort();
    const q = await h.within(2000, queued, 'aborted queued listTools');
    assert.equal(q.error.kind, 'cancelled');
    // Started calls never queue: a tool call answers while every slot is held.
    assert.equal(h.textOf(await h.within(2000, client.callTool('echo', { message: 'free' }), 'a call while the slots are held')), 'Echo: free');
    for (const b of await Promise.all(again)) assert.equal(b.error.kind, 'timeout');
  });

  test('several clients at once, each with its own event pump', async (t) => {
    const clients = await Promise.all(Array.from({ length: 8 }, () => h.mcplug.Client.connect(h.faultServer(), { connectTimeoutMs: 15000 })));
    try {
      const stderrLines = new Map();
      clients.forEach((c, i) => c.on('stderr', (line) => stderrLines.set(i, line)));
      const answers = await Promise.all(clients.map((c, i) => c.callTool('stderr', { line: `client ${i} says hi` })));
      answers.forEach((a) => assert.equal(h.textOf(a), 'ok'));
      await h.waitFor(() => stderrLines.size === clients.length, 5000, 'a stderr line from each client');
      clients.forEach((_, i) => assert.equal(stderrLines.get(i), `client ${i} says hi`));
    } finally {
      await h.within(10000, Promise.all(clients.map((c) => c.close())), 'closing 8 clients');
    }
    clients.forEach((c) => assert.equal(c.state, 'closed'));
  });
});
