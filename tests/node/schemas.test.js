'use strict';
// Output schemas through the Node binding, against the Python SDK's server: a tool whose
// structuredContent breaks its own outputSchema rejects with an McpError of kind 'invalid_result'
// (the validator's message, the paths, the untouched result); a conforming result and an isError
// result come back as they are; arguments are checked against the inputSchema only when asked.

const h = require('./helpers');
const { test, describe } = require('node:test');
const assert = require('node:assert/strict');

describe('output schemas', { timeout: 60000 }, () => {
  test("a result that breaks its outputSchema is kind 'invalid_result'", async (t) => {
    const client = await h.connect(t, h.modernServer(), { connectTimeoutMs: 20000 });
    await client.listTools({ timeoutMs: 10000 }); // where the client learns the schemas

    const forecast = await client.callTool('forecast', { city: 'Oslo' }, { timeoutMs: 10000 });
    assert.deepEqual(forecast.structuredContent, { temperature: 21.5, sky: 'clear over Oslo' });

    const err = await client.callTool('misreport', { city: 'Oslo' }, { timeoutMs: 10000 }).then(
      (r) => assert.fail(`expected invalid_result, got ${JSON.stringify(r)}`),
      (e) => e,
    );
    assert.ok(err instanceof h.mcplug.McpError, String(err));
    assert.equal(err.kind, 'invalid_result');
    assert.equal(err.status, h.mcplug.Status.INVALID_RESULT);
    assert.match(err.message, /misreport.*at \/temperature/);
    assert.equal(err.data.tool, 'misreport');
    assert.equal(err.data.errors[0].schema_path, '/properties/temperature/type');
    assert.deepEqual(err.data.result.structuredContent, { temperature: 'hot', sky: 'clear' });

    const failed = await client.callTool('misreport', { city: 'Oslo', fail: true }, { timeoutMs: 10000 });
    assert.equal(failed.isError, true);
  });

  test('arguments are checked against the inputSchema when asked', async (t) => {
    const client = await h.connect(t, h.modernServer(), { connectTimeoutMs: 20000, options: { validate_arguments: true } });
    await client.listTools({ timeoutMs: 10000 });
    await assert.rejects(client.callTool('add', { a: 'two', b: 3 }), (e) => e.kind === 'invalid_argument' && /inputSchema/.test(e.message));
    assert.deepEqual((await client.callTool('add', { a: 2, b: 3 })).structuredContent, { result: 5 });
  });

  for (const [era, extra] of [['modern', {}], ['legacy', { protocolVersions: ['2025-11-25'] }]]) {
    test(`[${era}] request('tools/call') is checked too; a schema that does not compile is a 'warning' event`, async (t) => {
      const client = await h.connect(t, h.modernServer(), { connectTimeoutMs: 20000, ...extra });
      assert.equal(client.era, era);
      const warnings = [];
      client.on('warning', (w) => warnings.push(w));
      // Before any list the client knows no schema: unchecked.
      assert.deepEqual((await client.callTool('misreport', { city: 'Oslo' })).structuredContent, { temperature: 'hot', sky: 'clear' });
      await client.listTools();
      const err = await client.request('tools/call', { name: 'misreport', arguments: { city: 'Oslo' } }).then(
        (r) => assert.fail(`expected invalid_result, got ${JSON.stringify(r)}`),
        (e) => e,
      );
      assert.equal(err.kind, 'invalid_result');
      assert.deepEqual(err.data.errors.map((e) => [e.instance_path, e.schema_path]), [['/temperature', '/properties/temperature/type']]);
      assert.equal((await client.callTool('unschemable', {})).content[0].text, 'unchecked');
      await h.waitFor(() => warnings.length > 0, 5000, 'the warning event');
      assert.equal(warnings.length, 1);
      assert.deepEqual({ ...warnings[0], message: undefined }, { reason: 'invalid_schema', tool: 'unschemable', schema: 'outputSchema', message: undefined });
      assert.match(warnings[0].message, /^the outputSchema of tool "unschemable" does not compile, so it is not checked: /);
    });
  }

  test('validateArguments: the connect option, and per call', async (t) => {
    const client = await h.connect(t, h.modernServer(), { connectTimeoutMs: 20000, validateArguments: true });
    await client.listTools();
    const err = await client.callTool('echo', { message: 7 }).then((r) => assert.fail(JSON.stringify(r)), (e) => e);
    assert.equal(err.kind, 'invalid_argument');
    assert.equal(err.status, h.mcplug.Status.INVALID_ARGUMENT);
    assert.equal(err.data.tool, 'echo');
    assert.equal(err.data.errors[0].instance_path, '/message');
    assert.equal(JSON.parse((await client.callTool('calls', {})).content[0].text).includes('echo'), false, 'nothing was sent');
    const sent = await client.callTool('echo', { message: 7 }, { validateArguments: false });
    assert.equal(sent.isError, true, 'a call turns it off: the server gets it and answers isError');

    const lax = await h.connect(t, h.everythingServer(), { connectTimeoutMs: 20000 });
    await lax.listTools();
    assert.equal((await lax.callTool('get-structured-content', { location: 'Chicago' })).structuredContent.temperature, 36);
    const paris = await lax.callTool('get-structured-content', { location: 'Paris' }, { validateArguments: true }).then(
      (r) => assert.fail(JSON.stringify(r)), (e) => e);
    assert.equal(paris.kind, 'invalid_argument');
    assert.match(paris.message, /at \/location/);
    await assert.rejects(lax.callTool('echo', {}, { validateArguments: 'yes' }), { kind: 'invalid_argument', message: /`validateArguments` must be true or false/ });
  });
});
