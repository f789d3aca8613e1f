'use strict';
// Everything a server asks of the host, served by one set of Node handlers (one sync, one async)
// against real peers: server-everything over stdio (the legacy era: real server requests) and
// the Python SDK's 2026-07-28 server (tests/servers/modern_server.py: the same needs come back as
// InputRequiredResult rounds, -32042 errors and tasks). Sampling, elicitation (form with schema
// defaults, URL, the -32042 retry), roots set at connect and later, the log level (connect option
// and setLogLevel), channels, tasks (awaited, as a handle, cancelled, timed out, hosted by the
// client), the round limit; and what goes wrong: a handler that throws, one that returns no
// object, one that never answers (expiry, cancel: its signal aborts and its late answer is
// dropped), an answer for an unknown id, a host without a sampling handler.

const h = require('./helpers');
const { test, describe, before, after } = require('node:test');
const { execFile } = require('child_process');
const path = require('path');
const assert = require('node:assert/strict');
const { McpError, Status, LOG_LEVELS } = h.mcplug;

const SAMPLED = 'pong from the Node host';

/**
 * The host: the same handlers for every server and era. The sampling handler is synchronous,
 * the elicitation handler async; both record what they were asked.
 */
function makeHost() {
  const host = {
    seen: [], // {method, id, params} of every request a handler got
    samplingError: false, // the sampling handler throws (code -1, with data)
    silent: false, // the elicitation handler holds the request until its signal aborts
    aborted: [], // the abort reasons of the handlers' signals
    handlers: null,
  };
  host.handlers = {
    'sampling/createMessage': (params, ctx) => {
      host.seen.push({ method: ctx.method, id: ctx.id, params });
      if (host.samplingError) {
        throw Object.assign(new Error('the user rejected sampling'), { code: -1, data: { by: 'node test' } });
      }
      return { role: 'assistant', content: { type: 'text', text: SAMPLED }, model: 'node-host-model', stopReason: 'endTurn' };
    },
    'elicitation/create': async (params, ctx) => {
      host.seen.push({ method: ctx.method, id: ctx.id, params });
      if (host.silent) {
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
        host.aborted.push(ctx.signal.reason);
        return { action: 'cancel' }; // nobody waits for it any more: dropped by the binding
      }
      if (params.mode === 'url') return { action: 'accept' };
      const message = String(params.message);
      if (message === 'What is your name?') return { action: 'accept', content: { name: 'Ada' } };
      if (message === 'Which colour?') return { action: 'accept', content: { colour: 'teal' } };
      if (message === 'Confirm?') return { action: 'accept', content: { ok: true } };
      if (message.includes('could have multiple interpretations')) return { action: 'accept', content: { interpretation: 'programming' } };
      if (message.includes('(async task demo)')) return { action: 'accept', content: { name: 'Ada', favoriteColor: 'Blue' } };
      // server-everything's big form: two fields only; the library fills in the schema's defaults.
      if (message === 'Please provide inputs for the following fields:') return { action: 'accept', content: { name: 'Ada Lovelace', check: true } };
      throw new Error(`the test host has no answer for ${JSON.stringify(message)}`);
    },
    'roots/list': () => {
      host.seen.push({ method: 'roots/list' });
      return { roots: [{ uri: 'file:///tmp/from-the-node-host', name: 'host' }] };
    },
  };
  host.requests = (method) => host.seen.filter((r) => r.method === method);
  return host;
}

/** Records the client's events by name. */
function record(client, names) {
  const got = {};
  for (const name of names) {
    got[name] = [];
    client.on(name, (...args) => got[name].push(args.length === 1 ? args[0] : args));
  }
  return got;
}

async function rejection(promise) {
  return promise.then((r) => assert.fail(`expected a rejection, got ${JSON.stringify(r)}`), (e) => e);
}

/** The McpError's own fields, for an exact comparison. */
function fields(e) {
  assert.ok(e instanceof McpError, `not an McpError: ${e && e.stack}`);
  return { kind: e.kind, status: e.status, code: e.code, data: e.data, message: e.message };
}

describe('host requests: server-everything (legacy era)', { timeout: 120000 }, () => {
  const host = makeHost();
  let client;
  let events;

  before(async () => {
    client = await h.mcplug.Client.connect(h.everythingServer(), {
      connectTimeoutMs: 20000,
      toolTimeoutMs: 60000,
      handlers: host.handlers,
      capabilities: { elicitation: { url: true } }, // added to the form mode the handler declares
      roots: [{ uri: 'file:///tmp/mcplug-node-root-1', name: 'one' }],
      elicitationDefaults: true,
    });
    events = record(client, ['log', 'requestCancelled', 'requestExpired', 'handlerError']);
  });
  after(() => h.within(10000, client.close(), 'close'));

  test('the handlers and options declared sampling, elicitation (form, url), roots and tasks', async () => {
    assert.equal(client.era, 'legacy');
    const names = (await client.listTools({ timeoutMs: 10000 })).map((t) => t.name);
    for (const tool of ['trigger-sampling-request', 'trigger-elicitation-request', 'trigger-url-elicitation', 'get-roots-list',
      'simulate-research-query', 'trigger-sampling-request-async', 'trigger-elicitation-request-async']) {
      assert.ok(names.includes(tool), `${tool} is not listed: ${names.join(', ')}`);
    }
  });

  test('sampling: the synchronous handler\'s answer reaches the server', async () => {
    const r = await client.callTool('trigger-sampling-request', { prompt: 'ping', maxTokens: 7 });
    const text = h.textOf(r);
    assert.ok(text.startsWith('LLM sampling result: \n'), text);
    assert.deepEqual(JSON.parse(text.slice('LLM sampling result: \n'.length)),
      { role: 'assistant', content: { type: 'text', text: SAMPLED }, model: 'node-host-model', stopReason: 'endTurn' });
    const [req] = host.requests('sampling/createMessage');
    assert.match(req.id, /^s\d+$/);
    assert.equal(req.params.maxTokens, 7);
    assert.deepEqual(req.params.messages[0], { role: 'user', content: { type: 'text', text: 'Resource trigger-sampling-request context: ping' } });
  });

  test('elicitation (form): the async handler\'s answer, with the schema defaults filled in', async () => {
    const r = await client.callTool('trigger-elicitation-request', {});
    assert.equal(h.textOf(r, 0), '✅ User provided the requested information!');
    assert.equal(h.textOf(r, 1), 'User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Favorite Integer: 42\n- Favorite Number: 3.14');
    const raw = JSON.parse(h.textOf(r, 2).replace(/^\nRaw result: /, ''));
    assert.deepEqual(raw.content, {
      name: 'Ada Lovelace',
      check: true,
      firstLine: 'It was a dark and stormy night.',
      integer: 42,
      number: 3.14,
      untitledSingleSelectEnum: 'Monica',
      untitledMultipleSelectEnum: ['Guitar'],
      titledSingleSelectEnum: 'hero-1',
      titledMultipleSelectEnum: ['fish-1'],
      legacyTitledEnum: 'pet-1',
    });
  });

  test('elicitation (URL): the request path, and the -32042 error path retried after the host\'s answer', async () => {
    const first = await client.callTool('trigger-url-elicitation', { url: 'https://example.com/consent' });
    assert.match(h.textOf(first, 0), /^✅ User completed the URL elicitation flow\.\nElicitation ID: [0-9a-f-]{36}\nURL: https:\/\/example\.com\/consent$/);
    const before = host.requests('elicitation/create').length;
    const second = await client.callTool('trigger-url-elicitation', { url: 'https://example.com/second', errorPath: true });
    assert.match(h.textOf(second, 0), /URL: https:\/\/example\.com\/second$/);
    const urls = host.requests('elicitation/create').slice(before).map((q) => [q.params.mode, q.params.url]);
    assert.deepEqual(urls, [['url', 'https://modelcontextprotocol.io'], ['url', 'https://example.com/second']],
      'the -32042 error\'s prerequisite first, then the retry\'s own elicitation');
  });

  test('roots: answered by the library from the connect option; setRoots notifies the server', async () => {
    const one = await client.callTool('get-roots-list', {});
    assert.match(h.textOf(one), /^Current MCP Roots \(1 total\):\n\n1\. one\n {3}URI: file:\/\/\/tmp\/mcplug-node-root-1\n/);
    assert.equal(host.requests('roots/list').length, 0, 'the roots/list handler was not needed');
    assert.deepEqual(await client.setRoots([
      { uri: 'file:///tmp/mcplug-node-root-1', name: 'one' },
      { uri: 'file:///tmp/mcplug-node-root-2', name: 'two' },
    ]), { notified: true });
    // The server asks again, then logs at info (no level set yet: everything comes).
    await h.waitFor(() => events.log.some((p) => p.data === 'Roots updated: 2 root(s) received from client'), 10000, 'the server\'s log');
    assert.deepEqual(events.log.find((p) => /Roots updated: 2/.test(p.data)),
      { level: 'info', logger: 'everything-server', data: 'Roots updated: 2 root(s) received from client' });
    const two = await client.callTool('get-roots-list', {});
    assert.match(h.textOf(two), /^Current MCP Roots \(2 total\):\n\n1\. one\n.*\n\n2\. two\n {3}URI: file:\/\/\/tmp\/mcplug-node-root-2/s);
    const bad = await rejection(client.setRoots([{ uri: 'https://example.com' }]));
    assert.equal(bad.kind, 'invalid_argument');
    assert.match(bad.message, /file:\/\//);
    assert.equal((await rejection(client.setRoots('file:///x'))).kind, 'invalid_argument');
  });

  test('setLogLevel: logging/setLevel filters the server\'s messages', async () => {
    assert.deepEqual(await client.setLogLevel('error'), { level: 'error', sent: 'logging/setLevel' });
    await client.setRoots([{ uri: 'file:///a' }, { uri: 'file:///b' }, { uri: 'file:///c' }]);
    // The server asks for the roots, stores them and logs (or not) in one step: once its tool shows
    // 3 roots, the message was decided at level error.
    const deadline = Date.now() + 10000;
    while (!/\(3 total\)/.test(h.textOf(await client.callTool('get-roots-list', {})))) {
      assert.ok(Date.now() < deadline, 'the server never listed the 3 roots');
      await h.sleep(20);
    }
    await h.sleep(100);
    assert.ok(!events.log.some((p) => /Roots updated: 3/.test(p.data)), 'at level error, no info message');
    assert.deepEqual(await client.setLogLevel('info'), { level: 'info', sent: 'logging/setLevel' });
    await client.setRoots([{ uri: 'file:///a' }, { uri: 'file:///b' }, { uri: 'file:///c' }, { uri: 'file:///d' }]);
    await h.waitFor(() => events.log.some((p) => p.data === 'Roots updated: 4 root(s) received from client'), 10000, 'the info message at level info');

    const loud = await rejection(client.setLogLevel('loud'));
    assert.equal(loud.kind, 'invalid_argument');
    assert.match(loud.message, /debug, info, notice, warning, error, critical, alert, emergency/);

    await client.setLogLevel('debug');
    const before = events.log.length;
    await client.callTool('toggle-simulated-logging', {}); // sends one message at once, at a random level
    await h.waitFor(() => events.log.length > before, 10000, 'a simulated log message');
    const simulated = events.log[before];
    assert.ok(LOG_LEVELS.includes(simulated.level), JSON.stringify(simulated));
    assert.match(simulated.data, /^(Debug|Info|Notice|Warning|Error|Critical|Emergency)-level message|^Alert level-message/);
    await client.callTool('toggle-simulated-logging', {});
  });

  test('tasks: a tool that requires one is awaited; its elicitation reaches the handler', async () => {
    const r = await client.callTool('simulate-research-query', { topic: 'rust' });
    const text = h.textOf(r);
    assert.ok(text.startsWith('# Research Report: rust\n'), text.slice(0, 100));
    assert.ok(text.includes('- Stage 4: Generating report ✓'), text);
    assert.equal(typeof r._meta['io.modelcontextprotocol/related-task'].taskId, 'string', 'the result is the task\'s');

    const ambiguous = await client.callTool('simulate-research-query', { topic: 'python', ambiguous: true });
    assert.ok(h.textOf(ambiguous).includes('- **Clarification**: programming'), h.textOf(ambiguous));
    const asked = host.requests('elicitation/create').find((q) => /multiple interpretations/.test(q.params.message));
    assert.equal(typeof asked.params._meta['io.modelcontextprotocol/related-task'].taskId, 'string', 'the elicitation names its task');
  });

  test('tasks: task \'handle\' gives the task itself, followed with tasks/get and tasks/cancel', async () => {
    const created = await client.callTool('simulate-research-query', { topic: 'handles' }, { task: 'handle', taskTtlMs: 120000 });
    assert.equal(created.task.status, 'working');
    const { taskId } = created.task;
    assert.match(taskId, /.+/);
    const got = await client.request('tasks/get', { taskId });
    assert.equal(got.taskId, taskId);
    const cancelled = await client.request('tasks/cancel', { taskId });
    assert.equal(cancelled.status, 'cancelled');
    assert.equal((await rejection(client.callTool('echo', { message: 'x' }, { task: 'sometimes' }))).kind, 'invalid_argument');
    assert.equal((await rejection(client.callTool('echo', { message: 'x' }, { taskTtlMs: 0 }))).kind, 'invalid_argument');
  });

  test('tasks: aborting the awaited call sends tasks/cancel; a timeout does too', async () => {
    const controller = new AbortController();
    const call = h.outcome(client.callTool('simulate-research-query', { topic: 'cancel me' }, { signal: controller.signal }));
    await h.sleep(1500);
    const t0 = Date.now();
    controller.abort();
    const o = await call;
    assert.equal(o.ok, false);
    assert.equal(o.error.kind, 'cancelled');
    assert.match(o.error.message, /^tools\/call simulate-research-query was cancelled by the host; its task ".+" was sent tasks\/cancel$/);
    assert.ok(Date.now() - t0 < 2000, `cancelled at once (${Date.now() - t0} ms)`);

    const slow = await rejection(client.callTool('simulate-research-query', { topic: 'too slow' }, { timeoutMs: 1200 }));
    assert.equal(slow.kind, 'timeout');
    assert.match(slow.message, /tasks\/cancel/);
    // The handle's task, the aborted one and the timed-out one (tasks/cancel is sent, not awaited).
    let statuses;
    await h.waitFor(async () => {
      statuses = (await client.request('tasks/list')).tasks.map((t) => t.status);
      return statuses.filter((s) => s === 'cancelled').length === 3;
    }, 3000, 'three cancelled tasks in tasks/list').catch((e) => assert.fail(`${e.message}: ${JSON.stringify(statuses)}`));
  });

  test('client-hosted tasks: the server\'s task-augmented sampling and elicitation, served by the same handlers', async () => {
    const sampled = await client.callTool('trigger-sampling-request-async', { prompt: 'async ping' });
    const text = h.textOf(sampled);
    assert.ok(text.startsWith('[COMPLETED] Async sampling completed!'), text);
    assert.ok(text.includes(SAMPLED), text);
    assert.ok(host.requests('sampling/createMessage').some((q) => q.params.messages[0].content.text.includes('async ping')));
    const elicited = await client.callTool('trigger-elicitation-request-async', {});
    assert.equal(h.textOf(elicited, 0), '[COMPLETED] User provided the requested information!');
    assert.equal(h.textOf(elicited, 1), 'User inputs:\n- Name: Ada\n- Favorite Color: Blue');
  });

  test('an answer for an id nobody waits for is invalid_argument, naming it', async () => {
    const unknown = await rejection(client.respond('s999999', {}));
    assert.equal(unknown.kind, 'invalid_argument');
    assert.match(unknown.message, /"s999999"/);
    const answered = host.requests('sampling/createMessage')[0].id;
    const again = await rejection(client.respondError(answered, { code: -1, message: 'late' }));
    assert.equal(again.kind, 'invalid_argument');
    assert.match(again.message, /already answered/);
    assert.deepEqual(events.handlerError, [], 'no handler failed along the way');
    assert.deepEqual(events.requestExpired, []);
  });
});

describe('host requests: the handlers going wrong (legacy era)', { timeout: 60000 }, () => {
  /** Has the fault server send `method` to us; resolves with what it got back. */
  async function ask(client, method, params) {
    const r = await client.callTool('ask', { method, params, wait_ms: 5000 }, { timeoutMs: 10000 });
    return JSON.parse(h.textOf(r));
  }

  test('a handler that throws or rejects is a JSON-RPC error to the server, never a hang', async (t) => {
    const client = await h.connect(t, h.faultServer(), {
      connectTimeoutMs: 10000,
      handlers: {
        'sampling/createMessage': (params) => {
          if (params.how === 'throw') throw Object.assign(new Error('sync refusal'), { code: -7, data: { n: 1 } });
          if (params.how === 'string') throw 'a thrown string'; // eslint-disable-line no-throw-literal
          if (params.how === 'array') return [1, 2];
          if (params.how === 'bigint') return { n: 1n };
          return { role: 'assistant', content: { type: 'text', text: 'fine' }, model: 'm' };
        },
        'elicitation/create': async () => {
          await h.sleep(10);
          throw new Error('async refusal');
        },
      },
    });
    assert.deepEqual(await ask(client, 'sampling/createMessage', { how: 'throw' }), { error: { code: -7, message: 'sync refusal', data: { n: 1 } } });
    assert.deepEqual(await ask(client, 'sampling/createMessage', { how: 'string' }), { error: { code: -32603, message: 'a thrown string' } });
    assert.deepEqual(await ask(client, 'sampling/createMessage', { how: 'array' }),
      { error: { code: -32603, message: 'the sampling/createMessage handler returned an array, not a result object' } });
    const big = await ask(client, 'sampling/createMessage', { how: 'bigint' });
    assert.equal(big.error.code, -32603);
    assert.match(big.error.message, /^the sampling\/createMessage handler returned a value that is not JSON/);
    assert.deepEqual(await ask(client, 'elicitation/create', {}), { error: { code: -32603, message: 'async refusal' } });
    assert.deepEqual(await ask(client, 'sampling/createMessage', {}), { result: { role: 'assistant', content: { type: 'text', text: 'fine' }, model: 'm' } });
  });

  test('no sampling handler: sampling is not declared, and a server asking anyway gets -32601', async (t) => {
    const client = await h.connect(t, h.faultServer(), {
      connectTimeoutMs: 10000,
      handlers: { 'elicitation/create': () => ({ action: 'decline' }) },
    });
    const asked = await ask(client, 'sampling/createMessage', { messages: [] });
    assert.equal(asked.error.code, -32601);
    assert.match(asked.error.message, /did not declare the sampling capability/);
    assert.deepEqual(await ask(client, 'elicitation/create', { message: 'm', requestedSchema: { type: 'object', properties: {} } }),
      { result: { action: 'decline' } });

    const everything = await h.connect(t, h.everythingServer(), {
      connectTimeoutMs: 20000,
      handlers: { 'elicitation/create': () => ({ action: 'decline' }) },
      tasks: false,
    });
    const names = (await everything.listTools()).map((x) => x.name);
    assert.ok(!names.includes('trigger-sampling-request'), names.join(', '));
    assert.ok(names.includes('trigger-elicitation-request'), names.join(', '));
    assert.ok(!names.includes('get-roots-list'), names.join(', '));
    assert.ok(!names.includes('trigger-url-elicitation'), 'form mode only');
  });

  test('connect options are checked, naming the option', async () => {
    const cases = [
      [{ logLevel: 'loud' }, /`logLevel` must be one of debug, .*emergency/],
      [{ tasks: 'yes' }, /`tasks` must be true or false/],
      [{ maxInputRounds: 0 }, /`maxInputRounds` must be a positive integer/],
      [{ elicitationDefaults: 1 }, /`elicitationDefaults` must be true or false/],
      [{ validateArguments: 'no' }, /`validateArguments` must be true or false/],
      [{ capabilities: [] }, /`capabilities` must be an object/],
      [{ capabilities: { elicitation: { form: false } } }, /elicitation.*neither `form` nor `url`/],
    ];
    for (const [opts, message] of cases) {
      const e = await rejection(h.mcplug.Client.connect(h.faultServer(), { connectTimeoutMs: 10000, ...opts }));
      assert.equal(e.kind, 'invalid_argument', JSON.stringify(opts));
      assert.match(e.message, message, JSON.stringify(opts));
    }
  });
});

describe('host requests: the Python SDK server (2026-07-28, InputRequiredResult)', { timeout: 120000 }, () => {
  const host = makeHost();
  let client;
  let events;

  before(async () => {
    client = await h.mcplug.Client.connect(h.modernServer(), {
      connectTimeoutMs: 20000,
      toolTimeoutMs: 30000,
      handlers: host.handlers,
      roots: [{ uri: 'file:///tmp/modern-a', name: 'a' }],
      maxInputRounds: 3,
    });
    events = record(client, ['log', 'channel', 'channelPermission', 'requestCancelled', 'requestExpired', 'handlerError']);
  });
  after(() => h.within(10000, client.close(), 'close'));

  test('elicitation and sampling through InputRequiredResult, served by the same handlers', async () => {
    assert.equal(client.era, 'modern');
    assert.equal(h.textOf(await client.callTool('greet', {})), 'Hello, Ada!');
    const [asked] = host.requests('elicitation/create');
    assert.deepEqual(asked.params, {
      message: 'What is your name?',
      mode: 'form',
      requestedSchema: { properties: { name: { title: 'Name', type: 'string' } }, required: ['name'], type: 'object' },
    });
    assert.equal(h.textOf(await client.callTool('summarize', { text: 'a long story' })), `model said: ${SAMPLED}`);
    assert.deepEqual(host.requests('sampling/createMessage')[0].params,
      { maxTokens: 50, messages: [{ content: { text: 'Summarize: a long story', type: 'text' }, role: 'user' }] });

    const before = host.seen.length;
    assert.equal(h.textOf(await client.callTool('greet_and_sample', { text: 'both' })), `Hello, Ada; model said: ${SAMPLED}`);
    assert.deepEqual(host.seen.slice(before).map((q) => q.method).sort(), ['elicitation/create', 'sampling/createMessage'], 'two requests in one round');
  });

  test('requestState comes back untouched, the retry has a new id', async () => {
    const text = h.textOf(await client.callTool('state_echo', {}));
    const m = /^state ok; action accept; ids (\d+) (\d+)$/.exec(text);
    assert.ok(m, text);
    assert.notEqual(m[1], m[2]);
  });

  test('roots: answered by the library; setRoots changes them (no notification in this era)', async () => {
    assert.equal(h.textOf(await client.callTool('list_roots', {})), 'roots: file:///tmp/modern-a');
    assert.deepEqual(await client.setRoots({ roots: [{ uri: 'file:///tmp/modern-b' }, { uri: 'file:///tmp/modern-c' }] }), { notified: false });
    assert.equal(h.textOf(await client.callTool('list_roots', {})), 'roots: file:///tmp/modern-b, file:///tmp/modern-c');
    assert.equal(host.requests('roots/list').length, 0);
  });

  test('the round limit (maxInputRounds 3) ends a server that never stops asking', async () => {
    const e = await rejection(client.callTool('endless', {}));
    assert.equal(e.kind, 'protocol');
    assert.equal(e.message, 'tools/call: the server still asked for more input after 3 rounds; stopping (connection option `max_input_rounds`)');
    assert.equal(h.textOf(await client.callTool('echo', { message: 'still here' })), 'Echo: still here');
  });

  test('logging: nothing until a level is set, then per request at that level', async () => {
    await client.callTool('log_levels', {});
    await h.sleep(200);
    assert.deepEqual(events.log, []);
    assert.deepEqual(await client.setLogLevel('info'), { level: 'info', sent: 'per request' });
    await client.callTool('log_levels', {});
    await h.waitFor(() => events.log.length >= 2, 5000, 'two log messages');
    await h.sleep(200);
    assert.deepEqual(events.log, [{ level: 'info', data: 'info line' }, { level: 'warning', data: 'warning line' }]);
  });

  test('channels: a channel message and the permission reply arrive as events', async () => {
    await client.callTool('channel_push', { text: 'hello from the channel' });
    await h.waitFor(() => events.channel.length === 1, 5000, 'the channel event');
    assert.deepEqual(events.channel, [{ content: 'hello from the channel', meta: { chat_id: '42' } }]);
    await client.notify('notifications/claude/channel/permission_request',
      { request_id: 'abcde', tool_name: 'Bash', description: 'list', input_preview: 'ls' });
    await h.waitFor(() => events.channelPermission.length === 1, 5000, 'the permission reply');
    assert.deepEqual(events.channelPermission, [{ request_id: 'abcde', behavior: 'allow' }]);
  });

  test('tasks (the io.modelcontextprotocol/tasks extension): awaited, with input, as a handle, timed out', async () => {
    const slow = await client.callTool('slow_task', { ms: 300 });
    assert.equal(h.textOf(slow), 'slow done');
    assert.notEqual(slow.resultType, 'task');
    assert.equal(h.textOf(await client.callTool('ask_task', {})), 'colour: teal');
    assert.ok(host.requests('elicitation/create').some((q) => q.params.message === 'Which colour?'));
    const handle = await client.callTool('slow_task', { ms: 100 }, { task: 'handle' });
    assert.equal(handle.resultType, 'task');
    assert.match(handle.taskId, /^[0-9a-f-]{36}$/);
    assert.equal(handle.status, 'working');
    const e = await rejection(client.callTool('forever_task', {}, { timeoutMs: 500 }));
    assert.equal(e.kind, 'timeout');
    assert.match(e.message, /tasks\/cancel/);
    await h.waitFor(async () => /^[0-9a-f-]{36}/.test(h.textOf(await client.callTool('cancelled_tasks', {}))), 3000, 'the server to record tasks/cancel');
  });

  test('a handler that throws: the call fails with kind \'denied\', keeping its code and data', async () => {
    host.samplingError = true;
    try {
      const e = await rejection(client.callTool('summarize', { text: 'no' }));
      assert.deepEqual(fields(e), {
        kind: 'denied',
        status: Status.DENIED,
        code: -1,
        data: { by: 'node test' },
        message: 'the host answered the server\'s sampling/createMessage with an error: the user rejected sampling',
      });
    } finally {
      host.samplingError = false;
    }
  });

  test('a call cancelled while its handler holds the input request: requestCancelled, the handler\'s signal aborts', async () => {
    host.silent = true;
    try {
      const controller = new AbortController();
      const before = host.seen.length;
      const call = h.outcome(client.callTool('greet', {}, { signal: controller.signal }));
      await h.waitFor(() => host.seen.length > before, 5000, 'the handler to get the request');
      const held = host.seen[before];
      controller.abort();
      const o = await h.within(5000, call, 'the cancelled call');
      assert.equal(o.ok, false);
      assert.equal(o.error.kind, 'cancelled');
      await h.waitFor(() => events.requestCancelled.length === 1, 3000, 'requestCancelled');
      assert.deepEqual(events.requestCancelled, [{ id: held.id, method: 'elicitation/create', reason: 'the call was cancelled by the host' }]);
      await h.waitFor(() => host.aborted.length === 1, 3000, 'the handler\'s signal');
      assert.equal(host.aborted[0].kind, 'cancelled');
      await h.sleep(100);
      assert.deepEqual(events.handlerError, [], 'the late answer was dropped, not reported');
    } finally {
      host.silent = false;
      host.aborted.length = 0;
    }
    assert.equal(h.textOf(await client.callTool('greet', {})), 'Hello, Ada!');
  });

  test('a handler that never answers: the host timer ends the call, requestExpired, the signal aborts', async (t) => {
    const slowHost = makeHost();
    slowHost.silent = true;
    const c = await h.connect(t, h.modernServer(), { connectTimeoutMs: 20000, handlers: slowHost.handlers, hostRequestTimeoutMs: 400 });
    const expired = [];
    const handlerErrors = [];
    c.on('requestExpired', (e) => expired.push(e));
    c.on('handlerError', (e) => handlerErrors.push(e));
    const e = await rejection(h.within(5000, c.callTool('greet', {}), 'greet'));
    assert.equal(e.kind, 'timeout');
    assert.match(e.message, /did not answer elicitation\/create within 400 ms/);
    await h.waitFor(() => expired.length === 1 && slowHost.aborted.length === 1, 3000, 'requestExpired and the abort');
    assert.deepEqual(expired, [{ id: slowHost.seen[0].id, method: 'elicitation/create' }]);
    assert.equal(slowHost.aborted[0].kind, 'cancelled');
    await h.sleep(100);
    assert.deepEqual(handlerErrors, []);
  });

  test('no sampling handler: a server asking anyway fails the call; the SDK\'s own check says -32021', async (t) => {
    const c = await h.connect(t, h.modernServer(), {
      connectTimeoutMs: 20000,
      handlers: { 'elicitation/create': host.handlers['elicitation/create'] },
    });
    const anyway = await rejection(c.callTool('sample_anyway', {}));
    assert.equal(anyway.kind, 'protocol');
    assert.match(anyway.message, /did not declare the sampling capability/);
    const summarize = await rejection(c.callTool('summarize', { text: 'x' }));
    assert.equal(summarize.kind, 'rpc');
    assert.equal(summarize.code, -32021);
    assert.equal(h.textOf(await c.callTool('greet', {})), 'Hello, Ada!');
  });

  test('the same server held to 2025-11-25: the same handlers answer real server requests', async (t) => {
    const legacyHost = makeHost();
    const c = await h.connect(t, h.modernServer(), { connectTimeoutMs: 20000, handlers: legacyHost.handlers, protocolVersions: ['2025-11-25'] });
    assert.equal(c.era, 'legacy');
    assert.equal(h.textOf(await c.callTool('greet', {})), 'Hello, Ada!');
    assert.equal(h.textOf(await c.callTool('summarize', { text: 'legacy' })), `model said: ${SAMPLED}`);
    assert.deepEqual(legacyHost.seen.map((q) => q.method), ['elicitation/create', 'sampling/createMessage']);
  });

  test('channel messages only from a server that declared claude/channel', async (t) => {
    const server = h.modernServer();
    server.args.push('--no-channel');
    const c = await h.connect(t, server, { connectTimeoutMs: 20000 });
    const seen = [];
    c.on('channel', (p) => seen.push(p));
    c.on('notification', (n) => seen.push(n));
    assert.equal(h.textOf(await c.callTool('channel_push', { text: 'sneaky' })), 'pushed');
    await h.sleep(500);
    assert.deepEqual(seen, []);
  });
});

describe('examples/node/host.js', { timeout: 60000 }, () => {
  const run = (args) => new Promise((resolve) => {
    execFile(process.execPath, [path.join(h.ROOT, 'examples', 'node', 'host.js'), ...args],
      { cwd: h.ROOT, timeout: 45000, env: process.env }, (error, stdout, stderr) => resolve({ error, stdout, stderr }));
  });

  test('serves server-everything and the 2026-07-28 server with the same handlers', async () => {
    const [legacy, modern] = await Promise.all([run([]), run([h.modernServer().command, ...h.modernServer().args])]);
    assert.equal(legacy.error, null, legacy.stderr);
    const lines = legacy.stdout.split('\n');
    assert.equal(lines[0], 'connected: mcp-servers/everything legacy 2025-11-25');
    assert.ok(lines.includes('sampling -> olleh :txetnoc tseuqer-gnilpmas-reggirt ecruoseR'), legacy.stdout);
    assert.ok(lines.includes('elicitation -> User inputs: - Name: Ada Lovelace - Agreed to terms: true - Favorite Integer: 42 - Favorite Number: 3.14'), legacy.stdout);
    assert.ok(lines.includes('[server log info] Roots updated: 2 root(s) received from client'), legacy.stdout);
    assert.ok(lines.includes('task -> # Research Report: MCP'), legacy.stdout);
    assert.equal(modern.error, null, modern.stderr);
    assert.equal(modern.stdout, 'connected: modern-test-server modern 2026-07-28\n[host] form: What is your name?\n' +
      'greet -> Hello, Ada Lovelace!\nsummarize -> model said: olleh :ezirammuS\n');
  });
});
