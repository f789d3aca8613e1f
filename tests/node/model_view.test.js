'use strict';
// What the host hands the model, through the Node manager against server-everything and the fault
// server: tool results, resources and prompts cleaned and capped alike; base64 media under
// `maxMediaBytes`; with `outputDir`, what is cut kept whole in a 0600 file the result names; each
// server's `instructions` in the status.

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
