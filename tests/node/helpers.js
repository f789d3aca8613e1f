'use strict';
// Shared helpers for the `node --test tests/node/` suite. Require this first in every test file:
// it loads mcplug before anything touches libuv's threadpool, so the binding's
// UV_THREADPOOL_SIZE default takes effect.

const path = require('path');
const fs = require('fs');
const os = require('os');
const net = require('net');
const http = require('http');
const { spawn } = require('child_process');

const ROOT = path.resolve(__dirname, '..', '..');
/** UV_THREADPOOL_SIZE as the environment gave it, before the binding set its default. */
const userThreadpoolSize = process.env.UV_THREADPOOL_SIZE || null;
if (!fs.existsSync(path.join(ROOT, 'bindings', 'node', 'node_modules', 'koffi', 'package.json'))) {
  throw new Error(`the Node binding's dependency koffi is not installed; install it from ${ROOT} with:\n` +
    '  cd bindings/node && npm install --no-audit --no-fund\n(or run tests/install-deps.sh)');
}
// The default OAuth store (where a 401's needs-auth is remembered) under the build folder, never
// the user's.
process.env.XDG_STATE_HOME = path.join(ROOT, 'target', 'test-state', `node-${process.pid}`);
const mcplug = require(path.join(ROOT, 'bindings', 'node'));

const NPM_INSTALL =
  "mkdir -p .deps/npm && cd .deps/npm && echo '{\"private\":true}' > package.json && " +
  'npm install @modelcontextprotocol/server-everything@2026.8.31 koffi@3.3.4   (or: tests/install-deps.sh)';
const VENV_INSTALL = 'python3 -m venv .deps/venv && .deps/venv/bin/pip install pytest mcp==2.3.0   (or: tests/install-deps.sh)';

const EVERYTHING = path.join(ROOT, '.deps', 'npm', 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const EVERYTHING_TOOLS = path.join(path.dirname(EVERYTHING), 'tools');
const VENV_PYTHON = path.join(ROOT, '.deps', 'venv', 'bin', 'python');
const FAULT_SERVER = path.join(ROOT, 'tests', 'servers', 'fault_server.py');
const MODERN_SERVER = path.join(ROOT, 'tests', 'servers', 'modern_server.py');

/** Fails with the command that installs a missing peer (run from the repository root). */
function needPeer(file, install) {
  if (!fs.existsSync(file)) {
    throw new Error(`test peer missing: ${file}\ninstall it from ${ROOT} with:\n  ${install}`);
  }
  return file;
}

function everythingServer() {
  needPeer(EVERYTHING, NPM_INSTALL);
  return { command: process.execPath, args: [EVERYTHING], name: 'everything' };
}

function modernServer() {
  needPeer(VENV_PYTHON, VENV_INSTALL);
  needPeer(MODERN_SERVER, 'tests/servers/modern_server.py is part of the repository');
  return { command: VENV_PYTHON, args: [MODERN_SERVER], name: 'modern' };
}

/**
 * The fault server in `mode`. With `pidfile`, it runs under `sh -c 'echo $$ > pidfile; exec ...'`
 * (dash: `exec` keeps the pid), so the test knows the server's own pid.
 */
function faultServer(mode = 'normal', { pidfile, env } = {}) {
  needPeer(FAULT_SERVER, 'tests/servers/fault_server.py is part of the repository');
  const server = pidfile
    ? { command: 'sh', args: ['-c', 'echo $$ > "$1"; exec python3 "$2" "$3"', 'sh', pidfile, FAULT_SERVER, mode] }
    : { command: 'python3', args: [FAULT_SERVER, mode] };
  server.name = `fault-${mode}`;
  if (env) server.env = env;
  return server;
}

/** A free TCP port on 127.0.0.1 (free when asked; the peer binds it right after). */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * server-everything over Streamable HTTP on a port of its own: resolves `{url, pid, close()}`
 * once the port accepts connections. `close()` kills it and waits for its exit.
 */
async function everythingHttp() {
  needPeer(EVERYTHING, NPM_INSTALL);
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  let exited = null;
  const exit = new Promise((resolve) => child.once('exit', (code, signal) => { exited = { code, signal }; resolve(); }));
  const close = async () => {
    if (exited === null) child.kill('SIGKILL');
    await exit;
  };
  try {
    await waitFor(() => {
      if (exited !== null) throw new Error(`server-everything (streamableHttp) exited at start: ${JSON.stringify(exited)}`);
      return new Promise((resolve) => {
        const s = net.connect(port, '127.0.0.1');
        s.once('connect', () => { s.destroy(); resolve(true); });
        s.once('error', () => resolve(false));
      });
    }, 20000, `server-everything listening on port ${port}`);
  } catch (e) {
    await close();
    throw e;
  }
  return { url: `http://127.0.0.1:${port}/mcp`, pid: child.pid, close };
}

/** Rejects with a clear message if `promise` does not settle within `ms`. */
function within(ms, promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Polls `check` (sync or async) until it returns a truthy value or `ms` pass. */
async function waitFor(check, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(20);
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Settles the promise and reports how: {ok, value} or {ok: false, error}, plus elapsed ms. */
async function outcome(promise) {
  const start = Date.now();
  try {
    const value = await promise;
    return { ok: true, value, ms: Date.now() - start };
  } catch (error) {
    return { ok: false, error, ms: Date.now() - start };
  }
}

/** True while `pid` exists (`kill(pid, 0)` succeeds). */
function pidExists(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    if (e.code === 'ESRCH') return false;
    throw e;
  }
}

/** A zombie is dead but not yet reaped by its parent (for a grandchild: by init). */
function isZombie(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

function tmpFile(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-node-'));
  return path.join(dir, name);
}

function readPid(file) {
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : '';
  return /^\d+$/.test(text) ? Number(text) : null;
}

/** The text of content block `i` of a CallToolResult. */
function textOf(result, i = 0) {
  const block = result && result.content && result.content[i];
  if (!block || block.type !== 'text') throw new Error(`content[${i}] is not text: ${JSON.stringify(result)}`);
  return block.text;
}

/** Connects and registers the close with the test, so a failing test leaks no server. */
async function connect(t, server, opts) {
  const client = await mcplug.Client.connect(server, opts);
  t.after(() => within(10000, client.close(), 'close() in cleanup'));
  return client;
}

/** The fault-injecting authorization server of ours (tests/servers/oauth_server.py), started
 * with `flags`: resolves `{proc, base, url}` once it listens (kill `proc` when done). */
function startOauthPeer(...flags) {
  const script = path.join(ROOT, 'tests', 'servers', 'oauth_server.py');
  return new Promise((resolve, reject) => {
    const p = spawn('python3', [script, ...flags], { stdio: ['ignore', 'pipe', 'inherit'] });
    p.stdout.once('data', (d) => {
      const m = /PORT (\d+)/.exec(String(d));
      if (!m) return reject(new Error(`oauth_server said ${d}`));
      resolve({ proc: p, base: `http://127.0.0.1:${m[1]}`, url: `http://127.0.0.1:${m[1]}/mcp` });
    });
    p.once('error', reject);
  });
}

/** A plain HTTP GET (no redirects followed): `{status, headers, body}`. */
function httpGet(url) {
  return new Promise((resolve, reject) => {
    http.get(url, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    }).on('error', reject);
  });
}

/** An `auth/authorize` handler that follows the authorization URL's redirect, as a browser
 * would, and hands back the callback URL it ends at. */
const followRedirect = async (params) => ({ callback_url: (await httpGet(params.url)).headers.location });

module.exports = {
  startOauthPeer,
  httpGet,
  followRedirect,
  ROOT,
  mcplug,
  userThreadpoolSize,
  EVERYTHING,
  EVERYTHING_TOOLS,
  FAULT_SERVER,
  everythingServer,
  modernServer,
  faultServer,
  within,
  waitFor,
  freePort,
  everythingHttp,
  sleep,
  outcome,
  pidExists,
  isZombie,
  tmpFile,
  readPid,
  textOf,
  connect,
};
