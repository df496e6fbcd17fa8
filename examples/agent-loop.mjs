// An agent turn guarded by stallwarden from Node (R11.1): stream a model
// response, run the tool it asks for, and let the engine cancel the turn
// (through t.signal) if either goes silent for too long.
//
// The response is a recording of the real Anthropic Messages stream
// (sources/tests/fixtures/recorded/anthropic/anthropic-tool-search-deferred-
// regex.chunks.txt, from vercel/ai; its origin and commit are in that
// directory's SOURCES.md), replayed a few ms per event; each tool call it
// asks for runs as a real child process.
//
//   cd bindings/node && npm install && npm run build && cd ../..
//   node examples/agent-loop.mjs
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Guard } from '../bindings/node/index.js';

const fixture = new URL(
  '../sources/tests/fixtures/recorded/anthropic/anthropic-tool-search-deferred-regex.chunks.txt',
  import.meta.url,
);

/** Replays the recording as a stream of SSE `data:` payloads. */
async function* modelStream(signal) {
  for (const line of (await readFile(fixture, 'utf8')).split('\n').filter(Boolean)) {
    await sleep(5, undefined, { signal });
    yield line;
  }
}

/** Runs a tool call in a real child process (a stand-in that echoes what it was asked). */
async function runTool(name, input, signal) {
  const code = 'const [name, input] = process.argv.slice(1); console.log(JSON.stringify({ ok: true, name, keys: Object.keys(JSON.parse(input)) }))';
  const { stdout } = await promisify(execFile)(process.execPath, ['-e', code, name, JSON.stringify(input)], { signal });
  return JSON.parse(stdout);
}

// --- the guarded turn: about a dozen lines --------------------------------
const nudges = []; // R5.12: what the runner would tell the model on strike 1
const guard = new Guard({
  onEvent: (e) => {
    console.error(`[stallwarden] ${e.type} ${e.task} +${e.elapsed_ms}ms`);
    if (e.type === 'stalled' && e.repeating && e.strike < e.terminate_after) nudges.push(e.repeating);
  },
});
const t = guard.start('turn-1', { idle: '2s', execution: '30s', heartbeatInterval: null });
const stream = t.anthropicStream();
const open = new Map(); // block index -> { id, name, json } while its arguments stream
const calls = [];
try {
  for await (const data of modelStream(t.signal)) {
    try { stream.feed(data); } catch { /* refused events (e.g. an empty delta) renew nothing */ }
    const ev = JSON.parse(data);
    if (ev.content_block?.type === 'tool_use') open.set(ev.index, { ...ev.content_block, json: '' });
    if (ev.delta?.type === 'input_json_delta' && open.has(ev.index)) open.get(ev.index).json += ev.delta.partial_json;
    if (ev.type === 'content_block_stop' && open.has(ev.index)) calls.push(open.get(ev.index)), open.delete(ev.index);
  }
  for (const call of calls) {
    t.toolStarted(call.id, call.name, call.json);
    const result = await runTool(call.name, JSON.parse(call.json || '{}'), t.signal);
    t.toolFinished(call.id, 'success', result);
    console.log(`${call.name} ->`, result);
  }
  t.finish('completed');
} catch (err) {
  t.finish(t.signal.aborted ? 'cancelled' : 'failed');
  throw err;
} finally {
  await guard.flush();
}

// --- a loud hang (R5.12): the model asks for the same call again and again --
// Each call's input and result go to the guard; the same call with the same
// result renews nothing. Strike 1 is the cue to nudge the model; this one
// ignores the nudge, and strike 2 stops the turn.
const loop = guard.start('turn-2', { idle: '2s', execution: '30s', terminateAfter: 2, heartbeatInterval: null });
try {
  for (let i = 0; !loop.signal.aborted; i++) {
    const input = { file_path: 'config.yaml' };
    loop.toolStarted(`toolu_loop_${i}`, 'Read', input);
    const result = await runTool('Read', input, loop.signal);
    loop.toolFinished(`toolu_loop_${i}`, 'success', result);
    if (nudges.length === 1 && !loop.nudged) {
      loop.nudged = true;
      const r = nudges[0];
      console.log(`runner -> model: you called ${r.shown} ${r.count} times with the same result; try something else`);
    }
    await sleep(300, undefined, { signal: loop.signal });
  }
} catch (err) {
  if (!loop.signal.aborted) throw err;
  console.log('turn-2 stopped:', loop.signal.reason?.message);
} finally {
  loop.finish(loop.signal.aborted ? 'cancelled' : 'completed');
  await guard.flush();
}
