'use strict';
// The Manager (mcplug_manager_*) through Node, against real peers: one manager over
// server-everything (stdio and Streamable HTTP), server-filesystem, server-memory, the fault
// server, a server that cannot start and one slow to start. Shown: connect resolves at once;
// the states as events; the fast servers' tools work while the slow one is pending; pool names;
// every call routed to its server; handlers called with (params, server); a killed server goes
// failed, reconnects and its tools return; setEnabled, reconnect, a new configuration; calls
// cancelled and timed out; close leaves no process and no handle. Then host (in-process)
// servers, searchTools, resources and prompts across servers, any request to one server. Then
// started calls: 200 in flight at once across servers (80 of them host calls held until all
// arrived), a host tool whose handler awaits another manager call while 60 calls wait, abort by
// signal and cancel(tag), onProgress before the result, close with calls in flight. 50 stdio
// servers connected 3 at a time (the time is printed); bad input; a process that exits by itself.

const h = require('./helpers');
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');

const { Manager, McpError } = h.mcplug;

const BIN = path.join(h.ROOT, '.deps', 'npm', 'node_modules', '.bin');
const INSTALL = 'tests/install-deps.sh';

function peerBin(name) {
  const file = path.join(BIN, name);
  if (!fs.existsSync(file)) throw new Error(`test peer missing: ${file}\ninstall it from ${h.ROOT} with:\n  ${INSTALL}`);
  return file;
}

/** A stdio entry run under `sh -c 'echo $$ > pidfile; exec ...'`: the pid is the server's own. */
function withPidFile(pidfile, command, args, extra = {}) {
  return { command: 'sh', args: ['-c', 'echo $$ > "$1"; shift; exec "$@"', 'sh', pidfile, command, ...args], ...extra };
}

/** Every event of a manager, in order, with a wait for the next one that matches. */
function recorder(m) {
  const all = [];
  const waiting = new Set();
  m.on('event', (ev) => {
    all.push(ev);
    for (const w of [...waiting]) {
      if (w.index <= all.length - 1 && w.match(ev)) {
        waiting.delete(w);
        clearTimeout(w.timer);
        w.resolve(ev);
      }
    }
  });
  return {
    all,
    /** A mark: events after it (see `next`). */
    mark: () => all.length,
    /** The first event at or after `from` matching `match` (already seen or still to come). */
    next(match, ms, what, from = 0) {
      for (let i = from; i < all.length; i++) if (match(all[i])) return Promise.resolve(all[i]);
      return new Promise((resolve, reject) => {
        const w = { index: all.length, match, resolve };
        w.timer = setTimeout(() => {
          waiting.delete(w);
          reject(new Error(`no event within ${ms} ms: ${what}; events since: ${JSON.stringify(all.slice(from)).slice(0, 3000)}`));
        }, ms);
        waiting.add(w);
      });
    },
  };
}

const isState = (server, state, more = () => true) => (ev) => ev.type === 'state' && ev.server === server && ev.state === state && more(ev);

async function rejection(promise) {
  const r = await h.outcome(promise);
  assert.equal(r.ok, false, `expected a rejection, got ${JSON.stringify(r.value)}`);
  assert.ok(r.error instanceof McpError, `not an McpError: ${r.error && r.error.stack}`);
  return r.error;
}

function gone(pid) {
  return !h.pidExists(pid) || h.isZombie(pid);
}

describe('one manager over many real servers', { timeout: 180000 }, () => {
  let m;
  let rec;
  let http;
  let dir;
  let root;
  let memFile;
  let t0;
  let connected; // what connect resolved with, and how long it took
  let config;
  const pids = {};
  const sampled = []; // [server, prompt] of each sampling request the handler saw

  before(async () => {
    http = await h.everythingHttp();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-manager-'));
    root = path.join(dir, 'root'); // the filesystem server's one allowed directory
    fs.mkdirSync(path.join(root, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(root, 'hello.txt'), 'hello from the filesystem server\n');
    memFile = path.join(dir, 'memory.jsonl');
    pids.memoryFile = path.join(dir, 'memory.pid');
    pids.faultFile = path.join(dir, 'fault.pid');
    const everything = h.everythingServer();
    const fault = h.faultServer('normal', { pidfile: pids.faultFile });
    config = {
      mcpServers: {
        everything: { command: everything.command, args: everything.args },
        'everything-http': { type: 'http', url: http.url },
        filesystem: { command: peerBin('mcp-server-filesystem'), args: [root] },
        memory: withPidFile(pids.memoryFile, peerBin('mcp-server-memory'), [], { env: { MEMORY_FILE_PATH: memFile } }),
        fault: { command: fault.command, args: fault.args },
        broken: { command: '/nonexistent/mcp-server' },
        slow: { command: 'sh', args: ['-c', 'sleep 2; exec python3 "$1"', 'sh', h.FAULT_SERVER] },
      },
    };
    m = new Manager(
      { reconnectInitialMs: 100, connection: { connectTimeoutMs: 30000 } },
      {
        handlers: {
          'sampling/createMessage': (params, server, ctx) => {
            assert.equal(ctx.server, server);
            assert.ok(ctx.signal instanceof AbortSignal);
            const prompt = params.messages[0].content.text;
            sampled.push([server, prompt]);
            if (prompt === 'refuse') throw Object.assign(new Error(`${server} refuses`), { code: -32001 });
            return { role: 'assistant', content: { type: 'text', text: `sampled for ${server}` }, model: 'node-manager-test' };
          },
        },
      },
    );
    rec = recorder(m);
    t0 = Date.now();
    const status = await m.connect(config);
    connected = { status, ms: Date.now() - t0 };
  });

  after(async () => {
    if (m) await h.within(20000, m.close(), 'close() in cleanup');
    if (http) await http.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('connect resolves at once: every server pending (in configuration order), nothing in the pool yet', () => {
    const { status, ms } = connected;
    assert.deepEqual(Object.keys(status.servers), ['everything', 'everything-http', 'filesystem', 'memory', 'fault', 'broken', 'slow']);
    for (const [name, s] of Object.entries(status.servers)) assert.equal(s.state, 'pending', `${name}: ${JSON.stringify(s)}`);
    assert.equal(status.servers['everything-http'].transport, 'http');
    assert.equal(status.servers.memory.transport, 'stdio');
    assert.equal(status.tools, 0);
    console.log(`# connect resolved in ${ms} ms`);
  });

  test('the fast servers are usable while the slow one is still pending', async () => {
    const ev = await rec.next(isState('fault', 'connected'), 20000, 'fault connected');
    assert.ok(ev.tools.includes('mcp__fault__echo'), JSON.stringify(ev));
    assert.equal(ev.transport, 'stdio');
    assert.equal(ev.server_info.name, 'fault-server');
    const status = await m.status();
    assert.equal(status.servers.slow.state, 'pending', 'slow is still starting');
    const r = await m.callTool('mcp__fault__echo', { message: 'while slow starts' });
    assert.equal(h.textOf(r), 'Echo: while slow starts');
    assert.equal((await m.status()).servers.slow.state, 'pending', 'and still pending after the call');
  });

  test('wait: every state settled; the broken server is failed, naming its command', async () => {
    const status = await h.within(60000, m.wait(60000), 'wait()');
    const took = Date.now() - t0;
    for (const name of ['everything', 'everything-http', 'filesystem', 'memory', 'fault', 'slow']) {
      assert.equal(status.servers[name].state, 'connected', `${name}: ${JSON.stringify(status.servers[name])}`);
    }
    assert.ok(took >= 2000, `the slow server took its 2 s (${took} ms)`);
    const broken = status.servers.broken;
    assert.equal(broken.state, 'failed');
    assert.equal(broken.error.kind, 'transport');
    assert.match(broken.error.message, /\/nonexistent\/mcp-server/);
    assert.deepEqual(broken.tools, []);
    assert.equal(status.servers.filesystem.server_info.name, 'secure-filesystem-server');
    assert.equal(status.servers.memory.server_info.name, 'memory-server');
    // Each state change came as an event, pending first.
    for (const name of ['everything', 'everything-http', 'filesystem', 'memory', 'slow']) {
      const states = rec.all.filter((e) => e.type === 'state' && e.server === name).map((e) => e.state);
      assert.deepEqual(states.slice(0, 2), ['pending', 'connected'], `${name}: ${states}`);
    }
    const brokenEv = await rec.next(isState('broken', 'failed'), 1000, 'broken failed');
    assert.match(brokenEv.error.message, /\/nonexistent\/mcp-server/);
    // wait() after everything settled resolves at once.
    assert.deepEqual(Object.keys((await m.wait()).servers).length, 7);
  });

  test('the pool: mcp__<server>__<tool> for every connected server, nothing of the failed one', async () => {
    const { tools, dropped } = await m.listTools();
    const names = tools.map((t) => t.name);
    for (const name of ['mcp__everything__echo', 'mcp__everything-http__echo', 'mcp__filesystem__list_directory',
      'mcp__filesystem__read_text_file', 'mcp__memory__create_entities', 'mcp__memory__read_graph',
      'mcp__fault__echo', 'mcp__slow__echo']) {
      assert.ok(names.includes(name), `${name} not in the pool: ${names.join(', ')}`);
    }
    assert.ok(!names.some((n) => n.startsWith('mcp__broken__')));
    assert.deepEqual([...names].sort(), names, 'sorted by name');
    assert.deepEqual(dropped, []);
    const listDir = tools.find((t) => t.name === 'mcp__filesystem__list_directory');
    assert.equal(listDir.server, 'filesystem');
    assert.equal(listDir.tool, 'list_directory');
    assert.equal(listDir.read_only, true, 'readOnlyHint surfaced');
    assert.ok(listDir.inputSchema.properties.path);
    const status = await m.status();
    assert.equal(status.tools, tools.length);
    // One server's tools.
    const memory = (await m.listTools('memory')).tools;
    assert.deepEqual(memory.map((t) => t.name), status.servers.memory.tools);
    assert.ok(memory.every((t) => t.server === 'memory'));
    assert.deepEqual(await m.listTools('broken'), { tools: [], dropped: [] });
  });

  test('every call goes to its own server', async () => {
    const [a, b, listing, created] = await Promise.all([
      m.callTool('mcp__everything__echo', { message: 'over stdio' }),
      m.callTool('mcp__everything-http__echo', { message: 'over http' }),
      m.callTool('mcp__filesystem__list_directory', { path: root }),
      m.callTool('mcp__memory__create_entities', {
        entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }],
      }),
    ]);
    assert.equal(h.textOf(a), 'Echo: over stdio');
    assert.equal(h.textOf(b), 'Echo: over http');
    assert.deepEqual(h.textOf(listing).split('\n').sort(), ['[DIR] sub', '[FILE] hello.txt']);
    assert.equal(created.structuredContent.entities[0].name, 'Ada');
    const graph = await m.callTool('mcp__memory__read_graph', {});
    assert.deepEqual(graph.structuredContent.entities, [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }]);
    assert.match(fs.readFileSync(memFile, 'utf8'), /"name":"Ada"/, 'the memory server wrote its file');
    const read = await m.callTool('mcp__filesystem__read_text_file', { path: path.join(root, 'hello.txt') });
    assert.equal(h.textOf(read), 'hello from the filesystem server\n');
    // The filesystem server refuses a path outside its root: a tool error, from that server.
    const outside = await m.callTool('mcp__filesystem__list_directory', { path: dir });
    assert.equal(outside.isError, true);
    assert.match(h.textOf(outside), /denied|outside/i);
    // Names that are not in the pool.
    let err = await rejection(m.callTool('mcp__nowhere__echo', {}));
    assert.equal(err.kind, 'not_found');
    assert.match(err.message, /mcp__nowhere__echo/);
    err = await rejection(m.callTool('mcp__broken__anything', {}));
    assert.equal(err.kind, 'not_found');
    assert.match(err.message, /failed/);
    err = await rejection(m.callTool('mcp__fault__echo', [1]));
    assert.equal(err.kind, 'invalid_argument');
  });

  test('handlers for server requests are called with (params, server), over stdio and http', async () => {
    sampled.length = 0;
    const [stdio, overHttp] = await Promise.all([
      m.callTool('mcp__everything__trigger-sampling-request', { prompt: 'from stdio', maxTokens: 5 }),
      m.callTool('mcp__everything-http__trigger-sampling-request', { prompt: 'from http', maxTokens: 5 }),
    ]);
    assert.match(h.textOf(stdio), /sampled for everything"/);
    assert.match(h.textOf(overHttp), /sampled for everything-http"/);
    assert.deepEqual(sampled.map(([server]) => server).sort(), ['everything', 'everything-http']);
    // The fault server asks too; a handler's throw reaches it as a JSON-RPC error.
    const asked = await m.callTool('mcp__fault__ask', {
      method: 'sampling/createMessage',
      params: { messages: [{ role: 'user', content: { type: 'text', text: 'refuse' } }], maxTokens: 5 },
      wait_ms: 10000,
    });
    assert.deepEqual(JSON.parse(h.textOf(asked)), { error: { code: -32001, message: 'fault refuses' } });
    assert.deepEqual(sampled.at(-1), ['fault', 'refuse']);
    // The request events carry the manager's own ids and their server.
    const requests = rec.all.filter((e) => e.type === 'request');
    assert.ok(requests.length >= 3);
    for (const r of requests) assert.match(r.id, /^m\d+$/);
    assert.deepEqual(new Set(requests.map((r) => r.server)), new Set(['everything', 'everything-http', 'fault']));
  });

  test('the event loop runs while manager calls wait; a call is cancelled by its signal and timed out by timeoutMs', async () => {
    let ticks = 0;
    const ticker = setInterval(() => { ticks++; }, 10);
    try {
      const ac = new AbortController();
      const call = h.outcome(m.callTool('mcp__fault__sleep', { ms: 10000 }, { signal: ac.signal }));
      await h.sleep(300);
      ac.abort();
      const r = await h.within(5000, call, 'the cancelled call');
      assert.equal(r.ok, false);
      assert.equal(r.error.kind, 'cancelled');
      const slow = await rejection(m.callTool('mcp__fault__sleep', { ms: 10000 }, { timeoutMs: 400 }));
      assert.equal(slow.kind, 'timeout');
      assert.ok(ticks >= 20, `timers ran while the calls waited (${ticks} ticks)`);
    } finally {
      clearInterval(ticker);
    }
    // The server was told of both.
    const ids = JSON.parse(h.textOf(await m.callTool('mcp__fault__cancelled_ids', {})));
    assert.equal(ids.length, 2, JSON.stringify(ids));
    assert.equal((await m.status()).servers.fault.state, 'connected', 'a cancelled call is no connection error');
  });

  test('a killed server goes failed, reconnects, and its tools come back', async () => {
    const pid = h.readPid(pids.memoryFile);
    assert.ok(pid, 'the memory server wrote its pid');
    fs.unlinkSync(pids.memoryFile);
    const from = rec.mark();
    process.kill(pid, 'SIGKILL');
    const failed = await rec.next(isState('memory', 'failed'), 15000, 'memory failed', from);
    assert.deepEqual(failed.tools, []);
    const pending = await rec.next(isState('memory', 'pending', (e) => e.attempt === 1), 15000, 'memory pending, attempt 1', from);
    assert.ok(pending);
    const back = await rec.next(isState('memory', 'connected'), 20000, 'memory connected again', from);
    assert.ok(back.tools.includes('mcp__memory__read_graph'));
    const pid2 = await h.waitFor(() => h.readPid(pids.memoryFile), 5000, 'the new pid');
    assert.notEqual(pid2, pid);
    assert.ok(gone(pid));
    // Its tools work again, over the new process, and what it wrote before is still there.
    const graph = await m.callTool('mcp__memory__read_graph', {});
    assert.deepEqual(graph.structuredContent.entities.map((e) => e.name), ['Ada']);
    // The others never noticed.
    const others = rec.all.slice(from).filter((e) => e.type === 'state' && e.server !== 'memory');
    assert.deepEqual(others, []);
  });

  test('setEnabled(false/true) and reconnect', async () => {
    const off = await m.setEnabled('fault', false);
    assert.equal(off.state, 'disabled');
    let err = await rejection(m.callTool('mcp__fault__echo', { message: 'x' }));
    assert.equal(err.kind, 'not_found');
    assert.match(err.message, /disabled/);
    assert.ok(!(await m.listTools()).tools.some((t) => t.server === 'fault'));
    const from = rec.mark();
    await m.setEnabled('fault', true);
    await rec.next(isState('fault', 'connected'), 15000, 'fault enabled again', from);
    assert.equal(h.textOf(await m.callTool('mcp__fault__echo', { message: 'again' })), 'Echo: again');
    const start = Date.now();
    const slow = await m.reconnect('slow');
    assert.equal(slow.state, 'connected');
    assert.ok(Date.now() - start >= 2000, 'reconnect waited for the slow start');
    err = await rejection(m.reconnect('nobody'));
    assert.equal(err.kind, 'not_found');
    err = await rejection(m.setEnabled('nobody', true));
    assert.equal(err.kind, 'not_found');
    err = await rejection(m.setEnabled('fault', 'yes'));
    assert.equal(err.kind, 'invalid_argument');
  });

  test('a new configuration: a dropped server is removed, the others stay connected', async () => {
    const before = await m.status();
    const from = rec.mark();
    const { broken, ...rest } = before.servers;
    assert.ok(broken);
    const status = await m.connect({
      mcpServers: Object.fromEntries(Object.entries(config.mcpServers).filter(([name]) => name !== 'broken')),
    });
    assert.deepEqual(Object.keys(status.servers), Object.keys(rest));
    await rec.next((e) => e.type === 'removed' && e.server === 'broken', 5000, 'broken removed', from);
    assert.deepEqual(rec.all.slice(from).filter((e) => e.type === 'state'), [], 'nobody else reconnected');
    assert.equal(h.textOf(await m.callTool('mcp__everything__echo', { message: 'still here' })), 'Echo: still here');
  });

  test('close: every server process is gone, later calls are closed', async () => {
    const faultPid = h.readPid(pids.faultFile);
    const memoryPid = h.readPid(pids.memoryFile);
    assert.ok(faultPid && memoryPid);
    const closed = new Promise((resolve) => m.once('closed', resolve));
    await h.within(20000, m.close(), 'close()');
    assert.equal(m.state, 'closed');
    assert.deepEqual(await closed, { reason: 'the manager was closed by the host' });
    assert.ok(gone(faultPid), 'the fault server is gone');
    assert.ok(gone(memoryPid), 'the memory server is gone');
    assert.equal(rec.all.at(-1).type, 'closed', 'the last event is the manager\'s closed');
    for (const call of [m.callTool('mcp__everything__echo', { message: 'x' }), m.status(), m.listTools(), m.wait(), m.connect({ mcpServers: {} })]) {
      assert.equal((await rejection(call)).kind, 'closed');
    }
    await m.close(); // twice is fine
  });
});

describe('host servers, tool search, resources and prompts across servers', { timeout: 120000 }, () => {
  let m;
  let rec;
  let http;
  let config;
  const calls = []; // [tool, arguments, context] of each host tool call
  let sawAbort = null;

  before(async () => {
    http = await h.everythingHttp();
    const everything = h.everythingServer();
    const fault = h.faultServer();
    config = {
      mcpServers: {
        everything: { command: everything.command, args: everything.args },
        'everything-http': { type: 'http', url: http.url },
        fault: { command: fault.command, args: fault.args },
      },
    };
    m = new Manager({ connection: { connectTimeoutMs: 30000 } });
    rec = recorder(m);
    // Before any configuration: the host server exists at once.
    const host = await m.addHostServer('host', [
      {
        name: 'now',
        description: 'The time in a zone',
        inputSchema: { type: 'object', properties: { zone: { type: 'string' } } },
        handler: (args, ctx) => {
          calls.push(['now', args, ctx]);
          return { content: [{ type: 'text', text: `12:00 in ${args.zone}` }], structuredContent: { zone: args.zone } };
        },
      },
      { name: 'plain', handler: async (args) => `plain ${JSON.stringify(args)}` },
      { name: 'boom', description: 'Always fails', handler: () => { throw new Error('the host tool broke'); } },
      {
        name: 'wait_for_abort',
        handler: (args, { signal }) => new Promise((resolve) => {
          signal.addEventListener('abort', () => { sawAbort = signal.reason; resolve('too late'); });
        }),
      },
    ]);
    assert.equal(host.state, 'connected');
    assert.equal(host.transport, 'sdk');
    assert.deepEqual(host.tools, ['mcp__host__boom', 'mcp__host__now', 'mcp__host__plain', 'mcp__host__wait_for_abort']);
    await m.connect(config);
    const status = await m.wait(60000);
    for (const name of ['host', 'everything', 'everything-http', 'fault']) assert.equal(status.servers[name].state, 'connected', name);
  });

  after(async () => {
    if (m) await h.within(20000, m.close(), 'close() in cleanup');
    if (http) await http.close();
  });

  test('a host server\'s tools are in the pool (first) and its handlers answer the calls', async () => {
    const { tools } = await m.listTools();
    assert.deepEqual(tools.slice(0, 4).map((t) => t.name), ['mcp__host__boom', 'mcp__host__now', 'mcp__host__plain', 'mcp__host__wait_for_abort']);
    const now = tools.find((t) => t.name === 'mcp__host__now');
    assert.equal(now.server, 'host');
    assert.equal(now.description, 'The time in a zone');
    assert.deepEqual(now.inputSchema.properties.zone, { type: 'string' });
    assert.ok(tools.some((t) => t.name === 'mcp__everything__echo') && tools.some((t) => t.name === 'mcp__fault__echo'));
    const r = await m.callTool('mcp__host__now', { zone: 'UTC' });
    assert.deepEqual(r, { content: [{ type: 'text', text: '12:00 in UTC' }], structuredContent: { zone: 'UTC' } });
    const [tool, args, ctx] = calls.at(-1);
    assert.equal(tool, 'now');
    assert.deepEqual(args, { zone: 'UTC' });
    assert.equal(ctx.server, 'host');
    assert.equal(ctx.tool, 'now');
    assert.match(ctx.id, /^m\d+$/);
    assert.equal(ctx.manager, m);
    assert.deepEqual(await m.callTool('mcp__host__plain', { a: 1 }), { content: [{ type: 'text', text: 'plain {"a":1}' }] });
    assert.deepEqual(await m.callTool('mcp__host__boom', {}), { content: [{ type: 'text', text: 'the host tool broke' }], isError: true });
    // Host calls and server calls at once, each to its own.
    const mixed = await Promise.all([
      m.callTool('mcp__host__now', { zone: 'CET' }),
      m.callTool('mcp__everything__echo', { message: 'e' }),
      m.callTool('mcp__everything-http__echo', { message: 'h' }),
      m.callTool('mcp__fault__echo', { message: 'f' }),
    ]);
    assert.deepEqual(mixed.map((x) => h.textOf(x)), ['12:00 in CET', 'Echo: e', 'Echo: h', 'Echo: f']);
  });

  test('a host call that times out: the caller gets timeout, the handler\'s signal aborts', async () => {
    const from = rec.mark();
    const err = await rejection(m.callTool('mcp__host__wait_for_abort', {}, { timeoutMs: 300 }));
    assert.equal(err.kind, 'timeout');
    const cancelled = await rec.next((e) => e.type === 'request_cancelled' && e.server === 'host', 5000, 'request_cancelled of the host call', from);
    assert.match(cancelled.id, /^m\d+$/);
    await h.waitFor(() => sawAbort !== null, 5000, 'the handler\'s signal');
    assert.equal(sawAbort.kind, 'cancelled');
  });

  test('addHostServer again replaces its tools in place; a new configuration keeps it as it is', async () => {
    const from = rec.mark();
    const entry = await m.addHostServer('host', [{ name: 'later', handler: () => 'later it is' }]);
    assert.deepEqual(entry.tools, ['mcp__host__later']);
    const changed = await rec.next((e) => e.type === 'tools_changed' && e.server === 'host', 5000, 'tools_changed of host', from);
    assert.deepEqual(changed.tools, ['mcp__host__later']);
    assert.equal((await rejection(m.callTool('mcp__host__now', {}))).kind, 'not_found');
    assert.equal(h.textOf(await m.callTool('mcp__host__later', {})), 'later it is');
    // The same configuration again: nobody reconnects, the host server keeps its new tools.
    await m.connect(config);
    assert.deepEqual(rec.all.slice(from).filter((e) => e.type === 'state'), []);
    assert.equal(h.textOf(await m.callTool('mcp__host__later', {})), 'later it is');
    assert.deepEqual(m.hostServers, ['host']);
    // A configuration with a server of the host server's name is refused.
    const err = await rejection(m.connect({ mcpServers: { ...config.mcpServers, host: { command: 'x' } } }));
    assert.equal(err.kind, 'invalid_argument');
    assert.match(err.message, /host/);
    const bad = await rejection(m.addHostServer('h2', [{ name: 'x' }]));
    assert.equal(bad.kind, 'invalid_argument');
    assert.match(bad.message, /handler/);
  });

  test('searchTools ranks the pool', async () => {
    const found = await m.searchTools('echo', { maxResults: 2 });
    assert.equal(found.tools.length, 2);
    assert.ok(found.total >= 3, `every echo matched (${found.total})`);
    for (const t of found.tools) {
      assert.equal(t.tool, 'echo');
      assert.equal(typeof t.score, 'number');
    }
    const picked = await m.searchTools('select:mcp__host__later,mcp__fault__sleep');
    assert.deepEqual(picked.tools.map((t) => t.name), ['mcp__host__later', 'mcp__fault__sleep']);
    const one = await m.searchTools('echo', { server: 'fault' });
    assert.deepEqual(one.tools.map((t) => t.name), ['mcp__fault__echo']);
    assert.equal((await rejection(m.searchTools(''))).kind, 'invalid_argument');
    assert.equal((await rejection(m.searchTools('echo', { maxResults: 0 }))).kind, 'invalid_argument');
  });

  test('resources of every server that has them, and a read routed to one', async () => {
    const all = await m.listResources();
    assert.deepEqual(all.errors, {});
    const servers = new Set(all.resources.map((r) => r.server));
    assert.deepEqual([...servers].sort(), ['everything', 'everything-http'], 'the fault and host servers have no resources');
    const doc = all.resources.find((r) => r.server === 'everything-http' && r.uri === 'demo://resource/static/document/architecture.md');
    assert.ok(doc, JSON.stringify(all.resources.slice(0, 3)));
    assert.ok(all.templates.some((t) => t.server === 'everything' && /\{/.test(t.uriTemplate)));
    const one = await m.listResources({ server: 'everything' });
    assert.ok(one.resources.length > 0 && one.resources.every((r) => r.server === 'everything'));
    const read = await m.readResource('everything-http', doc.uri);
    assert.equal(read.contents[0].uri, doc.uri);
    assert.match(read.contents[0].text, /\S/);
    assert.equal((await rejection(m.readResource('nobody', doc.uri))).kind, 'not_found');
    assert.equal((await rejection(m.readResource('host', doc.uri))).kind, 'invalid_argument');
    const missing = await rejection(m.readResource('everything', 'demo://no/such/thing'));
    assert.equal(missing.kind, 'rpc');
  });

  test('prompts by qualified name, across servers', async () => {
    const all = await m.listPrompts();
    assert.deepEqual(all.errors, {});
    const names = all.prompts.map((p) => p.name).sort();
    for (const server of ['everything', 'everything-http']) {
      for (const prompt of ['args-prompt', 'simple-prompt']) assert.ok(names.includes(`mcp__${server}__${prompt}`), names.join(', '));
    }
    const args = all.prompts.find((p) => p.name === 'mcp__everything-http__args-prompt');
    assert.equal(args.server, 'everything-http');
    assert.equal(args.prompt, 'args-prompt');
    const got = await m.getPrompt('mcp__everything-http__args-prompt', { city: 'Paris', state: 'TX' });
    assert.equal(got.messages[0].content.text, "What's weather in Paris, TX?");
    const simple = await m.getPrompt('mcp__everything__simple-prompt');
    assert.equal(simple.messages[0].content.text, 'This is a simple prompt without arguments.');
    assert.equal((await rejection(m.getPrompt('mcp__nobody__x'))).kind, 'not_found');
    // One named server is asked whatever its capabilities: the fault server has no prompts/list.
    const none = await rejection(m.listPrompts({ server: 'fault' }));
    assert.equal(none.kind, 'rpc');
    assert.equal(none.code, -32601);
  });

  test('any request to one named server', async () => {
    const dept = await m.request('everything-http', 'completion/complete', {
      ref: { type: 'ref/prompt', name: 'completable-prompt' },
      argument: { name: 'department', value: 'S' },
    });
    assert.deepEqual(dept.completion.values, ['Sales', 'Support']);
    assert.deepEqual(await m.request('fault', 'ping'), {});
    const err = await rejection(m.request('fault', 'no/such/method'));
    assert.equal(err.kind, 'rpc');
    assert.equal(err.code, -32601);
    assert.equal((await rejection(m.request('host', 'ping'))).kind, 'invalid_argument');
    assert.equal((await rejection(m.request('nobody', 'ping'))).kind, 'not_found');
  });

  test('removeHostServer: its tools leave the pool', async () => {
    const from = rec.mark();
    await m.removeHostServer('host');
    await rec.next((e) => e.type === 'removed' && e.server === 'host', 5000, 'host removed', from);
    assert.ok(!(await m.listTools()).tools.some((t) => t.server === 'host'));
    assert.equal((await rejection(m.callTool('mcp__host__later', {}))).kind, 'not_found');
    assert.deepEqual(m.hostServers, []);
    assert.equal((await rejection(m.removeHostServer('host'))).kind, 'not_found');
    assert.equal((await m.status()).servers.everything.state, 'connected');
  });
});

describe('started calls: any number in flight, host tools that call the manager', { timeout: 120000 }, () => {
  let m;
  let rec;
  let http;
  const holding = []; // {n, release} of each `hold` call waiting for its release
  let hangAbort = null; // the reason `hang`'s signal aborted with

  /** Releases every `hold` call waiting now. */
  function releaseAll() {
    for (const held of holding.splice(0)) held.release();
  }

  before(async () => {
    http = await h.everythingHttp();
    const everything = h.everythingServer();
    const fault = h.faultServer();
    m = new Manager({ connection: { connectTimeoutMs: 30000 } });
    rec = recorder(m);
    await m.addHostServer('gate', [
      // Answers only once the test releases it: a call of it stays in flight until then.
      { name: 'hold', handler: (args) => new Promise((resolve) => { holding.push({ n: args.n, release: () => resolve(`held ${args.n}`) }); }) },
      { name: 'inner', handler: (args) => `inner ${args.x}` },
      // A host tool that itself calls the manager, and waits for that call.
      {
        name: 'outer',
        handler: async (args, { manager }) => `outer got ${h.textOf(await manager.callTool('mcp__gate__inner', { x: args.x }))}`,
      },
      {
        name: 'hang',
        handler: (args, { signal }) => new Promise((resolve) => {
          signal.addEventListener('abort', () => { hangAbort = signal.reason; resolve('too late'); });
        }),
      },
    ]);
    await m.connect({
      mcpServers: {
        everything: { command: everything.command, args: everything.args },
        'everything-http': { type: 'http', url: http.url },
        fault: { command: fault.command, args: fault.args },
      },
    });
    const status = await m.wait(60000);
    for (const name of ['gate', 'everything', 'everything-http', 'fault']) assert.equal(status.servers[name].state, 'connected', name);
  });

  after(async () => {
    releaseAll();
    if (m) await h.within(20000, m.close(), 'close() in cleanup');
    if (http) await http.close();
  });

  test('200 calls in flight at once across servers each complete with their own answer', async () => {
    const n = 200;
    const held = 80; // host calls that all wait until every one of them has arrived
    assert.ok(held > h.mcplug.workLimit, `more held calls (${held}) than threadpool work slots (${h.mcplug.workLimit})`);
    const servers = ['everything', 'everything-http', 'fault'];
    const calls = [];
    const want = [];
    let hold = 0;
    for (let i = 0; i < n; i++) {
      if (i % 5 < 2) {
        calls.push(m.callTool('mcp__gate__hold', { n: i }));
        want.push(`held ${i}`);
        hold++;
      } else {
        const server = servers[i % 5 - 2];
        calls.push(m.callTool(`mcp__${server}__echo`, { message: `${server} ${i}` }));
        want.push(`Echo: ${server} ${i}`);
      }
    }
    assert.equal(hold, held);
    // Every held call reaches its handler while none has been answered: all 80 are in flight
    // at once (and the 120 server calls with them).
    await h.waitFor(() => holding.length === held, 20000, `${held} held host calls in flight (${holding.length} arrived)`);
    releaseAll();
    const results = await h.within(30000, Promise.all(calls), `${n} calls`);
    assert.deepEqual(results.map((r) => h.textOf(r)), want);
    assert.ok(results.every((r) => !r.isError));
  });

  test('a host tool whose handler awaits m.callTool of another host tool completes while many calls wait', async () => {
    const waiting = 60;
    const calls = [];
    for (let i = 0; i < waiting; i++) calls.push(m.callTool('mcp__gate__hold', { n: i }));
    await h.waitFor(() => holding.length === waiting, 20000, `${waiting} held host calls in flight (${holding.length} arrived)`);
    // With each call holding a worker thread, `outer` (and its own call of `inner`) waited
    // behind the held calls for ever.
    const r = await h.within(15000, m.callTool('mcp__gate__outer', { x: 7 }), 'the host tool calling the manager');
    assert.deepEqual(r, { content: [{ type: 'text', text: 'outer got inner 7' }] });
    // Two levels, several at once, and a server call from inside a handler.
    const nested = await h.within(15000, Promise.all([1, 2, 3].map((x) => m.callTool('mcp__gate__outer', { x }))), 'three nested calls');
    assert.deepEqual(nested.map((x) => h.textOf(x)), ['outer got inner 1', 'outer got inner 2', 'outer got inner 3']);
    assert.equal(holding.length, waiting, 'the held calls still wait');
    releaseAll();
    const results = await h.within(15000, Promise.all(calls), 'the held calls');
    assert.deepEqual(results.map((x) => h.textOf(x)), calls.map((_, i) => `held ${i}`));
  });

  test('abort via signal cancels a host call and a server call; cancel(tag) and a signal already aborted too', async () => {
    // A host call: the caller gets cancelled, the handler's signal aborts, request_cancelled follows.
    let from = rec.mark();
    const ac = new AbortController();
    const hang = h.outcome(m.callTool('mcp__gate__hang', {}, { signal: ac.signal }));
    const asked = await rec.next((e) => e.type === 'request' && e.server === 'gate' && e.params.name === 'hang', 5000, 'the hang call', from);
    ac.abort();
    const r = await h.within(5000, hang, 'the aborted host call');
    assert.equal(r.ok, false);
    assert.ok(r.error instanceof McpError);
    assert.equal(r.error.kind, 'cancelled');
    assert.match(r.error.message, /^tools\/call mcp__gate__hang was cancelled by the host/);
    await rec.next((e) => e.type === 'request_cancelled' && e.id === asked.id, 5000, 'request_cancelled of the hang call', from);
    await h.waitFor(() => hangAbort !== null, 5000, 'the hang handler\'s signal');
    assert.equal(hangAbort.kind, 'cancelled');

    // A server call: cancelled, and the server is told (notifications/cancelled).
    const before = JSON.parse(h.textOf(await m.callTool('mcp__fault__cancelled_ids', {}))).length;
    const ac2 = new AbortController();
    const sleep = h.outcome(m.callTool('mcp__fault__sleep', { ms: 10000 }, { signal: ac2.signal }));
    await h.sleep(200);
    ac2.abort();
    const s = await h.within(5000, sleep, 'the aborted server call');
    assert.equal(s.ok, false);
    assert.equal(s.error.kind, 'cancelled');
    assert.ok(s.ms < 5000, `settled in ${s.ms} ms, not after the 10 s sleep`);

    // cancel(tag) reaches a started manager call.
    const tagged = h.outcome(m.callTool('mcp__fault__sleep', { ms: 10000 }, { tag: 'manager-started-tag' }));
    await h.sleep(200);
    assert.equal(h.mcplug.cancel('manager-started-tag'), true);
    const t = await h.within(5000, tagged, 'the call cancelled by tag');
    assert.equal(t.ok, false);
    assert.equal(t.error.kind, 'cancelled');
    await h.waitFor(async () => JSON.parse(h.textOf(await m.callTool('mcp__fault__cancelled_ids', {}))).length === before + 2, 5000,
      'the fault server told of both cancellations');

    // A signal already aborted: rejected at once, nothing started.
    from = rec.mark();
    const done = new AbortController();
    done.abort();
    assert.equal((await rejection(m.callTool('mcp__gate__hang', {}, { signal: done.signal }))).kind, 'cancelled');
    assert.equal((await rejection(m.callTool('mcp__gate__hang', {}, { timeoutMs: 200 }))).kind, 'timeout');
    assert.equal(rec.all.slice(from).filter((e) => e.type === 'request').length, 1, 'only the timed-out call reached the handler');
    // Settled calls are forgotten; cancelling them later is harmless.
    ac.abort();
    assert.equal(h.mcplug.cancel('manager-started-tag'), false);
  });

  test('onProgress gets every progress notification (with its server) before the result', async () => {
    for (const server of ['everything', 'everything-http']) {
      for (let round = 0; round < 3; round++) {
        const progress = [];
        const r = await m.callTool(`mcp__${server}__trigger-long-running-operation`, { duration: 0.2, steps: 3 }, {
          onProgress: (p, from) => progress.push([p.progress, p.total, from]),
        });
        assert.match(h.textOf(r), /Long running operation completed/);
        assert.deepEqual(progress, [[1, 3, server], [2, 3, server], [3, 3, server]], `${server}, round ${round}`);
      }
    }
  });

  test('bad arguments and unknown pool names are refused at once, and the manager goes on', async () => {
    assert.equal((await rejection(m.callTool('mcp__nowhere__x', {}))).kind, 'not_found');
    assert.equal((await rejection(m.callTool('mcp__gate__inner', 5))).kind, 'invalid_argument');
    assert.equal((await rejection(m.callTool('mcp__gate__inner', {}, { timeoutMs: -1 }))).kind, 'invalid_argument');
    assert.equal((await rejection(m.callTool('mcp__gate__inner', {}, { onProgress: 'no' }))).kind, 'invalid_argument');
    assert.equal(h.textOf(await m.callTool('mcp__gate__inner', { x: 'still' })), 'inner still');
  });

  test('close with calls in flight: each rejects with kind closed', async () => {
    const hold = h.outcome(m.callTool('mcp__gate__hold', { n: 'last' }));
    const sleep = h.outcome(m.callTool('mcp__fault__sleep', { ms: 10000 }));
    const progress = h.outcome(m.callTool('mcp__everything__trigger-long-running-operation', { duration: 10, steps: 10 }, { onProgress: () => {} }));
    await h.waitFor(() => holding.length === 1, 5000, 'the held call');
    await h.sleep(200);
    await h.within(20000, m.close(), 'close()');
    for (const [what, call] of [['host', hold], ['server', sleep], ['with onProgress', progress]]) {
      const r = await h.within(5000, call, what);
      assert.equal(r.ok, false, what);
      assert.equal(r.error.kind, 'closed', `${what}: ${r.error.message}`);
    }
    assert.equal((await rejection(m.callTool('mcp__gate__inner', {}))).kind, 'closed');
  });
});

describe('many servers', { timeout: 180000 }, () => {
  test('50 stdio servers connect 3 at a time (the time is printed)', async (t) => {
    const n = 50;
    const fault = h.faultServer();
    const mcpServers = {};
    for (let i = 0; i < n; i++) mcpServers[`s${String(i).padStart(2, '0')}`] = { command: fault.command, args: fault.args };
    const m = new Manager({ localConcurrency: 3 });
    t.after(() => h.within(30000, m.close(), 'close'));
    const start = Date.now();
    const first = await m.connect({ mcpServers });
    assert.equal(Object.keys(first.servers).length, n);
    const status = await h.within(150000, m.wait(150000), 'wait for 50 servers');
    const took = Date.now() - start;
    const states = Object.values(status.servers).map((s) => s.state);
    assert.deepEqual([...new Set(states)], ['connected'], JSON.stringify(status).slice(0, 2000));
    assert.equal(status.tools, n * 14, '14 tools each');
    console.log(`# ${n} stdio servers (the fault server, Python) connected 3 at a time in ${(took / 1000).toFixed(2)} s`);
    t.diagnostic(`${n} stdio servers connected 3 at a time in ${(took / 1000).toFixed(2)} s`);
    // A call to each, all at once: routed by name.
    const names = Object.keys(mcpServers);
    const results = await Promise.all(names.map((s) => m.callTool(`mcp__${s}__echo`, { message: s })));
    results.forEach((r, i) => assert.equal(h.textOf(r), `Echo: ${names[i]}`));
  });
});

describe('bad input and the process', { timeout: 60000 }, () => {
  test('options, configurations and arguments are checked with clear errors', async (t) => {
    assert.throws(() => new Manager({ bogusOption: 1 }), (e) => e instanceof McpError && e.kind === 'invalid_argument' && /bogus_option/.test(e.message));
    assert.throws(() => new Manager([]), (e) => e.kind === 'invalid_argument');
    assert.throws(() => new Manager({}, { handlers: { 'sampling/createMessage': 'no' } }), (e) => e.kind === 'invalid_argument' && /sampling\/createMessage/.test(e.message));
    assert.equal((await rejection(Manager.create({ localConcurrency: 'three' }))).kind, 'invalid_argument');
    const m = await Manager.create({ local_concurrency: 2 });
    t.after(() => m.close());
    let err = await rejection(m.connect({ nope: {} }));
    assert.equal(err.kind, 'invalid_argument');
    assert.match(err.message, /mcpServers/);
    err = await rejection(m.connect('{"mcpServers": {}}'));
    assert.equal(err.kind, 'invalid_argument');
    assert.equal((await rejection(m.callTool(42))).kind, 'invalid_argument');
    assert.equal((await rejection(m.listTools(7))).kind, 'invalid_argument');
    assert.equal((await rejection(m.wait(-1))).kind, 'invalid_argument');
    assert.equal((await rejection(m.respond('m999', {}))).kind, 'not_found');
    // Nothing to wait for: at once.
    assert.deepEqual(await m.wait(1000), { servers: {}, tools: 0 });
    // A server still pending when wait's limit ends: timeout, naming it.
    await m.connect({ mcpServers: { sleepy: { command: 'sh', args: ['-c', 'sleep 3; exec python3 "$1"', 'sh', h.FAULT_SERVER] } } });
    err = await rejection(m.wait(300));
    assert.equal(err.kind, 'timeout');
    assert.match(err.message, /sleepy/);
  });

  test('a script with a manager exits by itself once it is closed (no handle left open)', async () => {
    const script = `
      const { Manager } = require(process.env.MCPLUG);
      (async () => {
        const m = new Manager();
        await m.connect({ mcpServers: { f: { command: 'python3', args: [process.env.FAULT_SERVER] } } });
        const s = await m.wait(20000);
        const r = await m.callTool('mcp__f__echo', { message: 'bye' });
        console.log(s.servers.f.state, r.content[0].text);
        await m.close();
      })().catch((e) => { console.error(e); process.exitCode = 1; });
    `;
    const r = await new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['-e', script], {
        env: { ...process.env, MCPLUG: path.join(h.ROOT, 'bindings', 'node'), FAULT_SERVER: h.FAULT_SERVER },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => { stdout += d; });
      child.stderr.on('data', (d) => { stderr += d; });
      const guard = setTimeout(() => child.kill('SIGKILL'), 30000);
      child.on('error', reject);
      child.on('exit', (code, signal) => {
        clearTimeout(guard);
        resolve({ code, signal, stdout, stderr });
      });
    });
    assert.equal(r.signal, null, `the script had to be killed: ${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'connected Echo: bye\n');
  });
});
