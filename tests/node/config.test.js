'use strict';
// Configuration through the C ABI from Node: the corpus of tests/config/cases replayed (the same
// files the Rust test runs), discovery on real files, editing, and errors.
const { mcplug, ROOT } = require('./helpers');
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');

const CASES_DIR = path.join(ROOT, 'tests', 'config', 'cases');
const cases = fs.readdirSync(CASES_DIR).filter((f) => f.endsWith('.json')).sort();

test('the corpus is there', () => {
  assert.ok(cases.length >= 20, `only ${cases.length} cases`);
});

for (const file of cases) {
  test(`corpus: ${file}`, () => {
    const c = JSON.parse(fs.readFileSync(path.join(CASES_DIR, file), 'utf8'));
    if (c.expected_error) {
      assert.throws(() => mcplug.mergeConfig(c.sources), (e) => {
        assert.ok(e instanceof mcplug.McpError);
        assert.equal(e.kind, c.expected_error.kind);
        assert.ok(e.message.includes(c.expected_error.message_contains), e.message);
        return true;
      });
    } else {
      assert.deepStrictEqual(mcplug.mergeConfig(c.sources), c.expected, c.description);
    }
  });
}

function tree() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-config-'));
  const write = (rel, v) => {
    const p = path.join(root, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, typeof v === 'string' ? v : JSON.stringify(v, null, 2));
  };
  const opts = (extra = {}) => ({ home: path.join(root, 'home'), cwd: path.join(root, 'repo'), managed_dir: path.join(root, 'managed'), env: {}, ...extra });
  return { root, write, opts, done: () => fs.rmSync(root, { recursive: true, force: true }) };
}

test('discoverConfig reads real files, other hosts on request, and reports a malformed one with line and column', () => {
  const t = tree();
  try {
    t.write('home/.claude.json', { mcpServers: { u: { command: 'u' } } });
    t.write('home/.codeium/windsurf/mcp_config.json', { mcpServers: { w: { serverUrl: 'https://w.example/mcp' } } });
    t.write('home/.config/zed/settings.json', '{\n  // comment\n  "context_servers": {"z": {"command": "z",},},\n}');
    t.write('repo/.vscode/mcp.json', '{"servers": {"v": {"command": "v"}}');
    const r = mcplug.discoverConfig(t.opts({ hosts: ['windsurf', 'zed', 'vscode'] }));
    assert.deepStrictEqual(Object.keys(r.servers).sort(), ['u', 'w', 'z']);
    assert.equal(r.servers.w.scope, 'windsurf');
    assert.deepStrictEqual(r.servers.w.config, { url: 'https://w.example/mcp', type: 'http' });
    assert.equal(r.errors.length, 1);
    assert.equal(r.errors[0].file, path.join(t.root, 'repo/.vscode/mcp.json'));
    assert.equal(r.errors[0].scope, 'vscode');
    assert.deepStrictEqual([r.errors[0].line, r.errors[0].column], [1, 35]);
  } finally {
    t.done();
  }
});

test('addConfigServer / removeConfigServer keep the rest of the file', () => {
  const t = tree();
  try {
    t.write('repo/.mcp.json', '{"$schema": "x", "mcpServers": {"b": {"command": "b"}}, "extra": [1]}');
    const o = { home: path.join(t.root, 'home'), cwd: path.join(t.root, 'repo') };
    const r = mcplug.addConfigServer('project', 'a', { type: 'http', url: 'https://a/mcp' }, o);
    assert.equal(r.created, false);
    const v = JSON.parse(fs.readFileSync(path.join(t.root, 'repo/.mcp.json'), 'utf8'));
    assert.deepStrictEqual(Object.keys(v), ['$schema', 'mcpServers', 'extra']);
    assert.deepStrictEqual(Object.keys(v.mcpServers), ['b', 'a']);
    const merged = mcplug.discoverConfig(t.opts({ settings: { enableAllProjectMcpServers: true } }));
    assert.deepStrictEqual(Object.keys(merged.servers).sort(), ['a', 'b']);
    assert.deepStrictEqual(mcplug.removeConfigServer('project', 'b', o).removed, { command: 'b' });
    assert.throws(() => mcplug.removeConfigServer('project', 'b', o), (e) => e.kind === 'not_found');
    assert.throws(() => mcplug.addConfigServer('project', 'x__y', { command: 'x' }, o), (e) => e.kind === 'invalid_argument' && /"__"/.test(e.message));
  } finally {
    t.done();
  }
});

test('strict_mcp_config: only the given servers, the policy applied to them', () => {
  const t = tree();
  try {
    t.write('home/.claude.json', { mcpServers: { u: { command: 'u' } } });
    t.write('home/.claude/settings.json', { deniedMcpServers: [{ serverName: 'b' }] });
    const dynamic = { mcpServers: { g: { command: 'g' }, b: { command: 'b' } } };
    const r = mcplug.discoverConfig(t.opts({ dynamic, strict_mcp_config: true }));
    assert.deepStrictEqual(Object.keys(r.servers), ['g']);
    assert.deepStrictEqual(r.excluded.map((e) => [e.name, e.reason]), [['b', 'denied']]);
    assert.deepStrictEqual(Object.keys(mcplug.discoverConfig(t.opts({ dynamic })).servers).sort(), ['g', 'u']);
  } finally {
    t.done();
  }
});

test('bad input is a clear error', () => {
  assert.throws(() => mcplug.mergeConfig(null), (e) => e.kind === 'invalid_argument');
  assert.throws(() => mcplug.mergeConfig({ user: 3 }), (e) => e.kind === 'invalid_argument' && /`user` must be/.test(e.message));
  assert.throws(
    () => mcplug.mergeConfig({ settings: { allowedMcpServers: [{}] } }),
    (e) => e.kind === 'config' && /exactly one of serverName, serverCommand, serverUrl \(got none\)/.test(e.message),
  );
});

test('approveProjectServer and resetProjectChoices write what Claude Code\'s dialog writes', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-approve-'));
  try {
    const home = path.join(dir, 'home');
    const project = path.join(dir, 'project');
    fs.mkdirSync(home);
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, '.mcp.json'), JSON.stringify({ mcpServers: { p: { command: 'node', args: ['p.js'] } } }));
    const reason = () => {
      const found = mcplug.discoverConfig({ home, cwd: project, managed_dir: path.join(dir, 'managed') });
      return found.servers.p ? 'approved' : found.excluded.find((e) => e.name === 'p').reason;
    };
    assert.equal(reason(), 'pending_approval');
    const out = mcplug.approveProjectServer('p', { cwd: project });
    assert.deepEqual(out.enabledMcpjsonServers, ['p']);
    assert.equal(reason(), 'approved');
    mcplug.approveProjectServer('p', { choice: 'no', cwd: project });
    assert.equal(reason(), 'rejected');
    assert.deepEqual(mcplug.resetProjectChoices({ cwd: project }).reset, ['enabledMcpjsonServers', 'disabledMcpjsonServers']);
    assert.equal(reason(), 'pending_approval');
    assert.throws(() => mcplug.approveProjectServer('p', { choice: 'maybe', cwd: project }), { kind: 'invalid_argument' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
