// The one real-clock test: a real fetch to a real local HTTP server that
// accepts the request and never answers is aborted by the guard's cancel
// (R3.2, R3.5) through the task's AbortSignal. Bounds are generous: the
// assertion is that the stall aborts the fetch, not how fast.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { Guard, StallError } = require('..');

test('R3.5 a stall aborts a real fetch through t.signal', { timeout: 60_000 }, async () => {
  let requests = 0;
  const server = http.createServer(() => {
    requests += 1; // accept, then say nothing: a hung upstream
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();

  const events = [];
  const guard = new Guard({ onEvent: (e) => events.push(e) });
  const t = guard.start('turn-1', { idle: '300ms', heartbeatInterval: null, gracePeriod: '30s' });
  try {
    const err = await fetch(`http://127.0.0.1:${port}/v1/messages`, { signal: t.signal }).then(
      () => assert.fail('the hung fetch resolved'),
      (e) => e,
    );
    assert.ok(err instanceof StallError, `rejected with ${err}`);
    assert.equal(err.task, 'turn-1');
    assert.match(err.reason, /budget of 300ms exceeded/);
    assert.equal(t.signal.aborted, true);
    assert.equal(requests, 1);
    t.finish('cancelled');
    await guard.flush();
    assert.deepEqual(
      events.map((e) => e.type),
      ['started', 'stalled', 'cancelling', 'finished'],
    );
    assert.ok(events[1].silent_ms >= 300, `stalled after ${events[1].silent_ms} ms`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
