'use strict';
// index.d.ts against the module as it runs: every name it exports is exported, and every class
// it declares has the methods it declares, and no public method it does not. Read with the
// TypeScript compiler's parser (tests/install-deps.sh puts typescript in .deps/npm).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { EventEmitter } = require('node:events');

const root = path.resolve(__dirname, '..', '..');
const dts = path.join(root, 'bindings', 'node', 'index.d.ts');

function typescript() {
  const where = path.join(root, '.deps', 'npm', 'node_modules', 'typescript');
  if (!fs.existsSync(where)) throw new Error(`typescript is not at ${where}: run tests/install-deps.sh`);
  return require(where);
}

/** `{values: Set<name>, classes: Map<name, {methods, statics, properties}>}` of index.d.ts. */
function declarations() {
  const ts = typescript();
  const file = ts.createSourceFile(dts, fs.readFileSync(dts, 'utf8'), ts.ScriptTarget.Latest, true);
  const values = new Set();
  const classes = new Map();
  const exported = (node) => (ts.getModifiers(node) || []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  for (const node of file.statements) {
    if (!exported(node)) continue;
    if (ts.isVariableStatement(node)) {
      for (const d of node.declarationList.declarations) values.add(d.name.text);
    } else if (ts.isFunctionDeclaration(node)) {
      values.add(node.name.text);
    } else if (ts.isClassDeclaration(node)) {
      values.add(node.name.text);
      const members = { methods: new Set(), statics: new Set(), properties: new Set() };
      for (const m of node.members) {
        if (!m.name || ts.isConstructorDeclaration(m)) continue;
        const name = m.name.getText(file);
        const isStatic = (ts.getModifiers(m) || []).some((x) => x.kind === ts.SyntaxKind.StaticKeyword);
        if (isStatic) members.statics.add(name);
        else if (ts.isMethodDeclaration(m)) members.methods.add(name);
        else members.properties.add(name);
      }
      classes.set(node.name.text, members);
    }
  }
  return { values, classes };
}

/** The public methods and getters of a class's prototype chain, below `stop` (EventEmitter, Error, Object). */
function runtimeMembers(cls, stop) {
  const methods = new Set();
  const getters = new Set();
  for (let proto = cls.prototype; proto && proto !== stop.prototype && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === 'constructor' || name.startsWith('_')) continue;
      const d = Object.getOwnPropertyDescriptor(proto, name);
      if (d.get) getters.add(name);
      else if (typeof d.value === 'function') methods.add(name);
    }
  }
  return { methods, getters };
}

const mcplug = require('../../bindings/node');
const declared = declarations();

test('index.d.ts declares exactly what the module exports', () => {
  const exported = new Set(Object.keys(mcplug));
  const undeclared = [...exported].filter((n) => !declared.values.has(n));
  const missing = [...declared.values].filter((n) => !exported.has(n));
  assert.deepEqual(undeclared, [], 'exported by index.js but not declared in index.d.ts');
  assert.deepEqual(missing, [], 'declared in index.d.ts but not exported by index.js');
});

for (const [name, stop] of [['Client', EventEmitter], ['Manager', EventEmitter], ['LogCapture', EventEmitter], ['McpError', Error]]) {
  test(`${name}: its declared methods are there, and every public one is declared`, () => {
    const members = declared.classes.get(name);
    assert.ok(members, `index.d.ts declares no class ${name}`);
    const cls = mcplug[name];
    const { methods, getters } = runtimeMembers(cls, stop);
    // The listener methods are EventEmitter's, typed again for the events.
    const inherited = new Set(Object.getOwnPropertyNames(stop.prototype));
    const has = (m) => {
      const symbol = /^\[Symbol\.(\w+)\]$/.exec(m);
      if (symbol) return typeof cls.prototype[Symbol[symbol[1]]] === 'function';
      return methods.has(m) || inherited.has(m);
    };
    const absent = [...members.methods].filter((m) => !has(m));
    assert.deepEqual(absent, [], `declared methods of ${name} that it does not have`);
    const staticsAbsent = [...members.statics].filter((m) => typeof cls[m] !== 'function');
    assert.deepEqual(staticsAbsent, [], `declared static methods of ${name} that it does not have`);
    const undeclared = [...methods].filter((m) => !members.methods.has(m)).concat(
      [...getters].filter((g) => !members.properties.has(g)));
    assert.deepEqual(undeclared, [], `public members of ${name} that index.d.ts does not declare`);
  });
}

test('Client and Manager share one handle base class', () => {
  const base = Object.getPrototypeOf(mcplug.Client.prototype);
  assert.equal(Object.getPrototypeOf(mcplug.Manager.prototype), base);
  assert.equal(Object.getPrototypeOf(base), EventEmitter.prototype);
  for (const m of ['respond', 'respondError', 'close', '_shutdown', '_start', '_work']) {
    assert.equal(typeof base[m], 'function', m);
  }
});

test('every name the modules use is defined or imported, and every import is used', () => {
  const ts = typescript();
  const dir = path.join(root, 'bindings', 'node');
  const files = [path.join(dir, 'index.js'), ...fs.readdirSync(path.join(dir, 'lib')).map((f) => path.join(dir, 'lib', f))];
  const program = ts.createProgram(files, {
    allowJs: true,
    checkJs: true,
    noEmit: true,
    noUnusedLocals: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    types: ['node'],
    typeRoots: [path.join(root, '.deps', 'npm', 'node_modules', '@types')],
    skipLibCheck: true,
  });
  // Cannot find name (2304, 2552), unused (6133, 6192, 6196), declared twice (2451, 2300),
  // used before its declaration (2448). The rest is type inference over plain JS: not checked.
  const codes = new Set([2304, 2552, 6133, 6192, 6196, 2451, 2300, 2448]);
  const found = ts.getPreEmitDiagnostics(program)
    .filter((d) => codes.has(d.code) && d.file && files.includes(path.resolve(d.file.fileName)))
    .map((d) => {
      const { line } = d.file.getLineAndCharacterOfPosition(d.start);
      return `${path.relative(root, d.file.fileName)}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
    });
  assert.deepEqual(found, []);
});

test("index.d.ts's ErrorKind and Status are the library's table of error kinds", () => {
  const ts = typescript();
  const file = ts.createSourceFile(dts, fs.readFileSync(dts, 'utf8'), ts.ScriptTarget.Latest, true);
  let kinds = null;
  let status = null;
  const visit = (node) => {
    if (ts.isTypeAliasDeclaration(node) && node.name.text === 'ErrorKind') {
      kinds = node.type.types.map((t) => t.literal.text);
    }
    if (ts.isVariableDeclaration(node) && node.name.getText(file) === 'Status') {
      const literal = node.type.typeArguments[0];
      status = Object.fromEntries(literal.members.map((m) => [m.name.getText(file), Number(m.type.literal.text)]));
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  const table = JSON.parse(require('../../bindings/node/lib/native').native.error_kinds());
  assert.ok(table.length >= 14, 'the table has every kind');
  assert.deepEqual(kinds, table.map((e) => e.kind), 'ErrorKind, in status order');
  assert.deepEqual(status, { OK: 0, ...Object.fromEntries(table.map((e) => [e.kind.toUpperCase(), e.status])) }, 'Status');
  assert.deepEqual([...mcplug.ERROR_KINDS], table.map((e) => e.kind), 'ERROR_KINDS at run time');
  assert.deepEqual({ ...mcplug.Status }, status, 'Status at run time');
});
