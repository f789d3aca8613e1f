'use strict';
// Nothing leaks: after close() the server and its children are gone, handles and descriptors are
// released, and a script that closes its clients exits by itself.

const h = require('./helpers');
const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { spawn } = require('child_process');

function openFds() {
  return fs.readdirSync('/proc/self/fd').length;
}

/** The open descriptors once they are down to `limit`, or after 2 s: a failed connect returns
 * before its reader (which holds two descriptions of the server's stdout) has ended on the
 * library's runtime, a moment later. A leak never comes down. */
async function settledFds(limit) {
  const deadline = Date.now() + 2000;
  let n = openFds();
  while (n > limit && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    n = openFds();
  }
  return n;
}

/** Runs a node script (with mcplug at `MCPLUG`) and returns {code, signal, stdout, stderr, ms}. */
function runScript(source, { killAfterMs, onStdout } = {}) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const child = spawn(process.execPath, ['-e', source], {
      env: { ...process.env, MCPLUG: path.join(h.ROOT, 'bindings', 'node'), UV_THREADPOOL_SIZE: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
      if (onStdout) onStdout(stdout, child);
    });
    child.stderr.on('data', (d) => { stderr += d; });
    const guard = setTimeout(() => child.kill('SIGKILL'), killAfterMs || 20000);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - start });
    });
  });
}

describe('no leaks', { timeout: 60000 }, () => {
  test('grandchild mode: after close() the server and its grandchild are gone', async () => {
    const serverPidfile = h.tmpFile('server.pid');
    const grandchildPidfile = h.tmpFile('grandchild.pid');
    const client = await h.mcplug.Client.connect(
      h.faultServer('grandchild', { pidfile: serverPidfile, env: { FAULT_PIDFILE: grandchildPidfile } }),
      { connectTimeoutMs: 10000 },
    );
    const serverPid = h.readPid(serverPidfile);
    const grandchildPid = await h.waitFor(() => h.readPid(grandchildPidfile), 5000, 'the grandchild pidfile');
    assert.equal(h.pidExists(serverPid), true);
    assert.equal(h.pidExists(grandchildPid), true);
    assert.equal(h.textOf(await client.callTool('echo', { message: 'x' })), 'Echo: x');
    await h.within(10000, client.close(), 'close()');
    // The server is our library's child: it must be reaped, so kill(pid, 0) fails outright.
    assert.throws(() => process.kill(serverPid, 0), { code: 'ESRCH' });
    // The grandchild was reparented to init when the server died; the library killed the whole
    // process group, and init reaps it (allow it a moment).
    await h.waitFor(() => !h.pidExists(grandchildPid), 2000, `the grandchild ${grandchildPid} to be gone`);
    assert.throws(() => process.kill(grandchildPid, 0), { code: 'ESRCH' });
  });

  test('a server that ignores SIGTERM is still gone after a bounded close()', async () => {
    const pidfile = h.tmpFile('ignore-term.pid');
    const client = await h.mcplug.Client.connect(h.faultServer('ignore-term', { pidfile }), {
      connectTimeoutMs: 10000,
      options: { shutdown_grace_ms: 200 },
    });
    const pid = h.readPid(pidfile);
    const start = Date.now();
    await h.within(10000, client.close(), 'close()');
    assert.ok(Date.now() - start < 5000, `close took ${Date.now() - start} ms`);
    assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' });
  });

  test('connect/call/close cycles leave no file descriptors behind', async () => {
    const cycle = async () => {
      const c = await h.mcplug.Client.connect(h.faultServer(), { connectTimeoutMs: 10000 });
      await c.callTool('echo', { message: 'cycle' });
      await c.close();
    };
    await cycle(); // warm-up: the library's runtime and koffi allocate once
    const before = openFds();
    for (let i = 0; i < 8; i++) await cycle();
    const after = openFds();
    assert.ok(after <= before + 1, `open fds grew from ${before} to ${after}`);
  });

  test('failed connects leave no processes or descriptors behind', async () => {
    const before = openFds();
    for (let i = 0; i < 5; i++) {
      const o = await h.outcome(h.mcplug.Client.connect(h.faultServer('exit-now'), { connectTimeoutMs: 5000 }));
      assert.equal(o.ok, false);
    }
    const after = await settledFds(before + 1);
    assert.ok(after <= before + 1, `open fds grew from ${before} to ${after}`);
  });

  test('a script that closes its client exits by itself', async () => {
    const script = `
      const { Client } = require(process.env.MCPLUG);
      (async () => {
        const c = await Client.connect({ command: 'python3', args: [${JSON.stringify(h.FAULT_SERVER)}] });
        const r = await c.callTool('echo', { message: 'bye' });
        console.log(r.content[0].text);
        await c.close();
      })().catch((e) => { console.error(e); process.exit(2); });`;
    const r = await runScript(script);
    assert.equal(r.signal, null, `killed: ${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'Echo: bye');
    assert.ok(r.ms < 10000);
  });

  test('an open client keeps the process alive; the server goes when the host dies', async () => {
    const pidfile = h.tmpFile('alive.pid');
    const script = `
      const { Client } = require(process.env.MCPLUG);
      Client.connect({ command: 'sh', args: ['-c', 'echo $$ > "$1"; exec python3 "$2"', 'sh', ${JSON.stringify(pidfile)}, ${JSON.stringify(h.FAULT_SERVER)}] })
        .then(() => console.log('connected'), (e) => { console.error(e); process.exit(2); });`;
    let connectedAt = 0;
    const r = await runScript(script, {
      onStdout: (out, child) => {
        if (!connectedAt && out.includes('connected')) {
          connectedAt = Date.now();
          // Still running 1.5 s later (the pump keeps it alive), then we end it.
          setTimeout(() => child.kill('SIGTERM'), 1500);
        }
      },
    });
    assert.ok(connectedAt, `never connected: ${r.stderr}`);
    assert.equal(r.signal, 'SIGTERM', 'the process was still alive when it was told to stop');
    const pid = h.readPid(pidfile);
    assert.ok(pid);
    // The server reads EOF on stdin once its host is gone, and exits.
    await h.waitFor(() => !h.pidExists(pid), 5000, 'the orphaned server to exit');
  });
});
