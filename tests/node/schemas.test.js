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
});
