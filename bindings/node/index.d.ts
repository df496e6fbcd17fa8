/** A duration: a humantime string (`'90s'`, `'1m 30s'`, `'0'`) or a number of milliseconds. */
export type Duration = string | number;

/**
 * A budget: a duration, or off (`'off'`, `null` or `false`). The engine
 * parses every option in one place (R10.6): the same values mean the same
 * as in TOML, the CLI flags and Python, and a bad one throws a TypeError
 * with the same message.
 */
export type Budget = Duration | 'off' | null | false;

/** How a tool call ended: `'failure'` and `'error'` are the same outcome. */
export type CallOutcome = 'success' | 'failure' | 'error' | 'cancelled';

/** A signal kind of R5 (the names of the TOML `renewed-by` key). */
export type SignalKind =
  | 'argument-delta'
  | 'output'
  | 'tool-call'
  | 'progress'
  | 'heartbeat'
  | 'cpu'
  | 'net'
  | 'custom';

/** A task's budgets and escalation settings (SPEC §2, §3); omitted keys keep the defaults. */
export interface TaskOptions {
  /** R2.1: longest silence with no tool call in flight; `'off'` turns it off. Default `'5m'`. */
  idle?: Budget;
  /** R2.2: longest silence while a tool call is in flight; the budget is max(execution, idle). */
  execution?: Budget;
  /** R2.3: longest silence before the first progress signal. */
  startup?: Budget;
  /** R2.4: total time from the start, never renewed. */
  deadline?: Budget;
  /** R2.9: the furthest the deadline may be extended, from the start. */
  maxDeadline?: Budget;
  /** R2.5: longest gap between heartbeats, armed by the first. */
  liveness?: Budget;
  /** R3.7: outbound heartbeat cadence, 1 s to 1 h; `'off'`, `0` or `null` disables heartbeats. Default `'10s'`. */
  heartbeatInterval?: Budget;
  /** R3.6: when to emit the one `long_running` event. */
  longRunningAfter?: Budget;
  /** R3.2: the strike that cancels; 0 means notify only. Default 1. */
  terminateAfter?: number;
  /** R3.5: time between the cancel and the kill action, 0 to 1 h (`0` kills at once; never off). Default `'10s'`. */
  gracePeriod?: Duration;
  /** R3.4: deadline and liveness verdicts notify instead of cancelling. */
  notifyOnly?: boolean;
  /** R2.6: the signal kinds that renew the silence budgets. */
  renewedBy?: SignalKind[];
}

/** An R8.3 event object, as the JSON-lines sink writes it. */
export interface StallwardenEvent {
  type:
    | 'started'
    | 'stalled'
    | 'recovered'
    | 'cancelling'
    | 'killed'
    | 'heartbeat'
    | 'long_running'
    | 'finished'
    | string;
  /** The task's name. */
  task: string;
  /** Wall time, RFC 3339 with milliseconds (a label only, R2.7). */
  at: string;
  /** Milliseconds since the task started. */
  elapsed_ms: number;
  [field: string]: unknown;
}

/** An R4.2 status snapshot. */
export interface TaskStatus {
  name: string;
  id: number;
  state: string;
  paused: boolean;
  started_at: string;
  elapsed_ms: number;
  strikes: number;
  stall_count: number;
  total_bytes: number;
  total_lines: number;
  budgets: Array<{ budget: string; [field: string]: unknown }>;
  [field: string]: unknown;
}

/** What a fed stream event did: renewed the task, moved the tracker, or nothing. */
export type Step = 'renewed' | 'tracked' | 'ignored';

/** A wire format of streamed tool-call arguments (R5.2, R5.9). */
export type StreamFormat = 'anthropic' | 'openai' | 'responses' | 'gemini';

/** An adapter for a provider's streamed tool-call arguments (R5.2): one class for every format, over the engine's `StreamAdapter` trait. */
export interface ArgumentStream {
  /** Feeds one SSE `data:` payload; throws an Error with the reason when the event is refused. */
  feed(data: string): Step;
  /** Ends the turn: the next message starts a new generation. */
  turnEnd(): void;
  /** The wire format this adapter reads. */
  readonly format: StreamFormat;
  /** How many deltas renewed the task so far. */
  readonly accepted: number;
  /** Refusals so far, by key (`args.empty_delta`, `args.invalid_json`, ...). */
  readonly rejections: Record<string, number>;
}

/** One watched task; `Guard.start` makes them. */
export class Task {
  private constructor();
  /** The task's engine id. */
  readonly id: number;
  /** Aborted with a `StallError` when the guard cancels the task (R3.2). */
  readonly signal: AbortSignal;
  /** An accepted streamed tool-argument delta: renews the task (R5.2). */
  argumentDelta(): void;
  /** Output written: renews the task (R5.1). */
  output(bytes: number, lines?: number): void;
  /** The worker is alive: liveness, not progress (R5.4). */
  heartbeat(): void;
  /** A progress value; true when it rose and renewed the task (R5.8). */
  progress(value: number): boolean;
  /** A tool call started: the execution budget applies (R2.2). With its `input` (text, or any value as JSON), a start repeating a call in the task's recent window renews nothing (R5.12). The engine's one set of calls in flight checks it (R10.6): an empty id or name, one over 256 bytes, an id already in flight, or a start past 1024 in flight throws an Error with the same message as Rust and Python. */
  toolStarted(id: string, name: string, input?: unknown): void;
  /** A tool call ended. With its `result` (text, a Buffer, or any value as JSON; or a digest of it), a call whose name, input and result repeat one in the task's recent window renews nothing, and a stall says `NAME returned the same result N times` (R5.12). */
  toolFinished(id: string, outcome: CallOutcome, result?: unknown): void;
  /** Output the command wrote, as `stallwarden run` reads it: counted, and each ended line judged; lines that only repeat recent ones (clocks, spinner frames and retry counters aside) renew nothing (R5.12). */
  write(data: string | Buffer): void;
  /** An adapter for `format`'s stream events; an unknown format throws a TypeError naming the four. */
  argumentStream(format: StreamFormat): ArgumentStream;
  /** Anthropic Messages stream events: `argumentStream('anthropic')`. */
  anthropicStream(): ArgumentStream;
  /** OpenAI Chat Completions stream chunks. */
  openaiStream(): ArgumentStream;
  /** OpenAI Responses API stream events (R5.9). */
  responsesStream(): ArgumentStream;
  /** Gemini `streamGenerateContent` chunks (R5.9). */
  geminiStream(): ArgumentStream;
  /** Stops every budget, the deadline included, until `resume` (R2.8), as while waiting on a human. */
  pause(): void;
  /** Resumes the budgets, keeping the time already used (R2.8). */
  resume(): void;
  /** Reports the task's own fault: a cancel with `reason` (R2.10); `signal` aborts. */
  trigger(reason: string): void;
  /** Cancels the task now with `reason` (R3.5); `signal` aborts. */
  cancel(reason: string): void;
  /** The R4.2 snapshot, or null once finished. */
  status(): TaskStatus | null;
  /** Settles the task; `finished` is its last event (R3.8). */
  finish(outcome?: 'completed' | 'failed' | 'cancelled'): void;
}

export interface GuardOptions {
  /** `'real'` (the default) or `'manual'` (virtual time, moved by `advance`). */
  clock?: 'manual' | 'real';
  /** Receives every event on the JS thread, in order, `finished` last for each task. An exception it throws is an uncaught exception; later events are still delivered. */
  onEvent?: (event: StallwardenEvent) => void;
}

/** The watchdog engine. */
export class Guard {
  constructor(options?: GuardOptions);
  /** Starts a task; names are unique among live tasks. Throws a TypeError naming a bad option. */
  start(name: string, options?: TaskOptions): Task;
  /** Moves a manual clock forward and takes every verdict that came due. */
  advance(ms: Duration): void;
  /** The live task's R4.2 snapshot, or null. */
  status(name: string): TaskStatus | null;
  /** Every live task's snapshot, by start order. */
  statuses(): TaskStatus[];
  /**
   * Resolves when every event emitted so far has reached onEvent. Bounded:
   * rejects with an Error named `TimeoutError` when that takes longer than
   * `timeout` (default 5 s; `0` only looks).
   */
  flush(timeout?: Duration): Promise<void>;
}

/**
 * The profile `options` give, as `start` would use it, in the engine's
 * canonical form (R10.6): one `key = value` line per key, in TOML syntax.
 * Throws a TypeError naming a bad option, as `start` does.
 */
export function describeProfile(options?: TaskOptions): string;

/** The error a task's signal is aborted with. */
export class StallError extends Error {
  readonly task: string;
  readonly reason: string;
}
