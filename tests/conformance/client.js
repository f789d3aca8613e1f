'use strict';
// mcplug's conformance client for the Node binding.
//
// Run by @modelcontextprotocol/conformance (tests/conformance/run.sh): the scenario's name is in
// MCP_CONFORMANCE_SCENARIO, the scenario server's URL is the last argument, and
// MCP_CONFORMANCE_CONTEXT carries a scenario's extra data. It does what the scenario asks through
// the binding's public API and exits 0; any error exits 1 with the error on stderr. client.c and
// client.py dispatch the same way: a scenario must pass (or fail) alike through all three.

const http = require('node:http');
const path = require('node:path');
const { Client, McpError } = require(path.join(__dirname, '..', '..', 'bindings', 'node'));

const log = (...parts) => console.error('[client.js]', ...parts);
const show = (v) => JSON.stringify(v);

function context() {
  const raw = process.env.MCP_CONFORMANCE_CONTEXT;
  return raw ? JSON.parse(raw) : {};
}

function connect(url, options = {}) {
  return Client.connect(
    { type: 'http', url },
    { connectTimeoutMs: 20000, requestTimeoutMs: 20000, toolTimeoutMs: 20000, ...options },
  );
}

// Runs `body` with a connected client and closes it, whatever happens.
async function withClient(url, options, body) {
  const c = await connect(url, options);
  try {
    await body(c);
  } finally {
    await c.close();
  }
}

// initialize, tools_call: list the tools, call the first with the numbers it adds.
const basic = (url) => withClient(url, {}, async (c) => {
  const tools = await c.listTools();
  log('tools:', show(tools.map((t) => t.name)));
  if (tools.length > 0) log('result:', show(await c.callTool(tools[0].name, { a: 2, b: 3 })));
});

// json-schema-ref-no-deref: the tool's schema has a network $ref that must not be fetched.
const listOnly = (url) => withClient(url, {}, async (c) => {
  log('tools:', show((await c.listTools()).map((t) => t.name)));
});

// json-schema-2020-12-preservation: echo the focal tool's inputSchema back, untouched.
const schemaPreservation = (url) => withClient(url, {}, async (c) => {
  const focal = (await c.listTools()).find((t) => t.name === 'json_schema_2020_12_tool');
  if (!focal) throw new Error('json_schema_2020_12_tool was not listed');
  log('result:', show(await c.callTool('json_schema_echo', { schema: focal.inputSchema })));
});

// Lists the tools and calls each with no arguments (elicitation defaults, sse-retry).
const callEveryTool = (url, options = {}) => withClient(url, options, async (c) => {
  for (const tool of await c.listTools()) log(tool.name, '->', show(await c.callTool(tool.name, {})));
});

// request-metadata (2026-07-28): every request carries the version header and _meta; roots,
// sampling and elicitation are declared so that their declarations are checked too.
const requestMetadata = (url) => withClient(
  url,
  { roots: [{ uri: 'file:///tmp', name: 'tmp' }], capabilities: { sampling: {}, elicitation: {} } },
  async (c) => {
    log('era:', c.era, c.protocolVersion);
    log('tools:', show((await c.listTools()).map((t) => t.name)));
  },
);

// sep-2322: InputRequiredResult rounds, resolved inside callTool by the library.
const requestState = (url) => withClient(
  url,
  { handlers: { 'elicitation/create': () => ({ action: 'accept', content: { confirmed: true } }) } },
  async (c) => {
    await c.listTools();
    for (const name of ['test_mrtr_echo_state', 'test_mrtr_unrelated', 'test_mrtr_no_state',
      'test_mrtr_no_result_type']) {
      log(name, '->', show(await c.callTool(name, {})));
    }
  },
);

// http-standard-headers: one of each request that carries Mcp-Method / Mcp-Name.
const standardHeaders = (url) => withClient(url, {}, async (c) => {
  for (const tool of await c.listTools()) await c.callTool(tool.name, {});
  const { resources } = await c.request('resources/list', null, { allPages: true });
  for (const r of resources) await c.request('resources/read', { uri: r.uri });
  const { prompts } = await c.request('prompts/list', null, { allPages: true });
  for (const p of prompts) await c.request('prompts/get', { name: p.name });
});

// http-custom-headers: the calls the scenario's context names (x-mcp-header arguments).
const customHeaders = (url) => withClient(url, {}, async (c) => {
  await c.listTools();
  for (const call of context().toolCalls) {
    log(call.name, '->', show(await c.callTool(call.name, call.arguments)));
  }
});

const SAMPLES = { string: 'x', integer: 1, number: 1.5, boolean: true, object: {}, array: [], null: null };
const sampleValue = (schema) => (typeof schema?.type === 'string' && schema.type in SAMPLES ? SAMPLES[schema.type] : 'x');

// http-invalid-tool-headers: call every tool the library kept; invalid ones must be gone.
const invalidToolHeaders = (url) => withClient(url, {}, async (c) => {
  for (const tool of await c.listTools()) {
    const schema = tool.inputSchema || {};
    const args = {};
    for (const key of schema.required || []) args[key] = sampleValue((schema.properties || {})[key]);
    try {
      log(tool.name, '->', show(await c.callTool(tool.name, args)));
    } catch (e) {
      if (!(e instanceof McpError)) throw e;
      log(tool.name, 'refused:', e.message);
    }
  }
});

// sep-2640-*: the skills extension, as a host uses it. The skills are listed (no file may be
// fetched then: sep-2640-client-no-prefetch); with `load`, each skill is loaded -- the library
// reads its SKILL.md and verifies it (size, digest, frontmatter) against the listed entry -- and
// then each of its other files is read, verified the same way. A skill that fails verification
// is refused by the library, so its files are never read (the verify-* scenarios check that).
const skills = (load) => (url) => withClient(url, {}, async (c) => {
  const listed = await c.listSkills();
  log('skills:', show(listed));
  for (const entry of load ? listed : []) {
    let loaded;
    try {
      loaded = await c.loadSkill(entry.uri);
    } catch (e) {
      if (!(e instanceof McpError) || e.kind !== 'invalid_result') throw e;
      log(entry.uri, 'refused:', e.message);
      continue;
    }
    log(entry.uri, 'loaded:', show(loaded));
    for (const uri of Array.isArray(loaded.files) ? loaded.files : []) {
      if (uri === entry.uri) continue;
      try {
        log(uri, 'read:', show(await c.readSkillFile(entry.uri, uri)));
      } catch (e) {
        if (!(e instanceof McpError) || e.kind !== 'invalid_result') throw e;
        log(uri, 'refused:', e.message);
      }
    }
  }
});

// The headless follower: what a browser does at an authorization server whose /authorize
// redirects at once. The redirect's URL goes back as the callback.
function followRedirect(params) {
  return new Promise((resolve, reject) => {
    const req = http.get(params.url, (res) => {
      res.resume();
      if (res.headers.location) resolve({ callback_url: res.headers.location });
      else reject(new Error(`GET /authorize answered ${res.statusCode} without a Location`));
    });
    req.on('error', reject);
  });
}

// The server entry of an auth scenario: its `oauth` from the scenario and its context.
function authEntry(url, scenario) {
  const ctx = context();
  const oauth = { clientMetadataUrl: 'https://conformance-test.local/client-metadata.json' };
  let pick = { client_id: 'clientId', client_secret: 'clientSecret' };
  if (scenario.includes('client-credentials')) {
    oauth.grant = 'client_credentials';
    Object.assign(pick, { private_key_pem: 'privateKey', signing_algorithm: 'signingAlgorithm' });
  } else if (scenario.includes('wif')) {
    oauth.grant = 'jwt_bearer';
    pick = { client_id: 'clientId', valid_jwt: 'assertion' };
  } else if ('idp_id_token' in ctx) {
    oauth.grant = 'enterprise';
    oauth.enterprise = {};
    for (const [f, k] of [['idp_client_id', 'idpClientId'], ['idp_id_token', 'idToken'],
      ['idp_issuer', 'idpIssuer'], ['idp_token_endpoint', 'idpTokenEndpoint']]) {
      if (f in ctx) oauth.enterprise[k] = ctx[f];
    }
  } else {
    pick.issuer = 'issuer';
  }
  for (const [field, key] of Object.entries(pick)) if (field in ctx) oauth[key] = ctx[field];
  return { type: 'http', url, oauth };
}

// auth/*: the library authorizes on the first 401; the handler follows the redirect.
async function authFlow(url) {
  const c = await Client.connect(authEntry(url, process.env.MCP_CONFORMANCE_SCENARIO), {
    connectTimeoutMs: 20000, requestTimeoutMs: 20000, toolTimeoutMs: 20000,
    handlers: { 'auth/authorize': followRedirect },
    options: { auth_store: 'memory', auth_timeout_ms: 20000 },
  });
  try {
    await c.listTools();
    await c.callTool('test-tool', {});
  } finally {
    await c.close();
  }
}

const SCENARIOS = {
  initialize: basic,
  tools_call: basic,
  'json-schema-ref-no-deref': listOnly,
  'json-schema-2020-12-preservation': schemaPreservation,
  'elicitation-sep1034-client-defaults': (url) => callEveryTool(url, {
    handlers: { 'elicitation/create': () => ({ action: 'accept', content: {} }) },
    elicitationDefaults: true,
  }),
  'sse-retry': (url) => callEveryTool(url),
  'request-metadata': requestMetadata,
  'sep-2322-client-request-state': requestState,
  'http-standard-headers': standardHeaders,
  'http-custom-headers': customHeaders,
  'http-invalid-tool-headers': invalidToolHeaders,
  'sep-2640-client-no-prefetch': skills(false),
};

function handlerFor(name) {
  if (name in SCENARIOS) return SCENARIOS[name];
  if (name.startsWith('sep-2640-')) return skills(true);
  if (name.startsWith('auth/')) return authFlow;
  return null;
}

async function main() {
  const name = process.env.MCP_CONFORMANCE_SCENARIO;
  const url = process.argv[process.argv.length - 1];
  if (!name || process.argv.length < 3) {
    log('usage: MCP_CONFORMANCE_SCENARIO=<name> node client.js <server-url>');
    return 1;
  }
  const run = handlerFor(name);
  if (!run) {
    log(`unknown scenario '${name}'`);
    return 1;
  }
  try {
    await run(url);
  } catch (e) {
    log(`${name}: ${e instanceof McpError ? `${e.kind}: ${e.message}` : (e && e.stack) || e}`);
    return 1;
  }
  return 0;
}

main().then((code) => process.exit(code));
