// An agent turn guarded by stallguard from Node (R11.1): stream a model
// response, run the tool it asks for, and let the engine cancel the turn
// (through t.signal) if either goes silent for too long.
//
// The response is a recorded Anthropic Messages stream
// (sources/tests/fixtures/anthropic_tool_use.jsonl), replayed a few ms per
// event; the tool runs as a real child process.
//
//   cd bindings/node && npm install && npm run build && cd ../..
//   node examples/agent-loop.mjs
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Guard } from '../bindings/node/index.js';

const fixture = new URL('../sources/tests/fixtures/anthropic_tool_use.jsonl', import.meta.url);

/** Replays the recording as a stream of SSE `data:` payloads. */
async function* modelStream(signal) {
  for (const line of (await readFile(fixture, 'utf8')).split('\n').filter(Boolean)) {
    await sleep(5, undefined, { signal });
    yield line;
  }
}

/** The tool: a stand-in weather lookup in a real child process. */
async function getWeather({ location }, signal) {
  const code = `console.log(JSON.stringify({ location: process.argv[1], forecast: 'fog, 15 C' }))`;
  const { stdout } = await promisify(execFile)(process.execPath, ['-e', code, location], { signal });
  return JSON.parse(stdout);
}

// --- the guarded turn: about a dozen lines --------------------------------
const guard = new Guard({ onEvent: (e) => console.error(`[stallguard] ${e.type} ${e.task} +${e.elapsed_ms}ms`) });
const t = guard.start('turn-1', { idle: '2s', execution: '30s', heartbeatInterval: null });
const stream = t.anthropicStream();
const calls = new Map(); // block index -> { id, name, json }
try {
  for await (const data of modelStream(t.signal)) {
    try { stream.feed(data); } catch { /* refused events (e.g. an empty delta) renew nothing */ }
    const ev = JSON.parse(data);
    if (ev.content_block?.type === 'tool_use') calls.set(ev.index, { ...ev.content_block, json: '' });
    if (ev.delta?.type === 'input_json_delta') calls.get(ev.index).json += ev.delta.partial_json;
  }
  for (const call of calls.values()) {
    t.toolStarted(call.id, call.name);
    const result = await getWeather(JSON.parse(call.json), t.signal);
    t.toolFinished(call.id, 'success');
    console.log(`${call.name} ->`, result);
  }
  t.finish('completed');
} catch (err) {
  t.finish(t.signal.aborted ? 'cancelled' : 'failed');
  throw err;
} finally {
  await guard.flush();
}
