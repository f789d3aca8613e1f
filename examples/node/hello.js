// A minimal Node host: connect to an MCP server over stdio, list its tools, call one.
//
//   cargo build --release --examples && tests/install-deps.sh   (koffi for the binding)
//   node examples/node/hello.js                  # the bundled demo server
//   node examples/node/hello.js node server.js   # any stdio server
const { Client, McpError } = require('../../bindings/node');

async function main() {
  const argv = process.argv.slice(2);
  const [command, ...args] = argv.length ? argv : ['target/release/examples/demo', '--serve'];
  const client = await Client.connect({ command, args }, { connectTimeoutMs: 10000 });
  try {
    console.log('connected:', client.serverInfo.name, 'protocol', client.protocolVersion);
    for (const tool of await client.listTools()) console.log(' -', tool.name);
    const result = await client.callTool('echo', { message: 'hello from Node' }, { timeoutMs: 5000 });
    console.log('echo:', result.content[0].text);
    try {
      await client.callTool('no-such-tool', {});
    } catch (e) {
      if (!(e instanceof McpError)) throw e;
      console.log('no-such-tool:', e.kind, e.code, e.message);
    }
  } finally {
    await client.close();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
