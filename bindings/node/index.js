// The stallwarden engine for Node (R11.1). Everything that decides anything
// is the native engine; this file only turns its event lines into objects
// for `onEvent`, aborts each task's AbortSignal on its cancel action, and
// lets `flush()` wait for the events already on their way.
'use strict';

const native = require('./stallwarden.node');

const { argumentDelta, output, heartbeat, progress } = native;

/** The error a task's `signal` is aborted with when the guard cancels it. */
class StallError extends Error {
  constructor(task, reason) {
    super(`stallwarden cancelled task "${task}": ${reason}`);
    this.name = 'StallError';
    this.task = task;
    this.reason = reason;
  }
}

/** One watched task: the recording calls go straight to the engine. */
/** A call's input or result as the engine judges it (R5.12): text as is, anything else as JSON. */
function asText(v) {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  return JSON.stringify(v);
}

class Task {
  #native;
  #rec;
  #signal;
  #guard; // a live task keeps its guard (and its event channel) alive

  constructor(nativeTask, signal, guard) {
    this.#native = nativeTask;
    this.#rec = nativeTask.recorder();
    this.#signal = signal;
    this.#guard = guard;
  }

  /** Aborted with a StallError when the guard cancels the task. */
  get signal() {
    return this.#signal;
  }

  get id() {
    return this.#native.id;
  }

  argumentDelta() {
    argumentDelta(this.#rec);
  }

  output(bytes, lines) {
    output(this.#rec, bytes, lines);
  }

  heartbeat() {
    heartbeat(this.#rec);
  }

  progress(value) {
    return progress(this.#rec, value);
  }

  toolStarted(id, name, input) {
    this.#native.toolStarted(id, name, asText(input));
  }

  toolFinished(id, outcome, result) {
    this.#native.toolFinished(id, outcome, asText(result));
  }

  write(data) {
    this.#native.write(data);
  }

  /** One adapter class for every wire format (the engine's StreamAdapter). */
  argumentStream(format) {
    return this.#native.argumentStream(format);
  }

  anthropicStream() {
    return this.argumentStream('anthropic');
  }

  openaiStream() {
    return this.argumentStream('openai');
  }

  responsesStream() {
    return this.argumentStream('responses');
  }

  geminiStream() {
    return this.argumentStream('gemini');
  }

  pause() {
    this.#native.pause();
  }

  resume() {
    this.#native.resume();
  }

  trigger(reason) {
    this.#native.trigger(reason);
  }

  cancel(reason) {
    this.#native.cancel(reason);
  }

  status() {
    return this.#native.status() ?? null;
  }

  finish(outcome) {
    this.#native.finish(outcome);
  }
}

class Guard {
  #native;
  #onEvent;
  #delivered = 0;
  #waiters = [];
  #tasks = new Map(); // task id -> { name, controller }

  constructor(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`options: expected an object, got ${options}`);
    }
    const { clock, onEvent } = options;
    if (onEvent !== undefined && typeof onEvent !== 'function') {
      throw new TypeError(`onEvent: expected a function, got ${typeof onEvent}`);
    }
    this.#onEvent = onEvent;
    // The native side holds this callback; a WeakRef keeps that from
    // pinning the guard (each live task pins it instead).
    const self = new WeakRef(this);
    this.#native = new native.NativeGuard(clock, ([kind, id, payload]) => {
      self.deref()?.#receive(kind, id, payload);
    });
  }

  #receive(kind, id, payload) {
    try {
      if (kind === 'cancel') {
        const t = this.#tasks.get(id);
        if (t) t.controller.abort(new StallError(t.name, payload));
        return;
      }
      const event = JSON.parse(payload);
      if (event.type === 'finished') this.#tasks.delete(id);
      if (this.#onEvent) this.#onEvent(event);
    } finally {
      this.#delivered += 1;
      if (this.#waiters.length) {
        this.#waiters = this.#waiters.filter((w) => {
          if (this.#delivered < w.target) return true;
          w.resolve();
          return false;
        });
      }
    }
  }

  start(name, options) {
    const task = this.#native.start(name, options);
    const controller = new AbortController();
    this.#tasks.set(task.id, { name, controller });
    return new Task(task, controller.signal, this);
  }

  advance(ms) {
    this.#native.advance(ms);
  }

  status(name) {
    return this.#native.status(name) ?? null;
  }

  statuses() {
    return this.#native.statuses();
  }

  // Bounded (R10.5): rejects with a TimeoutError when the events emitted
  // so far have not reached onEvent within `timeout` (default 5 s; 0 only
  // looks). The native side first waits, as long at most, for the engine's
  // own dispatch, and throws when it did not catch up.
  flush(timeout) {
    let target;
    let ms;
    try {
      [target, ms] = this.#native.posted(timeout);
    } catch (e) {
      return Promise.reject(e);
    }
    if (this.#delivered >= target) return Promise.resolve();
    const late = () => {
      const e = new Error(
        `flush: ${target - this.#delivered} event(s) did not reach onEvent within ${ms} ms`,
      );
      e.name = 'TimeoutError';
      return e;
    };
    if (ms <= 0) return Promise.reject(late());
    return new Promise((resolve, reject) => {
      // The event channel does not hold the process open by itself; this
      // timer does, until the events reach onEvent or the time is up.
      const waiter = {
        target,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(late());
      }, ms);
      this.#waiters.push(waiter);
    });
  }
}

/**
 * The profile `options` give, as `start` would use it, in the engine's
 * canonical form (R10.6): one `key = value` line per key, the same text
 * Rust's `Profile::describe` and Python's `describe_profile` give.
 */
function describeProfile(options) {
  return native.describeProfile(options);
}

module.exports = { Guard, Task, StallError, describeProfile };
