'use strict';
// Issue 32, items 5 and 6, as a Node host meets them (tests/servers/names_server.py).
// 6: servers "x" (tool and prompt y__z) and "x__y" (z) both make mcp__x__y__z: neither is given
//    the name, the collision is reported for both, a call or prompt by it is refused.
// 5: a skill whose entry lists skill://srv/demo/../other/secret.md does not load.
const h = require('./helpers');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');

const { Manager, Client } = h.mcplug;
const NAMES_SERVER = path.join(h.ROOT, 'tests', 'servers', 'names_server.py');
const server = (role) => ({ command: 'python3', args: [NAMES_SERVER, role] });

test('a name two servers make goes to neither', async () => {
  const m = new Manager();
  try {
    await m.connect({ mcpServers: { x: server('x'), x__y: server('x__y') } });
    await m.wait(20000);
    const pool = await m.listTools();
    const names = pool.tools.map((t) => t.name);
    assert.ok(!names.includes('mcp__x__y__z'), names.join(' '));
    assert.ok(names.includes('mcp__x__own') && names.includes('mcp__x__y__own'));
    const collided = pool.dropped
      .filter((d) => d.reason === 'collision')
      .map((d) => `${d.server}:${d.tool}`)
      .sort();
    assert.deepEqual(collided, ['x:y__z', 'x__y:z']);
    await assert.rejects(m.callTool('mcp__x__y__z', {}), (e) =>
      e.kind === 'not_found' && e.message.includes('"x"') && e.message.includes('"x__y"'));
    const prompts = await m.listPrompts();
    assert.ok(!prompts.prompts.map((p) => p.name).includes('mcp__x__y__z'));
    assert.deepEqual(prompts.dropped.map((d) => d.server).sort(), ['x', 'x__y']);
    await assert.rejects(m.getPrompt('mcp__x__y__z'), (e) => e.kind === 'not_found');
    assert.match(JSON.stringify(await m.getPrompt('mcp__x__own')), /x:own/);
  } finally {
    await m.close();
  }
});

test('a skill cannot list a file outside its folder', async () => {
  const c = await Client.connect(server('skills'));
  try {
    await assert.rejects(c.loadSkill('skill://srv/demo/SKILL.md'), (e) =>
      e.kind === 'protocol' && e.message.includes('dot segment') &&
      e.message.includes('skill://srv/demo/../other/secret.md'));
    const r = await c.callTool('escapes', {});
    assert.equal(r.content[0].text, '0');
  } finally {
    await c.close();
  }
});
