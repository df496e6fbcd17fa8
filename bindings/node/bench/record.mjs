// What a JS call to t.argumentDelta() costs against a plain napi call that
// does nothing (R11.1: the addon's hot path is a napi call plus the
// engine's record). Prints ns/call for each, and the ratio; each figure is
// the best of several rounds, the rounds interleaved so load on a shared
// machine hits all of them alike.
//
//   npm run build && npm run bench
import { createRequire } from 'node:module';
import { Guard } from '../index.js';

const native = createRequire(import.meta.url)('../stallwarden.node');
const N = 1_000_000;
const ROUNDS = 15;

const guard = new Guard(); // the real clock, as a runner uses it
const t = guard.start('bench', { idle: '1h', heartbeatInterval: null });
const handle = (() => {
  // The same recorder handle the Task wrapper holds, for the same-shape baseline.
  const g = new native.NativeGuard('real', () => {});
  return { g, h: g.start('bench-handle', { idle: '1h', heartbeatInterval: null }).recorder() };
})();

const cases = {
  'noop()                 plain napi call, no argument': () => native.noop(),
  'noopWith(handle)       plain napi call, the recorder handle': () => native.noopWith(handle.h),
  't.argumentDelta()      the API call (record included)': () => t.argumentDelta(),
};
const best = Object.fromEntries(Object.keys(cases).map((k) => [k, Infinity]));
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, fn] of Object.entries(cases)) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) fn();
    const ns = Number(process.hrtime.bigint() - t0) / N;
    if (r > 0 && ns < best[name]) best[name] = ns; // round 0 warms up
  }
}
t.finish();
const [noop, noopWith, delta] = Object.values(best);
for (const [name, ns] of Object.entries(best)) console.log(`${name.padEnd(62)} ${ns.toFixed(1)} ns/call`);
console.log(`ratio argumentDelta / noop       ${(delta / noop).toFixed(2)}x`);
console.log(`ratio argumentDelta / noopWith   ${(delta / noopWith).toFixed(2)}x`);
