'use strict';
// Issue 32, items 7 and 8, as a Node host meets them (tests/servers/list_storm_server.py): a
// listing a hostile server makes too big stops at `max_list_bytes` with a `denied` McpError
// naming it, the connection still usable; a storm of tools/list_changed costs a manager a few
// re-lists, not one each.

const h = require('./helpers');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');

const { Client, Manager } = h.mcplug;
const SERVER = path.join(h.ROOT, 'tests', 'servers', 'list_storm_server.py');

function stormServer(...args) {
  return { command: 'python3', args: [SERVER, ...args] };
}

function countOf(text, method) {
  return Number(Object.fromEntries(text.split(' ').map((part) => part.split('=')))[method]);
}

test('pages past max_list_bytes are denied naming the option', async () => {
  const server = stormServer('--page-kib', '512', '--pages', '300', '--cursor-kib', '16');
  const client = await Client.connect(server, { options: { max_list_bytes: 4 << 20 } });
  try {
    await assert.rejects(client.listTools(), (e) => {
      assert.equal(e.kind, 'denied', e.message);
      assert.match(e.message, /max_list_bytes/);
      assert.match(e.message, /4194304 bytes/);
      return true;
    });
    const asked = countOf(h.textOf(await client.callTool('counts', {})), 'tools/list');
    assert.ok(asked >= 2 && asked <= 9, `${asked} pages asked for under a 4 MiB limit of 512 KiB pages`);
    assert.equal(h.textOf(await client.callTool('echo', { message: 'still here' })), 'still here');
  } finally {
    await client.close();
  }
});

test('a list_changed storm makes a few re-lists', async () => {
  const m = new Manager({ reconnectAttempts: 0 });
  try {
    await m.connect({ mcpServers: { storm: stormServer('--slow-list-ms', '5') } });
    const status = await m.wait(60000);
    assert.equal(status.servers.storm.state, 'connected', JSON.stringify(status));
    const lists = async () => countOf(h.textOf(await m.callTool('mcp__storm__counts', {})), 'tools/list');
    assert.equal(await lists(), 1);
    assert.equal(h.textOf(await m.callTool('mcp__storm__storm', { n: 2000 })), 'sent 2000');
    let before = -1;
    let now = await lists();
    const deadline = Date.now() + 20000;
    while (now !== before && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      before = now;
      now = await lists();
    }
    assert.ok(now >= 2 && now <= 4, `2,000 tools/list_changed made ${now - 1} re-lists (one in flight, one queued)`);
    const pool = await m.listTools();
    assert.ok(pool.tools.some((t) => t.name === 'mcp__storm__echo'));
  } finally {
    await m.close();
  }
});
