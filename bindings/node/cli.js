#!/usr/bin/env node
// The `stallwarden` command for npm users (R11.2): the CLI binary ships in
// this machine's platform package (stallwarden-linux-x64-gnu or
// stallwarden-linux-arm64-gnu), beside the addon, as biome ships its own;
// this runs it with the same arguments, terminal and exit status.
'use strict';
const { spawn } = require('node:child_process');
const path = require('node:path');

const arch = { x64: 'x64', arm64: 'arm64' }[process.arch];
const pkg = arch && process.platform === 'linux' ? `stallwarden-linux-${arch}-gnu` : null;
let bin;
try {
  if (!pkg) throw new Error(`no build for ${process.platform}-${process.arch}`);
  bin = path.join(path.dirname(require.resolve(`${pkg}/package.json`)), 'stallwarden');
} catch (e) {
  console.error(
    `stallwarden: the command is not installed for ${process.platform}-${process.arch} ` +
      `(it ships in ${pkg ?? 'a Linux x64 or arm64 package'}): ${e.message}`,
  );
  process.exit(125);
}

const child = spawn(bin, process.argv.slice(2), { stdio: 'inherit' });
// Ctrl-C and Ctrl-\ reach the terminal's whole foreground group, so
// stallwarden gets its own copy and decides (it forwards to the command's
// group and exits 128+N, R8.9): this process only stays alive to pass its
// status on. Signals sent to this process alone go on to stallwarden.
const terminal = ['SIGINT', 'SIGQUIT'];
const forwarded = ['SIGTERM', 'SIGHUP', 'SIGUSR1', 'SIGUSR2'];
for (const sig of terminal) process.on(sig, () => {});
for (const sig of forwarded) {
  process.on(sig, () => {
    try {
      child.kill(sig);
    } catch {
      /* already gone */
    }
  });
}
child.on('error', (e) => {
  console.error(`stallwarden: cannot run ${bin}: ${e.message}`);
  process.exit(126);
});
child.on('exit', (code, signal) => {
  if (signal) {
    // Die of the same signal, as a shell would report it (128+N).
    for (const sig of [...terminal, ...forwarded]) process.removeAllListeners(sig);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
