'use strict';
// Many calls at once on one handle, and the event loop staying free while calls block in the
// library (they run on libuv's threadpool through koffi's `.async`).

const h = require('./helpers');
const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const fsp = require('fs/promises');

describe('concurrency', { timeout: 60000 }, () => {
  test('the binding widened libuv\'s threadpool (UV_THREADPOOL_SIZE was not set)', (t) => {
    if (h.userThreadpoolSize) return t.skip(`UV_THREADPOOL_SIZE=${h.userThreadpoolSize} was set by the environment`);
    assert.equal(process.env.UV_THREADPOOL_SIZE, '64');
    assert.equal(h.mcplug.threadpoolSize, 64);
    assert.ok(h.mcplug.workLimit < h.mcplug.threadpoolSize, 'threads are kept for the event pumps');
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

  test('parallel slow calls run in parallel, and fs keeps a thread', async (t) => {
    if (h.mcplug.workLimit < 16) return t.skip(`only ${h.mcplug.workLimit} work slots (UV_THREADPOOL_SIZE=${h.userThreadpoolSize})`);
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const start = Date.now();
    const calls = Array.from({ length: 16 }, () => client.callTool('sleep', { ms: 600 }, { timeoutMs: 10000 }));
    await h.sleep(100);
    const fsStart = Date.now();
    await fsp.readFile(__filename);
    const fsMs = Date.now() - fsStart;
    const results = await h.within(10000, Promise.all(calls), '16 slow calls');
    const total = Date.now() - start;
    results.forEach((r) => assert.equal(h.textOf(r), 'slept'));
    // With libuv's default 4 threads this takes 4 x 600 ms.
    assert.ok(total < 1800, `16 parallel 600 ms calls took ${total} ms`);
    assert.ok(fsMs < 500, `fs.readFile waited ${fsMs} ms for a thread`);
  });

  test('more slow calls than work slots: the rest queue in JS, the pump still answers the server', async (t) => {
    const overflow = h.mcplug.workLimit + 8;
    const client = await h.connect(t, h.everythingServer(), {
      connectTimeoutMs: 15000,
      handlers: {
        'sampling/createMessage': () => ({ role: 'assistant', content: { type: 'text', text: 'pumped' }, model: 'm' }),
      },
    });
    // Fill every work slot but one with slow calls, then ask for something that needs the pump.
    const slow = Array.from({ length: h.mcplug.workLimit - 1 }, () =>
      client.callTool('trigger-long-running-operation', { duration: 2, steps: 1 }, { timeoutMs: 20000 }));
    await h.sleep(200);
    const started = Date.now();
    const sampled = await h.within(10000, client.callTool('trigger-sampling-request', { prompt: 'p' }, { timeoutMs: 10000 }), 'sampling');
    assert.match(h.textOf(sampled), /pumped/);
    assert.ok(Date.now() - started < 1500, 'answered while every other work slot was busy');
    // Beyond the work slots, calls wait in the JS queue and still complete.
    const extra = Array.from({ length: overflow }, (_, i) => client.callTool('echo', { message: `q${i}` }, { timeoutMs: 20000 }));
    const all = await h.within(20000, Promise.all([...slow, ...extra]), 'queued calls');
    all.slice(slow.length).forEach((r, i) => assert.equal(h.textOf(r), `Echo: q${i}`));
  });

  test('a timeout counts the time spent waiting for a work slot', async (t) => {
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const blockers = Array.from({ length: h.mcplug.workLimit }, () => h.outcome(client.callTool('sleep', { ms: 1500 })));
    await h.sleep(100);
    const o = await h.outcome(h.within(5000, client.callTool('echo', { message: 'late' }, { timeoutMs: 300 }), 'queued call'));
    assert.equal(o.ok, false);
    assert.equal(o.error.kind, 'timeout');
    assert.ok(o.ms < 1200, `rejected after ${o.ms} ms`);
    // An abort reaches a queued call too.
    const ac = new AbortController();
    const queued = h.outcome(client.callTool('echo', { message: 'aborted' }, { signal: ac.signal }));
    ac.abort();
    const q = await h.within(2000, queued, 'aborted queued call');
    assert.equal(q.error.kind, 'cancelled');
    for (const b of await Promise.all(blockers)) assert.ok(b.ok, b.error && b.error.message);
  });

  test('several clients at once, each with its own pump', async (t) => {
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
