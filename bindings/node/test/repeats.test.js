// R5.12 from JS, on the manual clock: progress that only repeats itself is
// not progress, through the same judgement as Rust (one place, R10.6).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { Guard } = require('..');

function setup() {
  const events = [];
  const guard = new Guard({ clock: 'manual', onEvent: (e) => events.push(e) });
  const stalls = (task) => events.filter((e) => e.task === task && e.type === 'stalled');
  return { guard, stalls };
}

const quiet = (extra) => ({ heartbeatInterval: null, ...extra });

test('R5.12 a wait loop written through write() stalls and says what repeats', async () => {
  const { guard, stalls } = setup();
  const t = guard.start('wait', quiet({ idle: '10s', terminateAfter: 0 }));
  for (let i = 0; i < 12; i++) {
    t.write(`[12:00:${String(i).padStart(2, '0')}] waiting for db (attempt ${i})\n`);
    guard.advance(1_000);
  }
  await guard.flush();
  const [stalled] = stalls('wait');
  assert.ok(stalled, 'a stall at the idle budget');
  assert.equal(stalled.elapsed_ms, 10_000);
  assert.equal(stalled.repeating.source, 'output');
  assert.equal(stalled.repeating.shown, '[12:00:01] waiting for db (attempt 1)');
  assert.equal(stalled.repeating.count, 10);
  assert.equal(t.status().total_lines, 12);
  t.finish('completed');
});

test('R5.12 its busy twin: lines whose counter advances never stall', async () => {
  const { guard, stalls } = setup();
  const t = guard.start('busy', quiet({ idle: '10s', terminateAfter: 0 }));
  for (let i = 0; i < 30; i++) {
    t.write(Buffer.from(`[12:00:${String(i).padStart(2, '0')}] progress ${i + 1}/30\n`));
    guard.advance(5_000);
  }
  await guard.flush();
  assert.deepEqual(stalls('busy'), []);
  t.finish('completed');
});

test('R5.12 the same call with the same result, again and again, stalls naming it', async () => {
  const { guard, stalls } = setup();
  const t = guard.start('agent', quiet({ idle: '10s', terminateAfter: 0 }));
  for (let i = 0; i < 8; i++) {
    t.toolStarted(`c${i}`, 'Bash(cat config.yaml)', { command: 'cat config.yaml' });
    guard.advance(1_000);
    t.toolFinished(`c${i}`, 'success', 'port: 8080\n');
    guard.advance(1_000);
  }
  await guard.flush();
  const [stalled] = stalls('agent');
  assert.ok(stalled);
  assert.equal(stalled.repeating.source, 'tool-call');
  assert.equal(stalled.repeating.shown, 'Bash(cat config.yaml)');
  t.finish('completed');
});

test('R5.12 the same test command with improving results is progress', async () => {
  const { guard, stalls } = setup();
  const t = guard.start('agent', quiet({ idle: '10s', terminateAfter: 0 }));
  for (let i = 0; i < 10; i++) {
    t.toolStarted(`t${i}`, 'Bash(pytest)', { command: 'pytest -q' });
    guard.advance(3_000);
    t.toolFinished(`t${i}`, 'success', `${10 - i} failed, ${i} passed`);
    guard.advance(3_000);
  }
  await guard.flush();
  assert.deepEqual(stalls('agent'), []);
  t.finish('completed');
});

test('R5.12 repeat in renewedBy keeps the old behaviour; without output it is refused', () => {
  const { guard } = setup();
  assert.throws(
    () => guard.start('bad', quiet({ renewedBy: ['repeat', 'tool-call'] })),
    /add `output` too/,
  );
  const t = guard.start('old', quiet({ renewedBy: ['output', 'repeat'] }));
  t.finish('completed');
});
