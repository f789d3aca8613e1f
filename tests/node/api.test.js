'use strict';
// The module's surface: exports, versions, the ABI check at load, library discovery, McpError.

const h = require('./helpers');
const { test, describe } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const os = require('os');
const { spawnSync, execFileSync } = require('child_process');

const BINDING = path.join(h.ROOT, 'bindings', 'node');

/** Requires the binding in a fresh node with `env`; returns {status, stdout, stderr}. */
function requireIn(env, code = 'const m = require(process.argv[1]); console.log(m.libraryPath);') {
  const r = spawnSync(process.execPath, ['-e', code, BINDING], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 20000,
  });
  return r;
}

describe('module surface', { timeout: 60000 }, () => {
  test('exports', () => {
    const m = h.mcplug;
    for (const name of ['Client', 'Manager', 'McpError', 'cancel', 'version', 'abiVersion']) {
      assert.equal(typeof m[name], 'function', name);
    }
    assert.equal(m.ABI_VERSION, 1);
    assert.deepEqual(m.ERROR_KINDS, [
      'invalid_argument', 'timeout', 'cancelled', 'closed', 'transport', 'protocol', 'rpc',
      'needs_auth', 'denied', 'config', 'panic', 'not_found', 'not_implemented', 'invalid_result',
    ]);
    // The kinds follow the C enum's numbers.
    m.ERROR_KINDS.forEach((kind, i) => assert.equal(m.Status[kind.toUpperCase()], i + 1, kind));
    assert.equal(m.Status.OK, 0);
  });

  test('version() is the crate version and abiVersion() the binding\'s', () => {
    const cargo = fs.readFileSync(path.join(h.ROOT, 'Cargo.toml'), 'utf8');
    const crateVersion = cargo.match(/^version\s*=\s*"([^"]+)"/m)[1];
    assert.equal(h.mcplug.version(), crateVersion);
    assert.equal(h.mcplug.abiVersion(), h.mcplug.ABI_VERSION);
    const header = fs.readFileSync(path.join(h.ROOT, 'include', 'mcplug.h'), 'utf8');
    assert.equal(Number(header.match(/#define MCPLUG_ABI_VERSION (\d+)/)[1]), h.mcplug.ABI_VERSION);
  });

  test('McpError', () => {
    const e = new h.mcplug.McpError('boom', { kind: 'rpc', code: -32000, data: { x: 1 } });
    assert.ok(e instanceof Error);
    assert.equal(e.name, 'McpError');
    assert.equal(e.message, 'boom');
    assert.equal(e.kind, 'rpc');
    assert.equal(e.code, -32000);
    assert.deepEqual(e.data, { x: 1 });
    assert.equal(e.status, h.mcplug.Status.RPC);
    assert.match(String(e), /^McpError: boom/);
  });

  test('cancel() of an unknown tag is false; a bad tag is invalid_argument', () => {
    assert.equal(h.mcplug.cancel('mcplug-node-no-such-tag'), false);
    assert.throws(() => h.mcplug.cancel(42), { name: 'McpError', kind: 'invalid_argument' });
  });

  test('the Client constructor is not for users', () => {
    assert.throws(() => new h.mcplug.Client(), TypeError);
  });

  test('MCPLUG_LIBRARY picks the library', () => {
    const debug = path.join(h.ROOT, 'target', 'debug', 'libmcplug.so');
    const release = path.join(h.ROOT, 'target', 'release', 'libmcplug.so');
    // A checkout without a build (the library given by MCPLUG_LIBRARY) still has one to pick.
    const lib = [debug, release, process.env.MCPLUG_LIBRARY].find((f) => f && fs.existsSync(f)) || release;
    const r = requireIn({ MCPLUG_LIBRARY: lib });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), lib);
  });

  test('MCPLUG_LIBRARY naming a missing file fails clearly at require', () => {
    const r = requireIn({ MCPLUG_LIBRARY: '/nonexistent/libmcplug.so' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /MCPLUG_LIBRARY is set to \/nonexistent\/libmcplug\.so, which does not exist/);
  });

  test('a library of another ABI is refused, naming both numbers and the path', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcplug-abi-'));
    const src = path.join(dir, 'fake.c');
    const lib = path.join(dir, 'libmcplug.so');
    fs.writeFileSync(src, 'unsigned int mcplug_abi_version(void) { return 999; }\n');
    try {
      execFileSync('cc', ['-shared', '-fPIC', '-o', lib, src], { stdio: 'pipe', timeout: 20000 });
    } catch (e) {
      assert.fail(`cc could not build the fake library (a C compiler is needed): ${e.message}`);
    }
    const r = requireIn({ MCPLUG_LIBRARY: lib });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /ABI version 999/);
    assert.match(r.stderr, /needs ABI version 1/);
    assert.ok(r.stderr.includes(lib), r.stderr);
  });

  test('a UV_THREADPOOL_SIZE chosen by the user is kept', () => {
    const r = requireIn({ UV_THREADPOOL_SIZE: '12' },
      'const m = require(process.argv[1]); console.log(process.env.UV_THREADPOOL_SIZE, m.threadpoolSize, m.workLimit);');
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split(' ').map(Number), [12, 12, 9]);
  });

  test('index.d.ts declares what index.js exports', () => {
    const dts = fs.readFileSync(path.join(BINDING, 'index.d.ts'), 'utf8');
    for (const name of Object.keys(h.mcplug)) {
      assert.match(dts, new RegExp(`export (declare )?(class|function|const|type|interface) ${name}\\b`), `${name} missing from index.d.ts`);
    }
    const pkg = JSON.parse(fs.readFileSync(path.join(BINDING, 'package.json'), 'utf8'));
    assert.equal(pkg.name, 'mcplug');
    assert.equal(pkg.main, 'index.js');
    assert.equal(pkg.types, 'index.d.ts');
    assert.equal(pkg.dependencies.koffi, '3.3.4');
  });
});
