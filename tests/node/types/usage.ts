// A host program written against bindings/node/index.d.ts, type-checked (never run) by
// `tsc -p tests/node/types` in tests/run.sh: a declaration that drifts from what hosts write
// (a missing method, a wrong result shape) fails the check.
import {
  Client, Manager, McpError, type Server, mergeConfig, cancel, version, captureLogs,
  type CallToolResult, type Completion, type GetPromptResult, type ManagerConfig, type PoolTool,
  type Prompt, type ReadResourceResult, type Resource, type ResourceTemplate, type Tool,
  type JsonObject, type ModelToolResult,
} from '../../../bindings/node';

async function client(): Promise<void> {
  const c: Client = await Client.connect({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] },
    { connectTimeoutMs: 30_000, clientInfo: { name: 'usage', version: version() } });
  try {
    const tools: Tool[] = await c.listTools();
    const asTools: JsonObject[] = await c.listTools({ format: 'anthropic' });
    console.log(asTools.length);
    const names: string[] = tools.map((t) => t.name);
    const result: CallToolResult = await c.callTool('echo', { message: 'hi' }, { timeoutMs: 5_000 });
    const resources: Resource[] = await c.listResources({ cache: false });
    const templates: ResourceTemplate[] = await c.listResourceTemplates();
    const read: ReadResourceResult = await c.readResource(resources[0].uri);
    const text: string | undefined = read.contents[0].text;
    const prompts: Prompt[] = await c.listPrompts();
    const prompt: GetPromptResult = await c.getPrompt('args-prompt', { city: 'Paris' });
    const role: 'user' | 'assistant' = prompt.messages[0].role;
    const done: Completion = await c.complete({ type: 'ref/prompt', name: 'completable-prompt' },
      { name: 'department', value: 'E' }, { context: { name: 'x' } });
    const values: string[] = done.values ?? [];
    await c.complete({ type: 'ref/resource', uri: templates[0].uriTemplate }, { name: 'id', value: '1' });
    await c.ping({ timeoutMs: 1_000 });
    await c.subscribe(resources[0].uri);
    await c.unsubscribe(resources[0].uri);
    const raw = await c.request<{ resources: Resource[] }>('resources/list', null, { allPages: true });
    c.on('notification', (n) => console.log(n.method, names, result.isError, text, prompts.length, role, values, raw.resources));
  } catch (e) {
    if (e instanceof McpError && e.kind === 'timeout') cancel('x');
    throw e;
  } finally {
    await c.close();
  }
}

async function manager(): Promise<void> {
  const merged = mergeConfig({ user: { mcpServers: {} } });
  const m0 = await Manager.create();
  await m0.connect(mergeConfig({ user: { mcpServers: {} } }));
  await m0.close();
  const configs: ManagerConfig[] = [merged, { mcpServers: { e: { command: 'node', args: ['server.js'] } } }];
  const m = await Manager.create({ localConcurrency: 2, maxOutputChars: null });
  try {
    await m.connect(configs[1]);
    await m.wait(10_000);
    const { tools, dropped }: { tools: PoolTool[]; dropped: { reason: string }[] } = await m.listTools();
    const first: string = tools[0].name;
    const called: CallToolResult = await m.callTool(first, {});
    const forModel = (await m.callTool(first, {}, { format: 'anthropic' })) as ModelToolResult;
    const defs: JsonObject[] = (await m.listTools(null, { format: 'openai' })).tools;
    const found: JsonObject[] = (await m.searchTools('echo', { format: 'anthropic' })).tools;
    console.log(forModel.is_error, defs.length, found.length);
    const { prompts } = await m.listPrompts();
    console.log(dropped.map((d) => d.reason), called.content, prompts.length);
    const served: Server = await m.serve({ http: '127.0.0.1:0', names: 'unprefixed' });
    const url: string | null = served.url;
    await served.close();
    console.log(url, served.closed);
  } finally {
    await m.close();
  }
}

function logs(): void {
  const capture = captureLogs({ filter: 'debug,mcplug::wire=trace' }, (r) => {
    if (r.type === 'log') console.log(r.level, r.target, r.message, r.fields, r.timeMs);
    else console.log('dropped', r.dropped);
  });
  capture.on('end', () => console.log('ended', capture.filter, capture.maxRecords));
  capture.stop();
}

void client;
void logs;
void manager;
