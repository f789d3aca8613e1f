'use strict';
// server-everything through the Node binding, over stdio, Streamable HTTP and HTTP+SSE (the first
// suite runs once per transport): every always-offered tool called with valid arguments and its
// result checked against the tool's source, the generic requests, progress, log messages as
// events, and server requests answered by handlers.

const h = require('./helpers');
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const net = require('net');
const path = require('path');
const { spawn } = require('child_process');
const zlib = require('zlib');
const { McpError } = h.mcplug;

const ALWAYS_OFFERED = [
  'echo', 'get-sum', 'get-structured-content', 'get-annotated-message', 'get-resource-links',
  'get-resource-reference', 'get-tiny-image', 'gzip-file-as-resource', 'trigger-long-running-operation',
  'toggle-simulated-logging', 'toggle-subscriber-updates', 'get-env',
];
const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

/** The exact base64 PNG the server embeds (read from its source, not copied here). */
function tinyImage() {
  const source = fs.readFileSync(path.join(h.EVERYTHING_TOOLS, 'get-tiny-image.js'), 'utf8');
  const m = source.match(/MCP_TINY_IMAGE\s*=\s*"([A-Za-z0-9+/=]+)"/);
  assert.ok(m, 'MCP_TINY_IMAGE not found in get-tiny-image.js');
  return m[1];
}

/** A free TCP port on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** server-everything in an HTTP mode on its own port, with the env; resolves once it listens. */
async function startHttpPeer(mode, env) {
  const port = await freePort();
  const child = spawn(process.execPath, [h.everythingServer().args[0], mode], {
    env: { ...process.env, ...env, PORT: String(port) }, stdio: 'ignore',
  });
  await h.waitFor(() => new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('connect', () => { s.destroy(); resolve(true); });
    s.on('error', () => resolve(false));
  }), 20000, `server-everything ${mode} listening on ${port}`);
  return { child, port };
}

for (const transport of ['stdio', 'http', 'sse']) describe(`server-everything (legacy era, ${transport})`, { timeout: 60000 }, () => {
  let client;
  let peer;
  const notifications = [];
  const stderr = [];
  const env = { MCPLUG_NODE_TEST_MARK: 'marker-4711' };

  before(async () => {
    let server = { ...h.everythingServer(), env };
    if (transport !== 'stdio') {
      const [mode, where] = transport === 'http' ? ['streamableHttp', '/mcp'] : ['sse', '/sse'];
      peer = await startHttpPeer(mode, env);
      server = { type: transport, url: `http://127.0.0.1:${peer.port}${where}`, name: 'everything' };
    }
    client = await h.within(20000, h.mcplug.Client.connect(
      server, { connectTimeoutMs: 15000, requestTimeoutMs: 15000 },
    ), 'connect to server-everything');
    client.on('notification', (n) => notifications.push(n));
    client.on('stderr', (line) => stderr.push(line));
  });

  after(async () => {
    if (client) await h.within(10000, client.close(), 'close');
    if (peer) peer.child.kill('SIGKILL');
  });

  test('negotiates 2025-11-25 (legacy era) and reports the server', () => {
    assert.equal(client.era, 'legacy');
    assert.equal(client.protocolVersion, '2025-11-25');
    assert.equal(client.serverInfo.name, 'mcp-servers/everything');
    assert.equal(typeof client.serverInfo.version, 'string');
    assert.ok(client.capabilities.tools, 'tools capability');
    assert.ok(client.capabilities.resources, 'resources capability');
    assert.ok(client.capabilities.prompts, 'prompts capability');
    assert.equal(client.connectResult.result.protocolVersion, '2025-11-25');
    assert.equal(client.state, 'open');
  });

  test('lists every always-offered tool with its schema', async () => {
    const tools = await client.listTools({ timeoutMs: 10000 });
    assert.ok(Array.isArray(tools));
    const names = tools.map((t) => t.name);
    for (const name of ALWAYS_OFFERED) assert.ok(names.includes(name), `${name} missing from ${names}`);
    const structured = tools.find((t) => t.name === 'get-structured-content');
    assert.equal(structured.outputSchema.type, 'object');
    assert.deepEqual(Object.keys(structured.outputSchema.properties).sort(), ['conditions', 'humidity', 'temperature']);
    const echo = tools.find((t) => t.name === 'echo');
    assert.equal(echo.inputSchema.properties.message.type, 'string');
    assert.equal(echo.annotations.readOnlyHint, true);
  });

  test('echo', async () => {
    const r = await client.callTool('echo', { message: 'hello mcplug ✓ ünïcödé 🚀' });
    assert.deepEqual(r.content, [{ type: 'text', text: 'Echo: hello mcplug ✓ ünïcödé 🚀' }]);
    assert.notEqual(r.isError, true);
  });

  test('get-sum', async () => {
    const r = await client.callTool('get-sum', { a: 2, b: 3.5 });
    assert.equal(h.textOf(r), 'The sum of 2 and 3.5 is 5.5.');
  });

  test('get-structured-content: structured content matching the output schema', async () => {
    const r = await client.callTool('get-structured-content', { location: 'Chicago' });
    const weather = { temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 };
    assert.deepEqual(r.structuredContent, weather);
    assert.deepEqual(JSON.parse(h.textOf(r)), weather);
  });

  test('get-annotated-message: annotations on text and image', async () => {
    const r = await client.callTool('get-annotated-message', { messageType: 'error', includeImage: true });
    assert.equal(r.content.length, 2);
    assert.deepEqual(r.content[0], {
      type: 'text',
      text: 'Error: Operation failed',
      annotations: { priority: 1, audience: ['user', 'assistant'] },
    });
    assert.equal(r.content[1].type, 'image');
    assert.equal(r.content[1].mimeType, 'image/png');
    assert.equal(r.content[1].data, tinyImage());
    assert.deepEqual(r.content[1].annotations, { priority: 0.5, audience: ['user'] });
    const debug = await client.callTool('get-annotated-message', { messageType: 'debug' });
    assert.deepEqual(debug.content, [{
      type: 'text',
      text: 'Debug: Cache hit ratio 0.95, latency 150ms',
      annotations: { priority: 0.3, audience: ['assistant'] },
    }]);
  });

  test('get-resource-links: resource_link blocks', async () => {
    const r = await client.callTool('get-resource-links', { count: 3 });
    assert.equal(r.content.length, 4);
    assert.deepEqual(r.content[0], { type: 'text', text: 'Here are 3 resource links to resources available in this server:' });
    // Odd ids are blob resources, even ids text resources (the tool's own naming).
    assert.deepEqual(r.content[1], {
      type: 'resource_link',
      uri: 'demo://resource/dynamic/blob/1',
      name: 'Blob Resource 1',
      description: 'Resource 1: plaintext resource',
      mimeType: 'text/plain',
    });
    assert.deepEqual(r.content[2], {
      type: 'resource_link',
      uri: 'demo://resource/dynamic/text/2',
      name: 'Text Resource 2',
      description: 'Resource 2: plaintext resource',
      mimeType: 'text/plain',
    });
    assert.equal(r.content[3].uri, 'demo://resource/dynamic/blob/3');
  });

  test('get-resource-reference: an embedded resource', async () => {
    const r = await client.callTool('get-resource-reference', { resourceType: 'Text', resourceId: 2 });
    assert.equal(r.content.length, 3);
    assert.equal(h.textOf(r, 0), 'Returning resource reference for Resource 2:');
    assert.equal(r.content[1].type, 'resource');
    assert.equal(r.content[1].resource.uri, 'demo://resource/dynamic/text/2');
    assert.equal(r.content[1].resource.mimeType, 'text/plain');
    assert.match(r.content[1].resource.text, /^Resource 2: This is a plaintext resource created at /);
    assert.equal(h.textOf(r, 2), 'You can access this resource using the URI: demo://resource/dynamic/text/2');
    const blob = await client.callTool('get-resource-reference', { resourceType: 'Blob', resourceId: 5 });
    const decoded = Buffer.from(blob.content[1].resource.blob, 'base64').toString('utf8');
    assert.match(decoded, /^Resource 5: This is a base64 blob created at /);
  });

  test('get-tiny-image: a PNG image block between two texts', async () => {
    const r = await client.callTool('get-tiny-image', {});
    assert.equal(r.content.length, 3);
    assert.equal(h.textOf(r, 0), "Here's the image you requested:");
    assert.equal(r.content[1].type, 'image');
    assert.equal(r.content[1].mimeType, 'image/png');
    assert.equal(r.content[1].data, tinyImage());
    const png = Buffer.from(r.content[1].data, 'base64');
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.equal(h.textOf(r, 2), 'The image above is the MCP logo.');
  });

  test('gzip-file-as-resource: embedded gzip blob, and a link readable with resources/read', async () => {
    const payload = 'hello from the mcplug node tests\n'.repeat(20);
    const data = `data:text/plain;base64,${Buffer.from(payload).toString('base64')}`;
    const embedded = await client.callTool('gzip-file-as-resource', { name: 'embedded.txt.gz', data, outputType: 'resource' });
    assert.equal(embedded.content.length, 1);
    const res = embedded.content[0].resource;
    assert.equal(embedded.content[0].type, 'resource');
    assert.equal(res.uri, 'demo://resource/session/embedded.txt.gz');
    assert.equal(res.mimeType, 'application/gzip');
    assert.equal(zlib.gunzipSync(Buffer.from(res.blob, 'base64')).toString('utf8'), payload);

    const linked = await client.callTool('gzip-file-as-resource', { name: 'linked.txt.gz', data, outputType: 'resourceLink' });
    assert.equal(linked.content[0].type, 'resource_link');
    assert.equal(linked.content[0].uri, 'demo://resource/session/linked.txt.gz');
    const read = await client.request('resources/read', { uri: linked.content[0].uri });
    assert.equal(zlib.gunzipSync(Buffer.from(read.contents[0].blob, 'base64')).toString('utf8'), payload);
  });

  test('trigger-long-running-operation: progress reaches onProgress before the result', async () => {
    const progress = [];
    const r = await client.callTool('trigger-long-running-operation', { duration: 0.3, steps: 3 }, {
      timeoutMs: 15000,
      onProgress: (p) => progress.push(p),
    });
    assert.equal(h.textOf(r), 'Long running operation completed. Duration: 0.3 seconds, Steps: 3.');
    assert.deepEqual(progress.map((p) => [p.progress, p.total]), [[1, 3], [2, 3], [3, 3]]);
    // Each carries the token mcplug put in the request's _meta.
    assert.equal(new Set(progress.map((p) => p.progressToken)).size, 1);
  });

  test('toggle-simulated-logging: log messages arrive as notification events', async () => {
    const seen = notifications.length;
    const started = await client.callTool('toggle-simulated-logging', {});
    assert.match(h.textOf(started), /^Started simulated, random-leveled logging for session /);
    // The server sends one message at once, then one every 5 s.
    const log = await h.waitFor(
      () => notifications.slice(seen).find((n) => n.method === 'notifications/message'),
      5000, 'a notifications/message event');
    assert.ok(LOG_LEVELS.includes(log.params.level), `level ${log.params.level}`);
    assert.match(log.params.data, /^(Debug|Info|Notice|Warning|Error|Critical|Emergency)-level message|^Alert level-message/);
    const stopped = await client.callTool('toggle-simulated-logging', {});
    assert.match(h.textOf(stopped), /^Stopped simulated logging for session /);
  });

  test('toggle-subscriber-updates: resources/subscribe, then updated notifications', async () => {
    const uri = 'demo://resource/static/document/features.md';
    const seen = notifications.length;
    assert.deepEqual(await client.request('resources/subscribe', { uri }), {});
    const started = await client.callTool('toggle-subscriber-updates', {});
    assert.match(h.textOf(started), /^Started simulated resource updated notifications for session /);
    const updated = await h.waitFor(
      () => notifications.slice(seen).find((n) => n.method === 'notifications/resources/updated'),
      5000, 'a notifications/resources/updated event');
    assert.equal(updated.params.uri, uri);
    const ack = notifications.slice(seen).find((n) => n.method === 'notifications/message');
    assert.ok(ack, 'the subscribe acknowledgement log message');
    assert.match(ack.params.data, /^Received Subscribe Resource request for URI: demo:\/\/resource\/static\/document\/features\.md/);
    const stopped = await client.callTool('toggle-subscriber-updates', {});
    assert.match(h.textOf(stopped), /^Stopped simulated resource updates for session /);
    assert.deepEqual(await client.request('resources/unsubscribe', { uri }), {});
  });

  test('get-env: the server entry\'s env reached the server', async () => {
    const r = await client.callTool('get-env', {});
    const env = JSON.parse(h.textOf(r));
    assert.equal(env.MCPLUG_NODE_TEST_MARK, 'marker-4711');
  });

  test('resources/list and resources/read through the generic request', async () => {
    const docs = fs.readdirSync(path.join(path.dirname(h.EVERYTHING), 'docs')).sort();
    const list = await client.request('resources/list', {});
    const uris = list.resources.map((r) => r.uri);
    for (const doc of docs) assert.ok(uris.includes(`demo://resource/static/document/${doc}`), `${doc} not listed`);
    const all = await client.request('resources/list', {}, { allPages: true });
    assert.ok(Array.isArray(all.resources) && all.resources.length >= docs.length);

    const uri = 'demo://resource/static/document/architecture.md';
    const read = await client.request('resources/read', { uri });
    assert.equal(read.contents.length, 1);
    assert.equal(read.contents[0].uri, uri);
    assert.equal(read.contents[0].mimeType, 'text/markdown');
    assert.equal(read.contents[0].text, fs.readFileSync(path.join(path.dirname(h.EVERYTHING), 'docs', 'architecture.md'), 'utf8'));

    const dynamic = await client.request('resources/read', { uri: 'demo://resource/dynamic/text/7' });
    assert.match(dynamic.contents[0].text, /^Resource 7: This is a plaintext resource created at /);
  });

  test('resources/templates/list', async () => {
    const r = await client.request('resources/templates/list', {});
    const templates = r.resourceTemplates.map((t) => t.uriTemplate).sort();
    assert.deepEqual(templates, ['demo://resource/dynamic/blob/{resourceId}', 'demo://resource/dynamic/text/{resourceId}']);
  });

  test('prompts/list and prompts/get', async () => {
    const list = await client.request('prompts/list');
    assert.deepEqual(list.prompts.map((p) => p.name).sort(), ['args-prompt', 'completable-prompt', 'resource-prompt', 'simple-prompt']);
    const args = list.prompts.find((p) => p.name === 'args-prompt').arguments;
    assert.deepEqual(args.map((a) => [a.name, a.required]), [['city', true], ['state', false]]);

    const simple = await client.request('prompts/get', { name: 'simple-prompt' });
    assert.deepEqual(simple.messages, [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt without arguments.' } }]);
    const withArgs = await client.request('prompts/get', { name: 'args-prompt', arguments: { city: 'Paris', state: 'TX' } });
    assert.equal(withArgs.messages[0].content.text, "What's weather in Paris, TX?");
    const team = await client.request('prompts/get', { name: 'completable-prompt', arguments: { department: 'Sales', name: 'Eve' } });
    assert.equal(team.messages[0].content.text, 'Please promote Eve to the head of the Sales team.');
    const res = await client.request('prompts/get', { name: 'resource-prompt', arguments: { resourceType: 'Text', resourceId: '3' } });
    assert.equal(res.messages[0].content.text, 'This prompt includes the Text resource with id: 3. Please analyze the following resource:');
    assert.equal(res.messages[1].content.type, 'resource');
    assert.equal(res.messages[1].content.resource.uri, 'demo://resource/dynamic/text/3');
  });

  test('completion/complete for a prompt argument and a resource template', async () => {
    const dept = await client.request('completion/complete', {
      ref: { type: 'ref/prompt', name: 'completable-prompt' },
      argument: { name: 'department', value: 'S' },
    });
    assert.deepEqual(dept.completion.values, ['Sales', 'Support']);
    const person = await client.request('completion/complete', {
      ref: { type: 'ref/prompt', name: 'completable-prompt' },
      argument: { name: 'name', value: 'A' },
      context: { arguments: { department: 'Engineering' } },
    });
    assert.deepEqual(person.completion.values, ['Alice']);
    const id = await client.request('completion/complete', {
      ref: { type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' },
      argument: { name: 'resourceId', value: '42' },
    });
    assert.deepEqual(id.completion.values, ['42']);
  });

  test('the named methods give what the raw requests give, all pages followed', async () => {
    const resources = await client.listResources({ cache: false });
    assert.deepEqual(resources, (await client.request('resources/list', {}, { allPages: true })).resources);
    const uri = 'demo://resource/static/document/architecture.md';
    assert.deepEqual(await client.readResource(uri), await client.request('resources/read', { uri }));
    assert.deepEqual((await client.listResourceTemplates()).map((t) => t.uriTemplate).sort(),
      ['demo://resource/dynamic/blob/{resourceId}', 'demo://resource/dynamic/text/{resourceId}']);
    assert.deepEqual((await client.listPrompts()).map((p) => p.name),
      ['simple-prompt', 'args-prompt', 'completable-prompt', 'resource-prompt']);
    const got = await client.getPrompt('args-prompt', { city: 'Paris', state: 'TX' });
    assert.equal(got.messages[0].content.text, "What's weather in Paris, TX?");
    const prompt = { type: 'ref/prompt', name: 'completable-prompt' };
    assert.deepEqual((await client.complete(prompt, { name: 'department', value: 'S' })).values, ['Sales', 'Support']);
    assert.deepEqual((await client.complete(prompt, { name: 'name', value: 'A' }, { context: { department: 'Engineering' } })).values, ['Alice']);
    const template = { type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' };
    assert.deepEqual((await client.complete(template, { name: 'resourceId', value: '42' })).values, ['42']);
    assert.equal(await client.ping({ timeoutMs: 5000 }), undefined);
    await client.subscribe('demo://resource/static/document/features.md');
    await client.unsubscribe('demo://resource/static/document/features.md');
  });

  test('the named methods name what was wrong', async () => {
    const kindOf = (p) => p.then(() => null, (e) => e);
    for (const [p, what] of [
      [client.complete({ type: 'ref/tool', name: 'x' }, { name: 'a', value: '' }), /`ref`/],
      [client.complete({ type: 'ref/prompt', name: 'x' }, { name: 'a' }), /`argument`/],
      [client.readResource(7), /uri/],
      [client.getPrompt('args-prompt', ['Paris']), /args/],
    ]) {
      const err = await kindOf(p);
      assert.ok(err instanceof McpError, String(err));
      assert.equal(err.kind, 'invalid_argument');
      assert.match(err.message, what);
    }
    const missing = await kindOf(client.getPrompt('no-such-prompt'));
    assert.equal(missing.kind, 'rpc');
    assert.equal((await client.listPrompts()).length, 4);
  });

  test('logging/setLevel and ping', async () => {
    assert.deepEqual(await client.request('logging/setLevel', { level: 'debug' }), {});
    assert.deepEqual(await client.request('ping'), {});
  });

  test('an unknown tool is an isError result; the handle stays usable', async () => {
    const r = await client.callTool('no-such-tool', {});
    assert.equal(r.isError, true);
    assert.match(h.textOf(r), /Tool no-such-tool not found/);
    assert.equal(h.textOf(await client.callTool('echo', { message: 'still here' })), 'Echo: still here');
  });

  test('bad arguments are an isError result naming the problem', async () => {
    const r = await client.callTool('get-sum', { a: 'one', b: 2 });
    assert.equal(r.isError, true);
    assert.match(h.textOf(r), /Input validation error/);
    assert.match(h.textOf(r), /expected number/);
  });

  test('an unknown method is an rpc McpError with the JSON-RPC code', async () => {
    const err = await client.request('no/such/method', {}).then(() => null, (e) => e);
    assert.ok(err instanceof McpError, String(err));
    assert.equal(err.name, 'McpError');
    assert.equal(err.kind, 'rpc');
    assert.equal(err.code, -32601);
    const missing = await client.request('resources/read', { uri: 'demo://resource/nope' }).then(() => null, (e) => e);
    assert.ok(missing instanceof McpError);
    assert.equal(missing.kind, 'rpc');
    assert.equal(typeof missing.code, 'number');
  });

  test('the server\'s stderr lines arrive as stderr events', { skip: transport !== 'stdio' && 'a remote server\'s stderr is not the client\'s' }, () => {
    // server-everything writes a banner to stderr at start.
    assert.ok(stderr.some((l) => /Starting default \(STDIO\) server/.test(l)), JSON.stringify(stderr));
  });
});

describe('server requests answered by handlers', { timeout: 60000 }, () => {
  test('sampling/createMessage handler: its result reaches the server; a throw becomes an error', async (t) => {
    const seen = [];
    let fail = false;
    const client = await h.connect(t, h.everythingServer(), {
      connectTimeoutMs: 15000,
      handlers: {
        'sampling/createMessage': async (params, ctx) => {
          seen.push({ params, ctx });
          if (fail) throw new Error('the test refused to sample');
          return { role: 'assistant', content: { type: 'text', text: 'sampled by the node test' }, model: 'test-model', stopReason: 'endTurn' };
        },
      },
    });
    const names = (await client.listTools()).map((x) => x.name);
    assert.ok(names.includes('trigger-sampling-request'), 'the sampling capability was declared from the handler');
    const r = await client.callTool('trigger-sampling-request', { prompt: 'say hi', maxTokens: 7 }, { timeoutMs: 15000 });
    assert.match(h.textOf(r), /^LLM sampling result: /);
    const sampled = JSON.parse(h.textOf(r).replace(/^LLM sampling result: \n/, ''));
    assert.equal(sampled.content.text, 'sampled by the node test');
    assert.equal(sampled.model, 'test-model');
    assert.equal(seen.length, 1);
    assert.equal(seen[0].params.messages[0].content.text, 'Resource trigger-sampling-request context: say hi');
    assert.equal(seen[0].params.maxTokens, 7);
    assert.equal(seen[0].ctx.method, 'sampling/createMessage');

    fail = true;
    const failed = await client.callTool('trigger-sampling-request', { prompt: 'again' }, { timeoutMs: 15000 });
    assert.equal(failed.isError, true);
    assert.match(h.textOf(failed), /the test refused to sample/);
    // The pump survived the throwing handler.
    assert.equal(h.textOf(await client.callTool('echo', { message: 'after' })), 'Echo: after');
  });

  test('elicitation/create handler', async (t) => {
    const client = await h.connect(t, h.everythingServer(), {
      connectTimeoutMs: 15000,
      handlers: {
        'elicitation/create': (params) => {
          assert.equal(params.message, 'Please provide inputs for the following fields:');
          return { action: 'accept', content: { name: 'Ada Lovelace', check: true, integer: 7 } };
        },
      },
    });
    const r = await client.callTool('trigger-elicitation-request', {}, { timeoutMs: 15000 });
    assert.equal(h.textOf(r, 0), '✅ User provided the requested information!');
    assert.equal(h.textOf(r, 1), 'User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Favorite Integer: 7');
  });

  test('roots/list handler', async (t) => {
    const client = await h.connect(t, h.everythingServer(), {
      connectTimeoutMs: 15000,
      handlers: { 'roots/list': async () => ({ roots: [{ uri: 'file:///tmp/mcplug-node-root', name: 'node-root' }] }) },
    });
    const r = await client.callTool('get-roots-list', {}, { timeoutMs: 15000 });
    assert.match(h.textOf(r), /^Current MCP Roots \(1 total\):\n\n1\. node-root\n {3}URI: file:\/\/\/tmp\/mcplug-node-root/);
  });

  test('a notification handler sees log messages; its throw is reported, the pump goes on', async (t) => {
    const logs = [];
    const errors = [];
    const client = await h.connect(t, h.everythingServer(), {
      connectTimeoutMs: 15000,
      handlers: {
        'notifications/message': (params) => {
          logs.push(params);
          throw new Error('notification handler boom');
        },
      },
    });
    client.on('handlerError', (e, where) => errors.push([e.message, where]));
    const events = [];
    client.on('notification', (n) => events.push(n.method));
    await client.callTool('toggle-simulated-logging', {});
    await h.waitFor(() => logs.length >= 1, 5000, 'a log message at the handler');
    assert.ok(LOG_LEVELS.includes(logs[0].level));
    assert.deepEqual(errors[0], ['notification handler boom', 'notifications/message']);
    assert.ok(events.includes('notifications/message'), 'the notification event fired too');
    await client.callTool('toggle-simulated-logging', {});
    assert.equal(h.textOf(await client.callTool('echo', { message: 'still pumping' })), 'Echo: still pumping');
  });

  test('a request without a handler is answered -32601 (Method not found)', async (t) => {
    // Declare sampling without a handler: the server's request must still get an answer.
    const client = await h.connect(t, h.everythingServer(), {
      connectTimeoutMs: 15000,
      options: { capabilities: { sampling: {} } },
    });
    const r = await client.callTool('trigger-sampling-request', { prompt: 'x' }, { timeoutMs: 15000 });
    assert.equal(r.isError, true);
    assert.match(h.textOf(r), /-32601|Method not found/);
  });
});
