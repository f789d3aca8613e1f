// A Node host that serves what an MCP server asks of it: sampling, elicitation (form and URL),
// roots and log messages — in both protocol eras, with the same handlers. Handlers may be sync or
// async; a handler that throws becomes a JSON-RPC error to the server.
//
//   tests/install-deps.sh   (koffi, and server-everything in .deps/npm)
//   node examples/node/host.js                                # server-everything from .deps
//   node examples/node/host.js npx -y @modelcontextprotocol/server-everything
//   node examples/node/host.js .deps/venv/bin/python tests/servers/modern_server.py   # 2026-07-28
const path = require('path');
const { Client, McpError } = require('../../bindings/node');

const EVERYTHING = path.join(__dirname, '..', '..', '.deps', 'npm', 'node_modules', '@modelcontextprotocol',
  'server-everything', 'dist', 'index.js');

async function main() {
  const argv = process.argv.slice(2);
  const [command, ...args] = argv.length ? argv : [process.execPath, EVERYTHING];
  const client = await Client.connect({ command, args }, {
    handlers: {
      // Your model goes here; this one answers with the last message's text, reversed.
      'sampling/createMessage': (params) => {
        const last = params.messages[params.messages.length - 1].content;
        const text = last.type === 'text' ? [...last.text].reverse().join('') : '(not text)';
        return { role: 'assistant', content: { type: 'text', text }, model: 'reverser', stopReason: 'endTurn' };
      },
      // Your UI goes here: a form to fill in, or a URL to open. `signal` aborts if the server or
      // the call gives up first.
      'elicitation/create': async (params, { signal }) => {
        if (params.mode === 'url') {
          console.log(`[host] the server asks the user to open ${params.url}: ${params.message}`);
          return { action: 'accept' };
        }
        console.log(`[host] form: ${params.message}`);
        if (signal.aborted) return { action: 'cancel' };
        return { action: 'accept', content: { name: 'Ada Lovelace', check: true } }; // defaults fill the rest
      },
    },
    capabilities: { elicitation: { url: true } }, // URL mode as well as the handler's form mode
    roots: [{ uri: `file://${process.cwd()}`, name: 'cwd' }], // answered by the library
    elicitationDefaults: true,
    logLevel: 'info',
    connectTimeoutMs: 20000,
  });
  client.on('log', (m) => console.log(`[server log ${m.level}] ${typeof m.data === 'string' ? m.data : JSON.stringify(m.data)}`));
  client.on('requestCancelled', (r) => console.log(`[host] never mind ${r.method} ${r.id}: ${r.reason}`));
  try {
    console.log('connected:', client.serverInfo.name, client.era, client.protocolVersion);
    const tools = new Set((await client.listTools()).map((t) => t.name));
    const show = (r) => r.content.filter((b) => b.type === 'text').map((b) => b.text.split('\n')[0]).join(' | ');
    if (tools.has('trigger-sampling-request')) {
      const text = (await client.callTool('trigger-sampling-request', { prompt: 'hello' })).content[0].text;
      console.log('sampling ->', JSON.parse(text.slice(text.indexOf('{'))).content.text);
    }
    // The Python SDK's 2026-07-28 test server asks through InputRequiredResult instead.
    if (tools.has('greet')) console.log('greet ->', show(await client.callTool('greet', {})));
    if (tools.has('summarize')) console.log('summarize ->', show(await client.callTool('summarize', { text: 'hello' })));
    if (tools.has('trigger-elicitation-request')) {
      const r = await client.callTool('trigger-elicitation-request', {});
      console.log('elicitation ->', r.content[1] ? r.content[1].text.replace(/\n/g, ' ') : show(r));
    }
    if (tools.has('get-roots-list')) {
      console.log('roots ->', show(await client.callTool('get-roots-list', {})));
      await client.setRoots([{ uri: `file://${process.cwd()}`, name: 'cwd' }, { uri: 'file:///tmp', name: 'tmp' }]);
    }
    if (tools.has('simulate-research-query')) {
      // A tool that becomes a task: awaited for us (polling the server as it suggests).
      console.log('task ->', show(await client.callTool('simulate-research-query', { topic: 'MCP' })));
    }
  } catch (e) {
    if (!(e instanceof McpError)) throw e;
    console.log('failed:', e.kind, e.message);
  } finally {
    await client.close();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
