'use strict';
// The library's log records on the host's event loop (captureLogs): a connect and a call come
// back as 'record' events, none showing the entry's secrets; stop() ends the capture with 'end'.
// node --test runs each file in its own process, so this capture is the process's only one.
const h = require('./helpers');
const { test } = require('node:test');
const assert = require('node:assert/strict');

const { captureLogs, McpError } = h.mcplug;

test('captureLogs names a bad filter and bad options', () => {
  for (const [options, what] of [[{ filter: 'mcplug=[[' }, /`filter`/], [{ filter: 7 }, /`filter`/], [{ maxRecords: 0 }, /maxRecords/]]) {
    assert.throws(() => captureLogs(options), (e) => e instanceof McpError && e.kind === 'invalid_argument' && what.test(e.message));
  }
});

test('records of a connect and a call arrive as events, without secrets; stop() ends them', async () => {
  const records = [];
  const capture = captureLogs({ filter: 'debug,mcplug::wire=trace' }, (r) => records.push(r));
  assert.equal(capture.filter, 'debug,mcplug::wire=trace');
  assert.equal(capture.maxRecords, 10000);
  const server = h.faultServer('normal');
  server.args = [...server.args, '--token=arg-secret-3141'];
  server.env = { ...(server.env || {}), API_TOKEN: 'env-secret-2718' };
  const client = await h.within(20000, h.mcplug.Client.connect(server), 'connect');
  const result = await client.callTool('echo', { message: 'logged' });
  assert.equal(result.content[0].text, 'Echo: logged');
  await client.close();
  await h.waitFor(() => records.some((r) => r.target === 'mcplug::client' && r.fields.method === 'tools/call'), 5000, 'the tools/call record');
  const call = records.find((r) => r.fields && r.fields.method === 'tools/call');
  assert.equal(call.type, 'log');
  assert.equal(call.level, 'debug');
  assert.equal(typeof call.timeMs, 'number');
  assert.ok(Math.abs(call.timeMs - Date.now()) < 60000);
  assert.ok(records.some((r) => r.target === 'mcplug::wire' && r.level === 'trace' && r.message.includes('logged')));
  const text = JSON.stringify(records);
  assert.ok(!text.includes('arg-secret-3141') && !text.includes('env-secret-2718'), 'no record shows a secret');

  const ended = new Promise((resolve) => capture.once('end', resolve));
  capture.stop();
  await h.within(5000, ended, "the 'end' event");
  assert.equal(capture.stopped, true);
  capture.stop(); // idempotent
  const seen = records.length;
  const again = await h.within(20000, h.mcplug.Client.connect(h.faultServer('normal')), 'connect after stop');
  await again.close();
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(records.length, seen, 'no record after stop()');
});
