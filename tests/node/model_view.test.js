'use strict';
// What the host hands the model, through the Node manager against server-everything and the fault
// server: tool results, resources and prompts cleaned and capped alike; base64 media under
// `maxMediaBytes`; with `outputDir`, what is cut kept whole in a 0600 file the result names; each
// server's `instructions` in the status. Then `format`: tools and results as the Anthropic
// Messages API and OpenAI Chat Completions take them, through a manager and a single client.

const h = require('./helpers');
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');

const { Manager } = h.mcplug;

function keptPath(text) {
  const found = /(?:kept whole in|the whole output is in) (\S+?)(?:\]| by mcplug)/.exec(text);
  assert.ok(found, `no kept file named in ${JSON.stringify(text)}`);
  return found[1];
}

function mode(file) {
  return fs.statSync(file).mode & 0o777;
}

describe('the model view of a manager', () => {
  let m;
  let dir;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-view-'));
    const everything = h.everythingServer();
    const fault = h.faultServer('normal');
    m = new Manager({ maxOutputChars: 40, maxMediaBytes: 64, outputDir: path.join(dir, 'kept') });
    await m.connect({
      mcpServers: {
        everything: { command: everything.command, args: everything.args },
        fault: { command: fault.command, args: fault.args },
      },
    });
    const status = await h.within(60000, m.wait(60000), 'wait()');
    for (const s of Object.values(status.servers)) assert.equal(s.state, 'connected', JSON.stringify(status));
  });
  after(async () => {
    if (m) await h.within(20000, m.close(), 'close()');
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('an image over maxMediaBytes is kept whole in a .png file of its own', async () => {
    const result = await m.callTool('mcp__everything__get-tiny-image', {});
    assert.ok(result.content.every((c) => c.type !== 'image'), JSON.stringify(result));
    const note = result.content.find((c) => c.type === 'text' && c.text.includes('image (image/png'));
    const file = keptPath(note.text);
    assert.equal(path.dirname(file), path.join(dir, 'kept'));
    assert.ok(file.endsWith('.png'));
    assert.equal(mode(file), 0o600);
    assert.deepEqual([...fs.readFileSync(file).subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
  });

  test('text over the limit is cut in tool results, resources and prompts alike', async () => {
    const echo = await m.callTool('mcp__fault__echo', { message: 'n'.repeat(100) });
    assert.match(echo.content[0].text, /characters cut; the limit is 40/);
    assert.equal(fs.readFileSync(keptPath(echo.content[0].text), 'utf8'), `Echo: ${'n'.repeat(100)}`);
    const read = await m.readResource('everything', 'demo://resource/dynamic/text/1');
    assert.match(read.contents[0].text, /characters cut; the limit is 40/);
    assert.match(fs.readFileSync(keptPath(read.contents[0].text), 'utf8'), /^Resource 1: This is a plaintext resource/);
    const blob = await m.readResource('everything', 'demo://resource/dynamic/blob/1');
    assert.equal(blob.contents[0].blob, undefined, JSON.stringify(blob));
    const prompt = await m.getPrompt('mcp__everything__resource-prompt', { resourceType: 'Text', resourceId: '2' });
    const texts = prompt.messages.map((msg) => msg.content.text ?? msg.content.resource?.text ?? '');
    assert.ok(texts.some((t) => /characters cut; the limit is 40/.test(t)), JSON.stringify(prompt));
  });

  test('the status carries each server\'s instructions', async () => {
    const { servers } = await m.status();
    assert.equal(servers.fault.instructions, 'mode normal');
    assert.ok(servers.everything.instructions.length > 0);
  });
});

describe('format', () => {
  let m;
  let c;
  before(async () => {
    const everything = h.everythingServer();
    m = new Manager();
    await m.connect({ mcpServers: { everything: { command: everything.command, args: everything.args } } });
    const status = await h.within(60000, m.wait(60000), 'wait()');
    assert.equal(status.servers.everything.state, 'connected');
    c = await h.mcplug.Client.connect(everything, { connectTimeoutMs: 30000 });
  });
  after(async () => {
    if (m) await h.within(20000, m.close(), 'close()');
    if (c) await c.close();
  });

  test("'anthropic': Messages API tool definitions and tool_result content", async () => {
    const { tools } = await m.listTools(null, { format: 'anthropic' });
    const echo = tools.find((t) => t.name === 'mcp__everything__echo');
    assert.deepEqual(Object.keys(echo).sort(), ['description', 'input_schema', 'name']);
    const found = await m.searchTools('echo', { maxResults: 1, format: 'anthropic' });
    assert.ok('input_schema' in found.tools[0]);
    const image = await m.callTool('mcp__everything__get-tiny-image', {}, { format: 'anthropic' });
    assert.equal(image.is_error, false);
    const block = image.content.find((b) => b.type === 'image');
    assert.deepEqual([block.source.type, block.source.media_type], ['base64', 'image/png']);
    const links = await c.callTool('get-resource-links', { count: 2 }, { format: 'anthropic' });
    assert.equal(links.content.filter((b) => b.text.startsWith('[Resource link: ')).length, 2, JSON.stringify(links));
  });

  test("'openai': Chat Completions function tools and the tool message", async () => {
    const tools = await c.listTools({ format: 'openai' });
    assert.ok(tools.every((t) => t.type === 'function' && t.function.parameters));
    const echo = await m.callTool('mcp__everything__echo', { message: 'hi' }, { format: 'openai' });
    assert.deepEqual(echo, { role: 'tool', content: 'Echo: hi', is_error: false });
    const direct = await c.callTool('echo', { message: 'yo' }, { format: 'openai' });
    assert.equal(direct.content, 'Echo: yo');
    const plain = await c.callTool('echo', { message: 'yo' });
    assert.equal(plain.content[0].type, 'text', "'mcp' (no format) stays untouched");
  });

  test('a prompt takes a command line, mapped onto its declared arguments', async () => {
    const got = await m.getPrompt('mcp__everything__args-prompt', '"New York" NY');
    assert.match(JSON.stringify(got), /New York, NY/);
    await assert.rejects(m.getPrompt('mcp__everything__args-prompt', 'a b c'), { kind: 'invalid_argument', message: /3 words/ });
  });

  test('an unknown format is named', async () => {
    await assert.rejects(m.callTool('mcp__everything__echo', { message: 'x' }, { format: 'claude' }), { kind: 'invalid_argument', message: /format/ });
    await assert.rejects(m.listTools(null, { format: 'x' }), { kind: 'invalid_argument' });
  });
});

describe('resourceTools', () => {
  test("ListMcpResourcesTool and ReadMcpResourceTool, as Claude Code offers them", async () => {
    const everything = h.everythingServer();
    const m = new Manager({ resourceTools: true });
    try {
      await m.connect({ mcpServers: { everything: { command: everything.command, args: everything.args } } });
      await h.within(60000, m.wait(60000), 'wait()');
      const names = (await m.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('ListMcpResourcesTool') && names.includes('ReadMcpResourceTool'), names.join(' '));
      const listed = JSON.parse((await m.callTool('ListMcpResourcesTool', {})).content[0].text);
      assert.ok(listed.length > 0 && listed.every((r) => r.server === 'everything'));
      const read = await m.callTool('ReadMcpResourceTool', { server: 'everything', uri: 'demo://resource/dynamic/text/1' });
      assert.equal(read.content[0].type, 'resource');
      assert.match(read.content[0].resource.text, /^Resource 1: This is a plaintext resource/);
      const wrong = await m.callTool('ReadMcpResourceTool', { server: 'nobody', uri: 'x://y' });
      assert.equal(wrong.isError, true);
    } finally {
      await h.within(20000, m.close(), 'close()');
    }
  });
});
