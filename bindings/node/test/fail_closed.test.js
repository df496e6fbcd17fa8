// Failures fail closed through the Node package (R10.5): a guard whose
// thread cannot start throws, and flush is bounded by its timeout.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { Guard } = require('..');

// A child whose Rust threads all ask for a stack larger than the address
// space: std::thread::Builder::spawn then fails as it does when the system
// is out of threads or memory.
const NO_THREADS = { ...process.env, RUST_MIN_STACK: String(2 ** 47) };

test('R10.5: a guard whose driver thread cannot start throws', () => {
  const child = spawnSync(
    process.execPath,
    [
      '-e',
      `const { Guard } = require(${JSON.stringify(path.join(__dirname, '..'))});
       try { new Guard(); console.log('built a guard'); }
       catch (e) { console.log('threw: ' + e.message); }`,
    ],
    { env: NO_THREADS, encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(child.status, 0, child.stderr);
  assert.match(
    child.stdout,
    /^threw: stallwarden: could not start thread `stallwarden-driver`: .*os error/,
  );
});

test('R10.5: flush rejects with a TimeoutError when events have not reached onEvent', async () => {
  const seen = [];
  const guard = new Guard({ clock: 'manual', onEvent: (e) => seen.push(e.type) });
  const task = guard.start('late', { heartbeatInterval: null });
  // `started` is on its way to this thread, which has not turned yet: a
  // zero timeout only looks, and finds it undelivered.
  await assert.rejects(guard.flush(0), {
    name: 'TimeoutError',
    message: 'flush: 1 event(s) did not reach onEvent within 0 ms',
  });
  await guard.flush(); // the default 5 s
  assert.deepEqual(seen, ['started']);
  task.finish('completed');
  await guard.flush('30s');
  assert.deepEqual(seen, ['started', 'finished']);
});

test('R10.5: flush refuses a timeout that is not a duration', async () => {
  const guard = new Guard({ clock: 'manual' });
  await assert.rejects(guard.flush(-1), {
    name: 'TypeError',
    message: /^timeout: invalid duration -1/,
  });
});
