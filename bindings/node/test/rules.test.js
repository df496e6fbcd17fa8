// The engine's rules seen from JS, on the manual clock: every verdict below
// is taken by the native engine at a virtual instant, so these tests are
// deterministic and never sleep. Rule numbers are SPEC.md's.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Guard, StallError } = require('..');

// Recordings of the real services, shared with the Rust adapters' tests;
// their origins are in that directory's SOURCES.md.
const FIXTURES = path.join(__dirname, '..', '..', '..', 'sources', 'tests', 'fixtures', 'recorded');

/** A manual-clock guard recording every event it delivers. */
function setup() {
  const events = [];
  const guard = new Guard({ clock: 'manual', onEvent: (e) => events.push(e) });
  const types = (task) => events.filter((e) => e.task === task).map((e) => e.type);
  return { guard, events, types };
}

/** Profile without outbound heartbeats, so event lists stay short. */
const quiet = (extra) => ({ heartbeatInterval: null, ...extra });

function fixture(name) {
  return fs
    .readFileSync(path.join(FIXTURES, name), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
}

test('R2.1 idle: a renewing signal re-arms the budget; silence past it stalls', async () => {
  const { guard, events, types } = setup();
  const t = guard.start('turn', quiet({ idle: '30s', terminateAfter: 0 }));
  t.output(10, 1); // first progress: the idle phase (R2.3 is over)
  guard.advance(29_999);
  t.output(5, 1);
  guard.advance(29_999);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started']);
  guard.advance(1);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled']);
  const stalled = events.at(-1);
  assert.equal(stalled.budget, 'idle');
  assert.equal(stalled.silent_ms, 30_000);
  assert.equal(stalled.elapsed_ms, 29_999 + 30_000); // a full budget after the last output
  t.finish('completed');
});

test('R2.1 renewed-by: only the listed kinds renew; a heartbeat never does', async () => {
  const { guard, events, types } = setup();
  const t = guard.start('turn', quiet({ idle: '10s', renewedBy: ['output'], terminateAfter: 0 }));
  t.output(1, 1);
  guard.advance(6_000);
  t.argumentDelta(); // not in renewed-by
  t.heartbeat(); // liveness, not progress (R5.4)
  guard.advance(4_000);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled']);
  assert.equal(events.at(-1).elapsed_ms, 10_000);
  t.finish();
});

test('R2.2 execution: a silent 165 s tool call is fine; idle applies again after it', async () => {
  const { guard, events, types } = setup();
  const t = guard.start('turn', quiet({ idle: '30s', execution: '200s', terminateAfter: 0 }));
  t.output(1, 1);
  t.toolStarted('call-1', 'sql_probe');
  guard.advance('165s');
  await guard.flush();
  assert.deepEqual(types('turn'), ['started']);
  assert.equal(t.status().phase, 'executing');
  t.toolFinished('call-1', 'success');
  guard.advance(29_999);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started']);
  guard.advance(1);
  await guard.flush();
  assert.equal(events.at(-1).type, 'stalled');
  assert.equal(events.at(-1).budget, 'idle');
  t.finish();
});

test('R2.2 execution: the in-flight budget is max(execution, idle) and names itself', async () => {
  const { guard, events } = setup();
  const t = guard.start('turn', quiet({ idle: '30s', execution: '200s', terminateAfter: 0 }));
  t.output(1, 1);
  t.toolStarted('call-1', 'bash');
  guard.advance(199_999);
  await guard.flush();
  assert.equal(events.length, 1);
  guard.advance(1);
  await guard.flush();
  assert.equal(events.at(-1).type, 'stalled');
  assert.equal(events.at(-1).budget, 'execution');
  assert.equal(events.at(-1).silent_ms, 200_000);
  t.toolFinished('call-1', 'failure');
  t.finish('failed');
});

test('R3.2 strikes: the budget re-arms at each verdict; strike terminateAfter cancels', async () => {
  const { guard, events, types } = setup();
  const t = guard.start('turn', quiet({ idle: '10s', terminateAfter: 3 }));
  t.output(1, 1);
  guard.advance(20_000);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled', 'stalled']);
  assert.equal(t.signal.aborted, false);
  guard.advance(10_000);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled', 'stalled', 'stalled', 'cancelling']);
  const strikes = events.filter((e) => e.type === 'stalled').map((e) => [e.strike, e.elapsed_ms]);
  assert.deepEqual(strikes, [[1, 10_000], [2, 20_000], [3, 30_000]]);
  assert.equal(t.signal.aborted, true);
  assert.ok(t.signal.reason instanceof StallError);
  assert.equal(t.signal.reason.task, 'turn');
  t.finish('cancelled');
});

test('R3.2 terminateAfter 0 notifies only: stalls repeat and the signal never aborts', async () => {
  const { guard, types } = setup();
  const t = guard.start('turn', quiet({ idle: '10s', terminateAfter: 0 }));
  t.output(1, 1);
  guard.advance('1m');
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', ...Array(6).fill('stalled')]);
  assert.equal(t.signal.aborted, false);
  t.finish();
});

test('R3.3 progress after a stall emits recovered and resets the strikes', async () => {
  const { guard, events, types } = setup();
  const t = guard.start('turn', quiet({ idle: '10s', terminateAfter: 2 }));
  t.output(1, 1);
  guard.advance(10_000);
  assert.equal(t.status().strikes, 1);
  guard.advance(3_000);
  t.argumentDelta();
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled', 'recovered']);
  assert.equal(events.at(-1).silent_ms, 13_000);
  assert.equal(t.status().strikes, 0);
  guard.advance(10_000); // strike 1 again, not 2: no cancel
  await guard.flush();
  assert.equal(events.at(-1).type, 'stalled');
  assert.equal(events.at(-1).strike, 1);
  assert.equal(t.signal.aborted, false);
  t.finish();
});

test('R3.4 deadline: its own event and a cancel at once, whatever the progress', async () => {
  const { guard, events, types } = setup();
  const t = guard.start('turn', quiet({ idle: '10s', deadline: '25s', terminateAfter: 5 }));
  for (let i = 0; i < 5; i++) {
    t.output(1, 1);
    guard.advance(5_000);
  }
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'deadline_exceeded', 'cancelling']);
  assert.equal(events[1].elapsed_ms, 25_000);
  assert.match(events[1].reason, /deadline/);
  assert.equal(t.signal.aborted, true);
  t.finish('cancelled');
});

test('R3.4 notifyOnly: the deadline verdict notifies and does not cancel', async () => {
  const { guard, types } = setup();
  const t = guard.start('turn', quiet({ idle: null, deadline: 25_000, notifyOnly: true }));
  guard.advance('30s');
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'deadline_exceeded']);
  assert.equal(t.signal.aborted, false);
  t.finish();
});

test('R3.5 cancel: cancelling with the reason, killed after the grace period, no renewal after', async () => {
  const { guard, events, types } = setup();
  const t = guard.start('turn', quiet({ idle: '10s', gracePeriod: '5s' }));
  t.output(1, 1);
  guard.advance(10_000);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled', 'cancelling']);
  const cancelling = events.at(-1);
  assert.match(cancelling.reason, /idle budget of 10s exceeded/);
  assert.equal(cancelling.signal, 'SIGTERM');
  assert.equal(t.signal.reason.reason, cancelling.reason);
  t.output(100, 1); // cancellation is independent of progress
  t.argumentDelta();
  guard.advance(4_999);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled', 'cancelling']);
  guard.advance(1);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled', 'cancelling', 'killed']);
  assert.equal(events.at(-1).elapsed_ms, 15_000);
  t.finish('cancelled');
  await guard.flush();
  assert.equal(events.at(-1).type, 'finished');
  assert.equal(events.at(-1).outcome, 'cancelled');
});

test('R3.5 gracePeriod 0 kills at once', async () => {
  const { guard, types } = setup();
  const t = guard.start('turn', quiet({ idle: '10s', gracePeriod: 0 }));
  guard.advance(10_000);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled', 'cancelling', 'killed']);
  t.finish('cancelled');
});

test('R3.8 finished is last, exactly once; no heartbeat between cancel and finish', async () => {
  const { guard, events, types } = setup();
  const t = guard.start('turn', { idle: '30s', heartbeatInterval: '10s', gracePeriod: '1h' });
  t.output(1, 1);
  guard.advance(30_000);
  guard.advance(60_000); // cancelling, waiting for the runner
  t.finish('cancelled');
  assert.throws(() => t.finish('completed'), /already finished/);
  guard.advance('2h'); // a kill would be due now; the task has settled
  await guard.flush();
  const seq = types('turn');
  assert.deepEqual(seq, ['started', 'heartbeat', 'heartbeat', 'stalled', 'cancelling', 'finished']);
  assert.equal(events.at(-1).outcome, 'cancelled');
  assert.equal(events.at(-1).elapsed_ms, 90_000);
  assert.equal(guard.status('turn'), null);
  assert.equal(t.status(), null);
  assert.throws(() => t.toolStarted('c', 'x'), /already finished/);
});

/** Feeds every line of a recording, one virtual `gapMs` apart; counts the results. */
function replay(guard, stream, name, gapMs) {
  const counts = {};
  for (const line of fixture(name)) {
    let key;
    try {
      key = stream.feed(line);
    } catch (e) {
      key = `refused: ${e.message}`;
    }
    counts[key] = (counts[key] ?? 0) + 1;
    guard.advance(gapMs);
  }
  return counts;
}

test('R5.2 Anthropic stream: each fresh input_json_delta renews, a refusal throws its reason', async () => {
  const { guard, types } = setup();
  const t = guard.start('turn', quiet({ idle: '10s', terminateAfter: 0 }));
  const counts = replay(guard, t.anthropicStream(), 'anthropic/anthropic-tool-search-deferred-regex.chunks.txt', 9_000);
  await guard.flush();
  // Three messages, two client tool calls and one server tool call; the
  // provider opens each argument block with an empty delta.
  assert.deepEqual(counts, { tracked: 12, ignored: 75, renewed: 29, 'refused: delta is empty': 3 });
  // Text deltas and pings are not argument progress: the runs of them
  // stall the task; the argument deltas recover it.
  assert.ok(types('turn').includes('stalled'));
  assert.ok(types('turn').includes('recovered'));
  assert.ok(t.status().last_signal['argument-delta']);
  assert.equal(t.status().last_call, undefined); // partial arguments are not a tool call
  t.finish();
});

test('R5.2 OpenAI Chat Completions stream: tool-call argument chunks renew', () => {
  const { guard } = setup();
  const t = guard.start('turn', quiet({ idle: '1h' }));
  const counts = replay(guard, t.openaiStream(), 'openai-chat/deepseek-tool-call.chunks.txt', 0);
  assert.deepEqual(counts, { tracked: 3, ignored: 39, renewed: 10 });
  assert.ok(t.status().last_signal['argument-delta']);
  t.finish();
});

test('R5.9 OpenAI Responses stream: function_call_arguments deltas renew', () => {
  const { guard } = setup();
  const t = guard.start('turn', quiet({ idle: '1h' }));
  const counts = replay(guard, t.responsesStream(), 'responses/openai-reasoning-encrypted-content.1.chunks.txt', 0);
  assert.deepEqual(counts, { tracked: 14, ignored: 57, renewed: 39 });
  t.finish();
});

test('R5.9 Gemini stream: functionCall argument chunks renew', () => {
  const { guard } = setup();
  const t = guard.start('turn', quiet({ idle: '1h' }));
  const counts = replay(guard, t.geminiStream(), 'gemini/google-stream-tool-call-arguments.chunks.txt', 0);
  assert.deepEqual(counts, { tracked: 6, renewed: 2 });
  t.finish();
});

test('R5.2 replays and out-of-generation deltas do not renew', async () => {
  const { guard, types } = setup();
  const t = guard.start('turn', quiet({ idle: '10s', terminateAfter: 0 }));
  const s = t.anthropicStream();
  const start = JSON.stringify({ type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', content: [] } });
  const block = JSON.stringify({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'bash', input: {} } });
  const delta = JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"cmd":' } });
  const stop = JSON.stringify({ type: 'content_block_stop', index: 0 });
  assert.throws(() => s.feed(delta), /no active generation/);
  assert.equal(s.feed(start), 'tracked');
  assert.throws(() => s.feed(start), /a generation is already active/);
  assert.equal(s.feed(block), 'tracked');
  assert.equal(s.feed(delta), 'renewed');
  assert.equal(s.feed(stop), 'tracked');
  guard.advance(9_000);
  assert.throws(() => s.feed(delta), /closed/); // a closed block never reopens
  assert.throws(() => s.feed('{not json'), /JSON/);
  guard.advance(1_000);
  await guard.flush();
  assert.deepEqual(types('turn'), ['started', 'stalled']);
  t.finish();
});

test('R8.3 event objects: type, task, at (RFC 3339 ms), elapsed_ms, in order, on the JS thread', async () => {
  const { guard, events } = setup();
  const a = guard.start('a', { idle: '10s', heartbeatInterval: '4s', gracePeriod: '2s' });
  const b = guard.start('b', quiet({ idle: '1h' }));
  guard.advance('13s');
  a.finish('cancelled');
  b.finish('completed');
  // Nothing has been delivered synchronously: delivery is on the event loop.
  assert.equal(events.length, 0);
  await guard.flush();
  for (const e of events) {
    assert.equal(typeof e.type, 'string');
    assert.match(e.task, /^[ab]$/);
    assert.match(e.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(typeof e.elapsed_ms, 'number');
  }
  const seqA = events.filter((e) => e.task === 'a');
  assert.deepEqual(seqA.map((e) => e.type), ['started', 'heartbeat', 'heartbeat', 'stalled', 'cancelling', 'killed', 'finished']);
  const elapsed = seqA.map((e) => e.elapsed_ms);
  assert.deepEqual(elapsed, [...elapsed].sort((x, y) => x - y));
  assert.equal(seqA[1].total_bytes, 0);
  assert.equal(seqA[1].last_output_age_ms, undefined); // absent before any output
  assert.equal(events.at(-1).type, 'finished');
  assert.equal(events.at(-1).task, 'b');
});

test('status objects: R4.2 fields from the task, the guard, and the list', () => {
  const { guard } = setup();
  const t = guard.start('turn', quiet({ idle: '30s', deadline: '10m' }));
  t.output(2048, 3);
  t.toolStarted('call-1', 'bash');
  guard.advance(5_000);
  const s = t.status();
  assert.equal(s.name, 'turn');
  assert.equal(s.state, 'working');
  assert.equal(s.elapsed_ms, 5_000);
  assert.equal(s.total_bytes, 2048);
  assert.equal(s.total_lines, 3);
  assert.equal(s.last_output_age_ms, 5_000);
  assert.ok(s.budgets.some((b) => b.budget === 'deadline' && b.remaining_ms === 595_000));
  assert.deepEqual(guard.status('turn'), s);
  assert.deepEqual(guard.statuses(), [s]);
  assert.equal(guard.status('nobody'), null);
  t.toolFinished('call-1', 'success');
  t.finish();
  assert.deepEqual(guard.statuses(), []);
});

test('bad input: a TypeError naming the key and the value; engine errors say what', () => {
  const { guard } = setup();
  const cases = [
    // R10.6: the core's one message for each, as from TOML, the flags and Python.
    [{ idle: 'soon' }, /^idle: invalid duration "soon"/],
    [{ execution: -1 }, /^execution: invalid duration "-1" \(expected a non-negative number of milliseconds\)/],
    [{ gracePeriod: null }, /^gracePeriod: null is not allowed, expected a duration/],
    [{ deadline: {} }, /^deadline: invalid duration "\{\}"/],
    [{ terminateAfter: 1.5 }, /^terminateAfter: 1.5 is not an integer, expected an integer 0..=1000/],
    [{ renewedBy: ['output', 'vibes'] }, /^renewedBy: unknown signal kind `vibes`, expected one of argument-delta/],
    [{ idel: '30s' }, /^idel: unknown option/],
    // R8.12, R10.6, R8.16: past the core's 100-year limit, the key's own
    // range is quoted, as for TOML and the CLI.
    [{ deadline: '101y' }, /^deadline: duration "101y" is out of range, expected 1ms..=365days/],
    [{ gracePeriod: 1e300 }, /^gracePeriod: duration "1e300ms" is out of range, expected 0s..=1h/],
  ];
  for (const [opts, msg] of cases) {
    assert.throws(() => guard.start('x', opts), (e) => e instanceof TypeError && msg.test(e.message), JSON.stringify(opts));
  }
  assert.throws(() => new Guard({ clock: 'sundial' }), (e) => e instanceof TypeError && /^clock: invalid value "sundial"/.test(e.message));
  assert.throws(() => guard.advance('later'), (e) => e instanceof TypeError && /^ms: invalid duration "later"/.test(e.message));
  const t = guard.start('x', quiet());
  assert.throws(() => guard.start('x', quiet()), /a live task is already named `x`/);
  assert.throws(() => t.toolFinished('nope', 'success'), /no tool call `nope` in flight/);
  assert.throws(() => t.toolFinished('nope', 'maybe'), (e) => e instanceof TypeError && /^outcome: invalid value "maybe"/.test(e.message));
  assert.throws(() => t.finish('done'), (e) => e instanceof TypeError && /^outcome: invalid value "done"/.test(e.message));
  t.finish();
  const real = new Guard();
  assert.throws(() => real.advance(1), /clock: 'manual'/);
});
