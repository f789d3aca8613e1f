'use strict';
// A 2026-07-28 (modern era) server on the Python SDK: mcplug negotiates the modern era and tools
// work there; server-everything (legacy) negotiates 2025-11-25 (see everything.test.js).

const h = require('./helpers');
const { test, describe } = require('node:test');
const assert = require('node:assert/strict');

describe('modern server (2026-07-28)', { timeout: 60000 }, () => {
  test('negotiates 2026-07-28 and its tools work', async (t) => {
    const client = await h.connect(t, h.modernServer(), { connectTimeoutMs: 20000 });
    assert.equal(client.era, 'modern');
    assert.equal(client.protocolVersion, '2026-07-28');
    assert.equal(client.serverInfo.name, 'modern-test-server');
    assert.equal(client.instructions, 'mcplug modern-era test server');

    const tools = await client.listTools({ timeoutMs: 10000 });
    const names = tools.map((x) => x.name);
    assert.ok(names.includes('add') && names.includes('echo'), names.join(', '));

    const echo = await client.callTool('echo', { message: 'modern ✓' }, { timeoutMs: 10000 });
    assert.equal(h.textOf(echo), 'Echo: modern ✓');
    assert.notEqual(echo.isError, true);
    const sum = await client.callTool('add', { a: 40, b: 2 }, { timeoutMs: 10000 });
    assert.equal(h.textOf(sum), '42');
    assert.deepEqual(sum.structuredContent, { result: 42 });

    // Bad arguments come back as a tool error, and the connection stays usable.
    const bad = await client.callTool('add', { a: 'x', b: 2 }, { timeoutMs: 10000 });
    assert.equal(bad.isError, true);
    assert.equal(h.textOf(await client.callTool('echo', { message: 'again' })), 'Echo: again');
  });

  test('concurrent calls on a modern connection', async (t) => {
    const client = await h.connect(t, h.modernServer(), { connectTimeoutMs: 20000 });
    const results = await h.within(20000, Promise.all(
      Array.from({ length: 50 }, (_, i) => client.callTool('add', { a: i, b: 1000 })),
    ), '50 calls');
    results.forEach((r, i) => assert.equal(h.textOf(r), String(i + 1000)));
  });
  test('skills (SEP-2640): listed, loaded and read verified; a changed file refused', async (t) => {
    const client = await h.connect(t, h.modernServer(), { connectTimeoutMs: 20000 });
    const SKILL = 'skill://git-workflow/SKILL.md';
    const GUIDE = 'skill://git-workflow/references/GUIDE.md';
    const reads = async () => JSON.parse(h.textOf(await client.callTool('skill_reads', {})));
    const skills = await client.listSkills();
    assert.deepEqual(skills.map((s) => s.uri), [SKILL, 'skill://acme/billing/refunds/SKILL.md']);
    assert.deepEqual(await reads(), [], 'nothing read on listing');
    const loaded = await client.loadSkill(SKILL);
    assert.equal(loaded.verified, true);
    assert.deepEqual(loaded.files, [SKILL, GUIDE]);
    const guide = await client.readSkillFile(SKILL, 'references/GUIDE.md');
    assert.equal(guide.text, 'Rebase, never merge \u2014 caf\u00e9 rules.\n');
    await assert.rejects(client.readSkillFile(SKILL, 'scripts/unlisted.sh'),
      (e) => e.kind === 'invalid_result' && e.data.check === 'unlisted');
    await client.callTool('tamper_skill', {});
    await assert.rejects(client.readSkillFile(SKILL, GUIDE),
      (e) => e.kind === 'invalid_result' && e.data.check === 'size');
    assert.equal((await client.getSkill(SKILL)).uri, SKILL);
    await client.loadSkill(SKILL);
    assert.ok((await client.readSkillFile(SKILL, GUIDE)).text.endsWith('One more rule.\n'));
    assert.deepEqual(await reads(), [SKILL, GUIDE, GUIDE, SKILL, GUIDE]);
    await assert.rejects(client.loadSkill('skill://nope/SKILL.md'), (e) => e.kind === 'rpc' && e.code === -32602);
  });

  test('cached results, the cache option, and list changes from the listen stream', async (t) => {
    const server = h.modernServer();
    server.args = [...server.args, '--cache-ttl-ms', '60000'];
    const seen = [];
    const listening = [];
    const client = await h.connect(t, server, { connectTimeoutMs: 20000 });
    client.on('notification', (n) => seen.push(n));
    client.on('event', (e) => { if (e.type === 'listening') listening.push(e); });
    // The client pumps events from the start, so the stream opens on its own ("auto").
    await h.waitFor(() => listening.length > 0, 10000, 'the listening event');
    assert.equal(listening[0].notifications.toolsListChanged, true);
    const names = async (opts) => (await client.listTools(opts)).map((x) => x.name);
    assert.ok(!(await names()).includes('node_quiet'));
    await client.callTool('add_tool', { name: 'node_quiet' });
    assert.ok(!(await names()).includes('node_quiet'), 'served from the cache');
    assert.ok((await names({ cache: false })).includes('node_quiet'));
    await client.callTool('add_tool', { name: 'node_loud', notify: true });
    await h.waitFor(() => seen.some((n) => n.method === 'notifications/tools/list_changed'), 10000, 'tools/list_changed');
    const listed = await client.request('tools/list', {}, { allPages: true });
    assert.ok(listed.tools.some((x) => x.name === 'node_loud'));
    const read = (opts) => client.request('resources/read', { uri: 'note://current' }, opts);
    const first = (await read()).contents[0].text;
    await client.callTool('set_note', { text: 'node changed' });
    assert.equal((await read()).contents[0].text, first);
    assert.equal((await read({ cache: false })).contents[0].text, 'node changed');
    await assert.rejects(client.listTools({ cache: 'no' }), (e) => e.kind === 'invalid_argument');
  });
});
