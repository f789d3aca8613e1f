'use strict';
// Server-to-client requests through the fault server's `ask` tool: handlers, the 'request' event
// with respond()/respondError(), error codes, expiry, and what a client without a capability says.

const h = require('./helpers');
const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const { McpError } = h.mcplug;

/** Has the server send `method` to us; resolves with the JSON the server got back. */
async function ask(client, method, params, waitMs = 5000) {
  const r = await client.callTool('ask', { method, params, wait_ms: waitMs }, { timeoutMs: waitMs + 5000 });
  const text = h.textOf(r);
  return text === 'no answer' ? text : JSON.parse(text);
}

describe('server requests', { timeout: 60000 }, () => {
  test('a handler\'s return value is the result; a thrown integer code is kept', async (t) => {
    let calls = 0;
    const client = await h.connect(t, h.faultServer(), {
      connectTimeoutMs: 10000,
      handlers: {
        'sampling/createMessage': async (params, ctx) => {
          calls++;
          assert.equal(ctx.method, 'sampling/createMessage');
          assert.match(ctx.id, /.+/);
          if (params.fail) {
            const e = new Error('declined by the test');
            e.code = -1;
            e.data = { why: 'test' };
            throw e;
          }
          if (params.plain) throw new Error('plain failure');
          return { role: 'assistant', content: { type: 'text', text: `got ${params.n}` }, model: 'm' };
        },
      },
    });
    assert.deepEqual(await ask(client, 'sampling/createMessage', { n: 1 }), {
      result: { role: 'assistant', content: { type: 'text', text: 'got 1' }, model: 'm' },
    });
    assert.deepEqual(await ask(client, 'sampling/createMessage', { fail: true }), {
      error: { code: -1, message: 'declined by the test', data: { why: 'test' } },
    });
    assert.deepEqual(await ask(client, 'sampling/createMessage', { plain: true }), {
      error: { code: -32603, message: 'plain failure' },
    });
    assert.equal(calls, 3);
  });

  test('without a handler, a \'request\' listener answers with respond() / respondError()', async (t) => {
    const client = await h.connect(t, h.faultServer(), {
      connectTimeoutMs: 10000,
      options: { capabilities: { elicitation: {} } },
    });
    const seen = [];
    client.on('request', (req) => {
      seen.push(req);
      if (req.params.decline) client.respondError(req.id, { code: -32042, message: 'no thanks' });
      else client.respond(req.id, { action: 'accept', content: { answer: req.params.q } });
    });
    assert.deepEqual(await ask(client, 'elicitation/create', { q: 'why' }), { result: { action: 'accept', content: { answer: 'why' } } });
    assert.deepEqual(await ask(client, 'elicitation/create', { decline: true }), { error: { code: -32042, message: 'no thanks' } });
    assert.equal(seen.length, 2);
    assert.equal(seen[0].method, 'elicitation/create');
    // An id that is not waiting is invalid_argument.
    const err = await client.respond(seen[0].id, {}).then(() => null, (e) => e);
    assert.ok(err instanceof McpError);
    assert.equal(err.kind, 'invalid_argument');
  });

  test('without handler or listener: -32601; without the capability the library answers itself', async (t) => {
    const declared = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000, options: { capabilities: { sampling: {} } } });
    const a = await ask(declared, 'sampling/createMessage', {});
    assert.equal(a.error.code, -32601);
    assert.match(a.error.message, /no handler/);
    const undeclared = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const b = await ask(undeclared, 'sampling/createMessage', {});
    assert.equal(b.error.code, -32601);
    assert.match(b.error.message, /did not declare the sampling capability/);
    // ping is answered by the library.
    assert.deepEqual(await ask(undeclared, 'ping', {}), { result: {} });
  });

  test('roots given as an option are answered automatically', async (t) => {
    const roots = [{ uri: 'file:///tmp/a', name: 'a' }];
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000, roots });
    assert.deepEqual(await ask(client, 'roots/list', {}), { result: { roots } });
  });

  test('setRoots takes roots/list over from the handler; setRoots(null) gives it back', async (t) => {
    const client = await h.connect(t, h.faultServer(), {
      connectTimeoutMs: 10000,
      handlers: { 'roots/list': () => ({ roots: [{ uri: 'file:///from/handler' }] }) },
    });
    assert.deepEqual(await ask(client, 'roots/list', {}), { result: { roots: [{ uri: 'file:///from/handler' }] } });
    assert.deepEqual(await client.setRoots([{ uri: 'file:///set/later', name: 'later' }]), { notified: true });
    assert.deepEqual(await ask(client, 'roots/list', {}), { result: { roots: [{ uri: 'file:///set/later', name: 'later' }] } });
    assert.deepEqual(await client.setRoots(null), { notified: true });
    assert.deepEqual(await ask(client, 'roots/list', {}), { result: { roots: [{ uri: 'file:///from/handler' }] } });
    const none = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    const e = await none.setRoots([{ uri: 'file:///x' }]).then(() => null, (err) => err);
    assert.equal(e.kind, 'invalid_argument');
    assert.match(e.message, /roots capability/);
  });

  test('a request the host leaves unanswered expires: requestExpired event, server gets an error', async (t) => {
    const client = await h.connect(t, h.faultServer(), {
      connectTimeoutMs: 10000,
      hostRequestTimeoutMs: 300,
      options: { capabilities: { sampling: {} } },
    });
    const requests = [];
    const expired = [];
    client.on('request', (req) => requests.push(req)); // never answers
    client.on('requestExpired', (e) => expired.push(e));
    const answer = await ask(client, 'sampling/createMessage', {}, 5000);
    assert.ok(answer.error, JSON.stringify(answer));
    await h.waitFor(() => expired.length === 1, 3000, 'the requestExpired event');
    assert.equal(expired[0].id, requests[0].id);
    assert.equal(expired[0].method, 'sampling/createMessage');
    assert.equal(requests[0].signal.aborted, true, 'the listener\'s signal aborted');
    assert.equal(requests[0].signal.reason.kind, 'cancelled');
    const late = await client.respond(requests[0].id, {}).then(() => null, (e) => e);
    assert.equal(late.kind, 'invalid_argument');
  });

  test('a throwing listener stops neither the pump nor the other listeners', async (t) => {
    const warnings = [];
    const client = await h.connect(t, h.faultServer(), { connectTimeoutMs: 10000 });
    client.on('handlerError', (e, where) => warnings.push([e.message, where]));
    client.on('stderr', () => { throw new Error('listener boom'); });
    const lines = [];
    client.on('stderr', (l) => lines.push(l));
    await client.callTool('stderr', { line: 'one' });
    await client.callTool('stderr', { line: 'two' });
    await h.waitFor(() => lines.length === 2, 3000, 'both stderr lines');
    assert.deepEqual(lines, ['one', 'two']);
    assert.ok(warnings.some(([m]) => m === 'listener boom'), JSON.stringify(warnings));
    assert.equal(h.textOf(await client.callTool('echo', { message: 'pump ok' })), 'Echo: pump ok');
  });
});
