'use strict';
// Issue 32, item 10, as a Node host meets it. Node never forks a live process: child_process.fork
// and cluster start a fresh one, which loads mcplug anew; so what a Node host needs is that such a
// child works while the parent's connections are open, and that the parent's are untouched.
// (The forked-child refusal itself is tested through C and Python: tests/c/regress_fork.c,
// tests/python/test_regress_fork.py.)
const h = require('./helpers');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const { fork } = require('child_process');

const { Client } = h.mcplug;

test('a child_process.fork child connects on its own while the parent keeps its client', async () => {
  const c = await Client.connect(h.faultServer('normal'));
  try {
    const child = fork(path.join(__dirname, 'fork_child.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const said = new Promise((resolve, reject) => {
      child.once('message', resolve);
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`the child exited with ${code} before it reported`)));
    });
    const exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    const report = await said;
    assert.deepEqual(report, { echo: 'Echo: from the child', pid: child.pid });
    assert.equal(await exited, 0);
    const r = await c.callTool('echo', { message: 'parent after' });
    assert.equal(r.content[0].text, 'Echo: parent after');
  } finally {
    await c.close();
  }
});
