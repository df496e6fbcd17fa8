// Builds the addon with cargo and copies the cdylib next to index.js as
// stallwarden.node. `--debug` builds the dev profile (faster to compile,
// slower to run); the default is release.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const debug = process.argv.includes('--debug');
const args = ['build', '-p', 'stallwarden-node', '--message-format=json-render-diagnostics'];
if (!debug) args.push('--release');
if (process.env.CI || process.argv.includes('--locked')) args.push('--locked');

const run = spawnSync('cargo', args, {
  cwd: __dirname,
  stdio: ['ignore', 'pipe', 'inherit'],
  maxBuffer: 256 * 1024 * 1024,
});
if (run.error) {
  console.error(`stallwarden: cannot run cargo: ${run.error.message}`);
  process.exit(1);
}
if (run.status !== 0) process.exit(run.status ?? 1);

// The cdylib's path, from cargo's own artifact messages.
let lib;
for (const line of run.stdout.toString().split('\n')) {
  if (!line.startsWith('{')) continue;
  const msg = JSON.parse(line);
  if (msg.reason === 'compiler-artifact' && msg.target.name === 'stallwarden_node') {
    lib = msg.filenames.find((f) => /\.(so|dylib|dll)$/.test(f));
  }
}
if (!lib) {
  console.error('stallwarden: cargo built no stallwarden_node cdylib');
  process.exit(1);
}
const out = path.join(__dirname, '..', 'stallwarden.node');
fs.copyFileSync(lib, out);
console.log(`stallwarden: ${path.relative(process.cwd(), lib)} -> ${path.relative(process.cwd(), out)}`);
