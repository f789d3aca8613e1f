'use strict';
// `mcplug serve` from the other side: the TypeScript SDK's own client (`Client` over
// `StdioClientTransport`) talks to `mcplug serve`, which fronts server-everything over stdio.
// What the client sees must be what the upstream serves: tools as listed, results as sent,
// progress under its own token, sampling and elicitation asked of it.

const { ROOT, EVERYTHING, within } = require('./helpers');
const { test } = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');

const SDK = path.join(ROOT, '.deps', 'npm', 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'cjs');
const MCPLUG_BIN = path.join(ROOT, 'target', 'release', 'mcplug');

function sdk(rel) {
  const file = path.join(SDK, rel);
  if (!fs.existsSync(file)) {
    throw new Error(`the TypeScript SDK is missing (${file}); install the test peers with tests/install-deps.sh`);
  }
  return require(file);
}

const { Client } = sdk('client/index.js');
const { StdioClientTransport } = sdk('client/stdio.js');
const { CreateMessageRequestSchema, ElicitRequestSchema } = sdk('types.js');

/** A client of the TypeScript SDK connected to `mcplug serve` over the given servers. */
async function connect(servers, extra = [], capabilities = {}) {
  if (!fs.existsSync(MCPLUG_BIN)) throw new Error(`${MCPLUG_BIN} is missing: cargo build --release`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-serve-'));
  fs.mkdirSync(path.join(dir, 'home'));
  const config = path.join(dir, 'servers.json');
  fs.writeFileSync(config, JSON.stringify({ mcpServers: servers }));
  const transport = new StdioClientTransport({
    command: MCPLUG_BIN,
    args: ['serve', '--strict-mcp-config', '--mcp-config', config, ...extra],
    env: { HOME: path.join(dir, 'home'), PATH: process.env.PATH, MCPLUG_LOG: 'debug' },
    cwd: dir,
    stderr: 'pipe',
  });
  // What the served process logged, kept (the last 64 KiB) to say why when a test fails.
  let logged = '';
  transport.stderr.on('data', (chunk) => { logged = (logged + chunk).slice(-65536); });
  const client = new Client({ name: 'ts-sdk-test', version: '1.0.0' }, { capabilities });
  try {
    await client.connect(transport);
  } catch (e) {
    await transport.close().catch(() => {});
    throw new Error(`connecting to mcplug serve failed: ${e.message}\n--- its log ---\n${logged}`);
  }
  client.log = () => logged;
  return client;
}

/** `e` with the served process's log appended, to say why a test failed. */
function told(e, client) {
  if (e instanceof Error && client.log) e.message += `\n--- the log of mcplug serve ---\n${client.log()}`;
  return e;
}

const everything = () => ({ command: process.execPath, args: [EVERYTHING] });
const text = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');

test('the TypeScript SDK client: tools, resources, prompts and completion through mcplug serve', async () => {
  const client = await connect({ everything: everything() });
  try {
    await within(30000, (async () => {
      assert.strictEqual(client.getServerVersion().name, 'mcplug');
      const { tools } = await client.listTools();
      const byName = new Map(tools.map((t) => [t.name, t]));
      assert.ok(byName.has('mcp__everything__echo'), [...byName.keys()].join(', '));
      assert.ok(byName.get('mcp__everything__get-structured-content').outputSchema, 'outputSchema passed on');
      assert.strictEqual(text(await client.callTool({ name: 'mcp__everything__echo', arguments: { message: 'ts' } })), 'Echo: ts');
      // The SDK checks structured content against the outputSchema it listed.
      const structured = await client.callTool({ name: 'mcp__everything__get-structured-content', arguments: { location: 'Chicago' } });
      assert.ok(structured.structuredContent, 'structured content passed on');
      const { resources } = await client.listResources();
      assert.ok(resources.length > 0);
      const read = await client.readResource({ uri: resources[0].uri });
      assert.strictEqual(read.contents[0].uri, resources[0].uri);
      const { prompts } = await client.listPrompts();
      assert.ok(prompts.some((p) => p.name === 'mcp__everything__args-prompt'));
      const got = await client.getPrompt({ name: 'mcp__everything__args-prompt', arguments: { city: 'Lyon' } });
      assert.match(JSON.stringify(got.messages), /Lyon/);
      const done = await client.complete({
        ref: { type: 'ref/prompt', name: 'mcp__everything__completable-prompt' },
        argument: { name: 'department', value: 'E' },
      });
      assert.ok(done.completion.values.includes('Engineering'), JSON.stringify(done));
    })(), 'the calls through mcplug serve');
  } catch (e) {
    throw told(e, client);
  } finally {
    await client.close();
  }
});

test('the TypeScript SDK client: everything and mcp-server-time as one server', async () => {
  const time = path.join(ROOT, '.deps', 'venv', 'bin', 'mcp-server-time');
  if (!fs.existsSync(time)) throw new Error(`${time} is missing: bash tests/install-deps.sh`);
  const client = await connect({ everything: everything(), time: { command: time, args: ['--local-timezone', 'UTC'] } });
  try {
    await within(30000, (async () => {
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('mcp__time__convert_time') && names.includes('mcp__everything__echo'), names.join(', '));
      const converted = await client.callTool({
        name: 'mcp__time__convert_time',
        arguments: { source_timezone: 'UTC', time: '12:00', target_timezone: 'Asia/Tokyo' },
      });
      assert.ok(!converted.isError, JSON.stringify(converted));
      assert.match(JSON.parse(text(converted)).target.datetime, /T21:00:00/);
      const wrong = await client.callTool({ name: 'mcp__time__get_current_time', arguments: { timezone: 'Nowhere/Atlantis' } });
      assert.ok(wrong.isError, 'its tool error comes back as it wrote it');
    })(), 'the calls through mcplug serve');
  } catch (e) {
    throw told(e, client);
  } finally {
    await client.close();
  }
});

test('the TypeScript SDK client: progress, sampling and elicitation answered by the client', async () => {
  const client = await connect({ everything: everything() }, [], { sampling: {}, elicitation: {} });
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => ({
    role: 'assistant', model: 'ts-model', content: { type: 'text', text: `ts sampled ${request.params.messages.length}` },
  }));
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Grace' } }));
  try {
    await within(30000, (async () => {
      const seen = [];
      const long = await client.callTool(
        { name: 'mcp__everything__trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
        undefined,
        { onprogress: (p) => seen.push(p.progress) },
      );
      assert.match(text(long), /completed/);
      // In order, before the answer. The SDK may miss the last one: it handles a notification
      // a microtask later but a response at once, so a progress notification read in the same
      // chunk as the answer finds its handler gone (as it does with the server reached directly).
      assert.deepStrictEqual(seen.slice(0, 2), [1, 2], JSON.stringify(seen));
      assert.ok(seen.length <= 3 && (seen.length < 3 || seen[2] === 3), JSON.stringify(seen));
      const sampled = await client.callTool({ name: 'mcp__everything__trigger-sampling-request', arguments: { prompt: 'hey' } });
      assert.match(text(sampled), /ts sampled 1/);
      assert.match(text(sampled), /ts-model/);
      const elicited = await client.callTool({ name: 'mcp__everything__trigger-elicitation-request', arguments: {} });
      assert.match(text(elicited), /Grace/);
    })(), 'the calls through mcplug serve');
  } catch (e) {
    throw told(e, client);
  } finally {
    await client.close();
  }
});

test('the TypeScript SDK client: a cancelled call does not stop the next one', async () => {
  const client = await connect({ everything: everything() });
  try {
    await within(30000, (async () => {
      const ac = new AbortController();
      const long = client.callTool(
        { name: 'mcp__everything__trigger-long-running-operation', arguments: { duration: 30, steps: 3 } },
        undefined,
        { signal: ac.signal },
      );
      setTimeout(() => ac.abort('enough'), 300);
      await assert.rejects(long);
      assert.strictEqual(text(await client.callTool({ name: 'mcp__everything__echo', arguments: { message: 'next' } })), 'Echo: next');
    })(), 'the calls through mcplug serve');
  } catch (e) {
    throw told(e, client);
  } finally {
    await client.close();
  }
});

test('a Node host serves its manager: the TypeScript SDK client over Streamable HTTP, host tools included', async () => {
  const { mcplug } = require('./helpers');
  const { StreamableHTTPClientTransport } = sdk('client/streamableHttp.js');
  // Declares sampling to its servers: what they ask during a served call goes to the client.
  const m = new mcplug.Manager({ connection: { capabilities: { sampling: {} } } });
  m.addHostServer('host', [{
    name: 'shout', description: 'Shouts', inputSchema: { type: 'object' },
    handler: (args) => String(args.text).toUpperCase(),
  }]);
  let served = null;
  try {
    await m.connect({ mcpServers: { everything: everything() } });
    await m.wait(30000);
    await assert.rejects(m.serve({ names: 'loud' }), /names/);
    await assert.rejects(m.serve({ port: 1 }), /unknown option `port`/);
    served = await m.serve({ names: 'unprefixed' });
    assert.match(served.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const client = new Client({ name: 'ts-sdk-http', version: '1.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async () => ({
      role: 'assistant', model: 'http-model', content: { type: 'text', text: 'sampled over http' },
    }));
    await client.connect(new StreamableHTTPClientTransport(new URL(served.url)));
    try {
      await within(30000, (async () => {
        const { tools } = await client.listTools();
        const names = tools.map((t) => t.name);
        assert.ok(names.includes('shout') && names.includes('echo'), names.join(', '));
        assert.strictEqual(text(await client.callTool({ name: 'shout', arguments: { text: 'served' } })), 'SERVED');
        const seen = [];
        const long = await client.callTool(
          { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 2 } },
          undefined,
          { onprogress: (p) => seen.push(p.progress) },
        );
        assert.match(text(long), /completed/);
        // The last may be missed by the SDK (see the progress test above).
        assert.deepStrictEqual(seen.slice(0, 1), [1], JSON.stringify(seen));
        const sampled = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'p' } });
        assert.match(text(sampled), /sampled over http/);
      })(), 'the calls through the served manager');
    } catch (e) {
      throw told(e, client);
    } finally {
      await client.close();
    }
    // An old client, over HTTP+SSE (GET /sse, POST /messages), reaches the same pool.
    const { SSEClientTransport } = sdk('client/sse.js');
    const old = new Client({ name: 'ts-sdk-sse', version: '1.0.0' });
    await old.connect(new SSEClientTransport(new URL(served.url.replace(/\/mcp$/, '/sse'))));
    try {
      await within(30000, (async () => {
        assert.strictEqual(text(await old.callTool({ name: 'shout', arguments: { text: 'old' } })), 'OLD');
        assert.strictEqual(text(await old.callTool({ name: 'echo', arguments: { message: 'sse' } })), 'Echo: sse');
      })(), 'the calls over HTTP+SSE');
    } finally {
      await old.close();
    }
    await served.close();
    assert.ok(served.closed);
    // The manager is the host's again.
    const after = await m.callTool('mcp__everything__echo', { message: 'after' });
    assert.strictEqual(text(after), 'Echo: after');
  } finally {
    if (served) await served.close();
    await m.close();
  }
});
