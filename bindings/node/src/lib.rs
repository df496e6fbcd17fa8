//! The stallwarden engine as a Node addon (R11.1): a thin napi-rs shell over
//! [`watchdog_core::Guard`], the argument-stream adapters of
//! `stallwarden-sources` and the JSON-lines event shape of `stallwarden-sinks`.
//!
//! No SPEC rule lives here. Budgets, verdicts, escalation, argument-delta
//! freshness and the R8.3 event objects are the engine's; this crate only
//! converts JS values to engine values and carries each event line to the JS
//! thread through one threadsafe function, in emission order. The package's
//! `index.js` wraps the native guard to parse the lines, call `onEvent` and
//! abort each task's `AbortSignal` on its cancel action.
//!
//! The crate is a `cdylib` that only links inside Node, so it has no Rust
//! test harness; `npm test` in `bindings/node` tests the built addon.

#![deny(clippy::all)]
// R10.7: no function outside tests passes 150 lines (clippy.toml); on only
// where cfg(test) is off, so tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod adapters;

pub use adapters::ArgumentStream;

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use parking_lot::Mutex;
use serde_json::Value;
use stallwarden_sinks::jsonl::JsonLinesSink;
use stallwarden_sources::args::StreamFormat;
use watchdog_core::{
    Action, ActionKind, CallOutcome, Delivery, Event, GuardError, ManualClock, OptionValue,
    Outcome, Profile, Recorder, Sink, SinkError, TaskHandle,
};

/// What the addon posts to JS, as one array `[kind, task id, payload]`: kind is
/// `"event"` (payload: one R8.3 JSON line) or `"cancel"` (payload: the
/// reason of the task's cancel action).
type Post =
    ThreadsafeFunction<(String, f64, String), (), (String, f64, String), Status, false, true>;

/// The JS-thread end of the event stream, shared by the sink and the writer
/// the JSON-lines sink writes into.
struct Outlet {
    tsfn: Post,
    /// Messages handed to the threadsafe function so far; `flush` compares
    /// it with the count the JS side has delivered.
    posted: AtomicU64,
}

impl Outlet {
    fn post(&self, kind: &str, task: u64, payload: String) {
        // The queue is unbounded, so a non-blocking call never drops; it
        // fails only once the environment is shutting down.
        let status = self.tsfn.call(
            (kind.to_owned(), task as f64, payload),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
        if status == Status::Ok {
            self.posted.fetch_add(1, Ordering::Release);
        }
    }
}

/// The writer the JSON-lines sink writes into: it collects one event's line
/// and posts it on flush (the sink writes each line in one `write_all` and
/// flushes per event).
struct LineWriter {
    outlet: Arc<Outlet>,
    /// The task whose event is being written, set by [`JsSink`].
    task: Arc<AtomicU64>,
    buf: Vec<u8>,
}

impl Write for LineWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        while self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        let line = String::from_utf8(std::mem::take(&mut self.buf))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        self.outlet
            .post("event", self.task.load(Ordering::Acquire), line);
        Ok(())
    }
}

/// The guard's one sink: events go through [`JsonLinesSink`] (the R8.3 line
/// shape every JSON-writing part of stallwarden shares), cancel actions go
/// straight to the outlet, both on the same ordered queue.
///
/// Delivery is inline: posting to an unbounded threadsafe-function queue
/// never blocks, and inline delivery means an event is posted before the
/// call that caused it returns to JS, so `flush` sees it.
struct JsSink {
    lines: JsonLinesSink<LineWriter>,
    outlet: Arc<Outlet>,
    task: Arc<AtomicU64>,
    /// Serializes the "set the task id, write the line" pair.
    order: Mutex<()>,
}

impl Sink for JsSink {
    fn on_event(&self, event: &Event) -> std::result::Result<(), SinkError> {
        let _g = self.order.lock();
        self.task.store(event.task.as_raw(), Ordering::Release);
        self.lines.on_event(event)
    }

    fn on_action(&self, action: &Action) -> std::result::Result<(), SinkError> {
        if let ActionKind::Cancel { reason } = &action.kind {
            let _g = self.order.lock();
            self.outlet
                .post("cancel", action.task.as_raw(), reason.clone());
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }

    fn name(&self) -> &str {
        "node"
    }
}

/// Throws a `TypeError` with `msg` and returns the error that tells napi an
/// exception is already pending.
fn type_error(env: &Env, msg: String) -> Error {
    match env.throw_type_error(&msg, None) {
        Ok(()) => Error::new(Status::PendingException, msg),
        Err(e) => e,
    }
}

/// Maps an engine error to a JS `Error` carrying its message.
fn engine_error(e: GuardError) -> Error {
    Error::new(Status::GenericFailure, e.to_string())
}

/// Reads a duration that is not a profile option (`advance`, a `flush`
/// timeout): a humantime string (`"90s"`, `"1m 30s"`) or a number of
/// milliseconds. The error names the key and the value, as the TOML errors do.
fn duration(key: &str, value: &Value) -> std::result::Result<Duration, String> {
    let bad = |why: &str| format!("{key}: invalid duration {value}: {why}");
    match value {
        // R10.6, R8.12: the core parses and bounds it, as for TOML and flags.
        Value::String(s) => watchdog_core::parse_duration(s).map_err(|e| bad(&e.to_string())),
        Value::Number(n) => match n.as_f64() {
            Some(ms) => watchdog_core::duration_from_millis(ms).map_err(|e| bad(&e.to_string())),
            None => Err(bad("expected a non-negative number of milliseconds")),
        },
        _ => Err(bad(
            "expected a humantime string such as \"90s\" or a number of milliseconds",
        )),
    }
}

/// Turns a JS value into the value the core's one option entry takes
/// (R10.6): a number is milliseconds for a duration, `null` and `false`
/// turn a budget off.
fn option_value(v: &Value) -> OptionValue {
    match v {
        Value::Null => OptionValue::Null,
        Value::Bool(b) => OptionValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => OptionValue::Int(i),
            None => OptionValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => OptionValue::Text(s.clone()),
        Value::Array(items) => OptionValue::List(items.iter().map(option_value).collect()),
        Value::Object(_) => OptionValue::Text(v.to_string()),
    }
}

/// Builds a profile from the `start` options, key by key over the
/// defaults, through the core's one entry (R10.6): camelCase keys, the
/// same values and the same errors as TOML, the CLI and Python.
fn profile(opts: &Value) -> std::result::Result<Profile, String> {
    let mut p = Profile::default();
    let Some(map) = opts.as_object() else {
        return match opts {
            Value::Null => Ok(p),
            other => Err(format!("options: expected an object, got {other}")),
        };
    };
    for (key, v) in map {
        p.set(key, option_value(v)).map_err(|e| e.to_string())?;
    }
    Ok(p)
}

/// Renders the profile `options` give, as `start` would use it, in the
/// core's canonical form (R10.6): one `key = value` line per key. Throws a
/// `TypeError` naming a bad option, as `start` does.
///
/// # Examples
///
/// ```js
/// const { describeProfile } = require('stallwarden');
/// describeProfile({ idle: 'off' }); // 'idle = "off"\nexecution = "off"\n...'
/// ```
#[napi]
pub fn describe_profile(env: Env, options: Option<Value>) -> Result<String> {
    let p = profile(options.as_ref().unwrap_or(&Value::Null)).map_err(|m| type_error(&env, m))?;
    p.validate().map_err(|e| type_error(&env, e.to_string()))?;
    Ok(p.describe())
}

fn to_js(value: &impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::new(Status::GenericFailure, e.to_string()))
}

/// The native guard; `index.js` wraps it as `Guard`.
///
/// # Examples
///
/// ```js
/// const { Guard } = require('stallwarden');
/// const guard = new Guard({ clock: 'manual', onEvent: (e) => console.log(e.type) });
/// guard.start('turn-1', { idle: '30s' });
/// guard.advance(30_000); // stalled, cancelling
/// await guard.flush();
/// ```
#[napi]
pub struct NativeGuard {
    guard: watchdog_core::Guard,
    outlet: Arc<Outlet>,
    manual: bool,
}

#[napi]
impl NativeGuard {
    /// Builds a guard on the `'manual'` or `'real'` clock; `post(kind, task,
    /// payload)` receives every event line and cancel on the JS thread,
    /// as one array argument.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        clock: Option<String>,
        post: Function<'_, (String, f64, String), ()>,
    ) -> Result<Self> {
        let manual = match clock.as_deref() {
            None | Some("real") => false,
            Some("manual") => true,
            Some(other) => {
                return Err(type_error(
                    &env,
                    format!("clock: invalid value \"{other}\": expected 'manual' or 'real'"),
                ))
            }
        };
        // Weak: a guard does not keep the process alive; `flush()` holds the
        // event loop open while events are still on their way.
        let tsfn: Post = post
            .build_threadsafe_function()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        let outlet = Arc::new(Outlet {
            tsfn,
            posted: AtomicU64::new(0),
        });
        let task = Arc::new(AtomicU64::new(0));
        let sink = JsSink {
            lines: JsonLinesSink::new(LineWriter {
                outlet: Arc::clone(&outlet),
                task: Arc::clone(&task),
                buf: Vec::with_capacity(256),
            }),
            outlet: Arc::clone(&outlet),
            task,
            order: Mutex::new(()),
        };
        let builder = watchdog_core::Guard::builder().sink(sink);
        let builder = if manual {
            builder.clock(ManualClock::new())
        } else {
            builder
        };
        // R10.5: a guard whose driver thread cannot start is an error, not
        // a guard that judges nothing.
        let guard = builder
            .try_build()
            .map_err(|e| Error::new(Status::GenericFailure, format!("stallwarden: {e}")))?;
        Ok(NativeGuard {
            guard,
            outlet,
            manual,
        })
    }

    /// Starts a task named `name` with the budgets in `options`.
    #[napi]
    pub fn start(&self, env: Env, name: String, options: Option<Value>) -> Result<NativeTask> {
        let p =
            profile(options.as_ref().unwrap_or(&Value::Null)).map_err(|m| type_error(&env, m))?;
        let handle = self.guard.start(name, p).map_err(|e| match e {
            GuardError::Profile { .. } => type_error(&env, e.to_string()),
            e => engine_error(e),
        })?;
        Ok(NativeTask {
            lines: Mutex::new(None),
            recorder: handle.recorder(),
            id: handle.id().as_raw() as f64,
            handle,
        })
    }

    /// Moves the manual clock forward by `ms` (a number of milliseconds or a
    /// humantime string) and takes every verdict that came due.
    #[napi]
    pub fn advance(&self, env: Env, ms: Value) -> Result<()> {
        if !self.manual {
            return Err(Error::new(
                Status::GenericFailure,
                "advance() needs a guard built with clock: 'manual'",
            ));
        }
        let d = duration("ms", &ms).map_err(|m| type_error(&env, m))?;
        self.guard.advance(d);
        Ok(())
    }

    /// Returns the R4.2 snapshot of the live task `name`, or `null`.
    #[napi]
    pub fn status(&self, name: String) -> Result<Option<Value>> {
        self.guard.status(&name).map(|s| to_js(&s)).transpose()
    }

    /// Returns the R4.2 snapshots of every live task, by start order.
    #[napi]
    pub fn statuses(&self) -> Result<Value> {
        to_js(&self.guard.statuses())
    }

    /// Waits up to `timeout` (default 5 s) for the engine's dispatch, then
    /// returns how many messages have been posted to JS so far and the
    /// timeout in milliseconds, for `flush`'s own wait on JS; throws
    /// when the engine's sinks did not catch up in time (R10.5).
    #[napi]
    pub fn posted(&self, env: Env, timeout: Option<Value>) -> Result<Vec<f64>> {
        let timeout = match timeout {
            None | Some(Value::Null) => Duration::from_secs(5),
            Some(v) => duration("timeout", &v).map_err(|m| type_error(&env, m))?,
        };
        if !self.guard.flush(timeout) {
            return Err(Error::new(
                Status::GenericFailure,
                format!(
                    "flush: the engine's sinks did not catch up within {}",
                    humantime::format_duration(timeout)
                ),
            ));
        }
        Ok(vec![
            self.outlet.posted.load(Ordering::Acquire) as f64,
            timeout.as_secs_f64() * 1000.0,
        ])
    }
}

/// A native task; `index.js` wraps it as `Task`.
///
/// # Examples
///
/// ```js
/// const t = guard.start('turn-1', { idle: '60s', execution: '10m' });
/// t.toolStarted('toolu_01', 'bash');
/// t.toolFinished('toolu_01', 'success');
/// t.finish('completed');
/// ```
#[napi]
pub struct NativeTask {
    handle: TaskHandle,
    recorder: Recorder,
    id: f64,
    /// The task's output as `write` judges it (R5.12), made on first use.
    lines: Mutex<
        Option<(
            watchdog_core::repeat::LineJudge,
            watchdog_core::OutputCounter,
        )>,
    >,
}

fn outcome_of_call(env: &Env, s: &str) -> Result<CallOutcome> {
    match s {
        "success" => Ok(CallOutcome::Success),
        "failure" | "error" => Ok(CallOutcome::Error),
        "cancelled" => Ok(CallOutcome::Cancelled),
        other => Err(type_error(
            env,
            format!(
                "outcome: invalid value \"{other}\": expected 'success', 'failure', 'error' or 'cancelled'"
            ),
        )),
    }
}

#[napi]
impl NativeTask {
    /// The task's id, which keys its cancel messages.
    #[napi(getter)]
    pub fn id(&self) -> f64 {
        self.id
    }

    /// The handle the recording functions take.
    #[napi]
    pub fn recorder(&self) -> External<Recorder> {
        External::new(self.recorder.clone())
    }

    /// Records the start of tool call `id` running `name` (R2.2, R5.3);
    /// with its `input` (as text), a start repeating a call in the task's
    /// window renews nothing (R5.12).
    #[napi]
    pub fn tool_started(&self, id: String, name: String, input: Option<String>) -> Result<()> {
        match input {
            Some(input) => self
                .recorder
                .tool_started_with(&id, &name, input.as_bytes()),
            None => self.recorder.tool_started(&id, &name),
        }
        .map_err(engine_error)
    }

    /// Records the end of tool call `id`: `'success'`, `'failure'` (or
    /// `'error'`) or `'cancelled'`; with its `result` (as text, or a digest
    /// of it), a call repeating one in the task's window renews nothing
    /// (R5.12).
    #[napi]
    pub fn tool_finished(
        &self,
        env: Env,
        id: String,
        outcome: String,
        result: Option<String>,
    ) -> Result<()> {
        let o = outcome_of_call(&env, &outcome)?;
        match result {
            Some(result) => self.recorder.tool_finished_with(&id, o, result.as_bytes()),
            None => self.recorder.tool_finished(&id, o),
        }
        .map_err(engine_error)
    }

    /// Records output the command wrote, as `stallwarden run` does: every
    /// byte counted, each ended line judged, a read that only repeats
    /// recent lines a `repeat` (R5.1, R5.12).
    #[napi]
    pub fn write(&self, data: Either<String, Buffer>) {
        let bytes: &[u8] = match &data {
            Either::A(s) => s.as_bytes(),
            Either::B(b) => b.as_ref(),
        };
        if bytes.is_empty() {
            return;
        }
        let mut lines = self.lines.lock();
        let (judge, counter) = lines.get_or_insert_with(|| {
            (
                self.recorder.repeats().lines(),
                self.recorder.output_counter(),
            )
        });
        let v = judge.feed(bytes);
        counter.record_as(bytes.len() as u64, v.newlines, v.kind);
    }

    /// Returns the task's R4.2 snapshot, or `null` once it has finished.
    #[napi]
    pub fn status(&self) -> Result<Option<Value>> {
        self.recorder.status().map(|s| to_js(&s)).transpose()
    }

    /// Settles the task: `'completed'`, `'failed'` or `'cancelled'`;
    /// `finished` is its last event (R3.8).
    #[napi]
    pub fn finish(&self, env: Env, outcome: Option<String>) -> Result<()> {
        let o = match outcome.as_deref() {
            None | Some("completed") => Outcome::Completed,
            Some("failed") => Outcome::Failed,
            Some("cancelled") => Outcome::Cancelled,
            Some(other) => {
                return Err(type_error(
                    &env,
                    format!(
                        "outcome: invalid value \"{other}\": expected 'completed', 'failed' or 'cancelled'"
                    ),
                ))
            }
        };
        self.handle.finish(o, None, None).map_err(engine_error)
    }

    /// Returns an adapter for `format`'s stream events: `'anthropic'`,
    /// `'openai'`, `'responses'` or `'gemini'` (R5.2, R5.9).
    #[napi]
    pub fn argument_stream(&self, env: Env, format: String) -> Result<ArgumentStream> {
        let format: StreamFormat = format
            .parse()
            .map_err(|e| type_error(&env, format!("format: {e}")))?;
        Ok(ArgumentStream::new(format, self.recorder.clone()))
    }

    /// Stops every budget, the deadline included, until `resume` (R2.8).
    #[napi]
    pub fn pause(&self) -> Result<()> {
        self.handle.pause().map_err(engine_error)
    }

    /// Resumes the budgets, keeping the time already used (R2.8).
    #[napi]
    pub fn resume(&self) -> Result<()> {
        self.handle.resume().map_err(engine_error)
    }

    /// Reports the task's own fault: a cancel with `reason` (R2.10).
    #[napi]
    pub fn trigger(&self, reason: String) -> Result<()> {
        self.handle.trigger(&reason).map_err(engine_error)
    }

    /// Cancels the task now with `reason` (R3.5).
    #[napi]
    pub fn cancel(&self, reason: String) -> Result<()> {
        self.handle.cancel(&reason).map_err(engine_error)
    }
}

// The recording calls are free functions on the task's recorder handle, not
// methods of `NativeTask`: a method call unwraps and type-checks `this`,
// which costs several times the record itself; an External is one lookup.

/// Records one accepted streamed tool-argument delta (R5.2).
///
/// # Examples
///
/// ```js
/// t.argumentDelta(); // index.js passes the task's recorder handle
/// ```
#[napi]
pub fn argument_delta(rec: &External<Recorder>) {
    rec.argument_delta();
}

/// Records `bytes` of output over `lines` lines (R5.1).
///
/// # Examples
///
/// ```js
/// t.output(4096, 12);
/// ```
#[napi]
pub fn output(rec: &External<Recorder>, bytes: f64, lines: Option<f64>) {
    rec.output(bytes.max(0.0) as u64, lines.unwrap_or(0.0).max(0.0) as u64);
}

/// Records a heartbeat: liveness, not progress (R5.4).
///
/// # Examples
///
/// ```js
/// t.heartbeat();
/// ```
#[napi]
pub fn heartbeat(rec: &External<Recorder>) {
    rec.heartbeat();
}

/// Records a progress value; true when it rose and renewed the task (R5.8).
///
/// # Examples
///
/// ```js
/// if (t.progress(0.42)) console.log('renewed');
/// ```
#[napi]
pub fn progress(rec: &External<Recorder>, value: f64) -> bool {
    rec.progress(value)
}

/// Does nothing with a recorder handle: the same call shape as
/// [`argument_delta`] without the record, for the bench.
///
/// # Examples
///
/// ```js
/// native.noopWith(task.recorder()); // bench/record.mjs
/// ```
#[napi]
pub fn noop_with(rec: &External<Recorder>) {
    let _ = rec;
}

/// Does nothing: the baseline a bench compares `argumentDelta()` against.
///
/// # Examples
///
/// ```js
/// native.noop(); // bench/record.mjs
/// ```
#[napi]
pub fn noop() {}
