// One meaning through every door (R10.6), seen from JS on the manual clock:
// the engine's one set of calls in flight and its limits (the same refusal,
// word for word, as watchdog-core/tests/calls.rs and the pytest), one
// adapter class over the engine's StreamAdapter trait, and the task
// controls Python already had (pause, resume, trigger, cancel).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { Guard, StallError } = require('..');

function setup() {
  const events = [];
  const guard = new Guard({ clock: 'manual', onEvent: (e) => events.push(e) });
  const types = (task) => events.filter((e) => e.task === task).map((e) => e.type);
  return { guard, events, types };
}

const quiet = (extra) => ({ heartbeatInterval: null, ...extra });

test('R10.6 an over-long call id is refused with the engine message, and records nothing', () => {
  const { guard } = setup();
  const t = guard.start('limits', quiet({ idle: '1s' }));
  assert.throws(() => t.toolStarted('x'.repeat(257), 'bash'), {
    message: 'task `limits`: tool call id or name is 257 bytes, more than 256',
  });
  assert.throws(() => t.toolStarted('c1', ''), /tool name is empty/);
  const status = t.status();
  assert.equal(status.last_call, undefined);
  assert.equal((status.last_signal ?? {})['tool-call'], undefined);
  t.toolStarted('x'.repeat(256), 'bash'); // at the limit exactly is fine
  assert.throws(() => t.toolStarted('x'.repeat(256), 'bash'), /already has tool call/);
  t.finish();
});

test('R5.9 one ArgumentStream class serves every format by name', () => {
  const { guard } = setup();
  const t = guard.start('turn', quiet({ idle: '1h' }));
  for (const f of ['anthropic', 'openai', 'responses', 'gemini']) {
    assert.equal(t.argumentStream(f).format, f);
  }
  assert.equal(t.geminiStream().format, 'gemini');
  assert.throws(() => t.argumentStream('claude'), {
    name: 'TypeError',
    message: /expected one of anthropic, openai, responses, gemini/,
  });
  const s = t.anthropicStream();
  assert.throws(() => s.feed('not json'), /not valid JSON/);
  assert.deepEqual(s.rejections, { 'args.invalid_json': 1 });
  assert.equal(s.accepted, 0);
  t.finish();
});

test('R2.8 pause stops every budget; resume keeps the silence already used', async () => {
  const { guard, types } = setup();
  const t = guard.start('human', quiet({ idle: '10s' }));
  t.output(1, 1);
  guard.advance(4_000);
  t.pause();
  guard.advance(3_600_000);
  await guard.flush();
  assert.deepEqual(types('human'), ['started']);
  t.resume();
  guard.advance(5_999);
  await guard.flush();
  assert.deepEqual(types('human'), ['started']);
  guard.advance(1);
  await guard.flush();
  assert.deepEqual(types('human'), ['started', 'stalled', 'cancelling']);
  assert.ok(t.signal.aborted);
  t.finish('cancelled');
});

test('R2.10 trigger cancels with the task\'s own reason and aborts its signal', async () => {
  const { guard, events } = setup();
  const t = guard.start('fault', quiet({ idle: '1h' }));
  t.trigger('out of memory');
  await guard.flush();
  assert.ok(t.signal.aborted);
  assert.ok(t.signal.reason instanceof StallError);
  assert.match(t.signal.reason.reason, /out of memory/);
  assert.ok(events.some((e) => e.type === 'cancelling'));
  assert.throws(() => t.pause(), /cancelling/);
  t.finish('cancelled');
});

test('R3.5 cancel stops the task now with the reason given', async () => {
  const { guard, events } = setup();
  const t = guard.start('user', quiet({ idle: '1h' }));
  t.cancel('the user asked');
  await guard.flush();
  assert.ok(t.signal.aborted);
  assert.equal(t.signal.reason.reason, 'the user asked');
  const cancelling = events.find((e) => e.type === 'cancelling');
  assert.equal(cancelling.reason, 'the user asked');
  t.finish('cancelled');
  assert.throws(() => t.resume(), /already finished/);
});
