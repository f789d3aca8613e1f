#!/usr/bin/env node
// npm pack's prepack and postpack steps: the package carries libmcplug and its validator library
// (libmcplug_schema, loaded from beside libmcplug), built by cargo from this checkout and stripped.
//
//   node scripts/pack-libraries.js add      cargo build --release, copy both here, strip the copies
//   node scripts/pack-libraries.js remove   delete the copies again (in the checkout, index.js would
//                                          otherwise load them before target/release's fresh build)
//
// Environment: CARGO (default cargo), MCPLUG_BUILD_LIBRARY_DIR (take built libraries from there).
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const here = path.resolve(__dirname, '..');
const checkout = path.resolve(here, '..', '..');
// The library is built for Linux only (see the README's supported platforms).
const names = ['libmcplug.so', 'libmcplug_schema.so'];

function add() {
  if (process.platform !== 'linux') {
    throw new Error(`mcplug: the package carries Linux libraries only; cannot pack on ${process.platform}`);
  }
  let dir = process.env.MCPLUG_BUILD_LIBRARY_DIR;
  if (!dir) {
    if (!fs.existsSync(path.join(checkout, 'Cargo.toml'))) {
      throw new Error(`mcplug: the Rust sources are not at ${checkout}; pack from the mcplug checkout or set MCPLUG_BUILD_LIBRARY_DIR`);
    }
    const cargo = process.env.CARGO || 'cargo';
    const args = ['build', '--release', '--lib', '-p', 'mcplug', '-p', 'mcplug-schema'];
    process.stderr.write(`mcplug: ${cargo} ${args.join(' ')}\n`);
    execFileSync(cargo, args, { cwd: checkout, stdio: ['ignore', 2, 2] });
    dir = path.join(checkout, 'target', 'release');
  }
  for (const name of names) {
    const built = path.join(dir, name);
    if (!fs.existsSync(built)) throw new Error(`mcplug: ${built} was not built`);
    const copy = path.join(here, name);
    fs.copyFileSync(built, copy);
    fs.chmodSync(copy, 0o755);
    execFileSync('strip', ['--strip-debug', '--strip-unneeded', copy]);
  }
}

function remove() {
  for (const name of names) fs.rmSync(path.join(here, name), { force: true });
}

const verb = process.argv[2];
if (verb === 'add') add();
else if (verb === 'remove') remove();
else {
  process.stderr.write('usage: node scripts/pack-libraries.js add|remove\n');
  process.exit(2);
}
