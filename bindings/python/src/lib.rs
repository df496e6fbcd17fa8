//! The stallguard engine as a Python module (R11.1): `import stallguard`.
//!
//! A thin shell over `watchdog-core` and the stream adapters of
//! `stallguard-sources`: every rule is the engine's, nothing is
//! re-implemented here. This file only converts values (durations, names,
//! outcomes) and carries events to Python:
//!
//! - events reach `on_event` as the R8.3 dicts, serialized by the engine's own
//!   `Serialize` impl (the same bytes `--events` writes), on one sink thread
//!   of their own, in order, `finished` last, with the GIL held only for the
//!   call;
//! - a cancel marks the task cancelled and completes every `await
//!   task.cancelled()` through its event loop's `call_soon_threadsafe`;
//! - calls that may wait (advancing a virtual clock, flushing) release the
//!   GIL, so the sink thread can deliver meanwhile.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pyo3::exceptions::{PyRuntimeError, PyTimeoutError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyString};
use stallguard_sinks::process::ProcessSink;
use stallguard_sources::args::StreamFormat;
use stallguard_sources::procs::ProcessSampler;
use watchdog_core::{
    Action, ActionKind, CallOutcome, Delivery, Event, GuardError, KindSet, ManualClock, Outcome,
    Profile, SignalKind, Sink, SinkError, TaskId, TaskState,
};

mod adapters;
use adapters::ArgumentStream;

/// What a cancel has to reach for one task: its flag and the futures that
/// `await task.cancelled()` handed out.
#[derive(Default)]
struct CancelState {
    cancelled: AtomicBool,
    /// `(future, loop)` pairs still waiting.
    waiters: Mutex<Vec<(Py<PyAny>, Py<PyAny>)>>,
}

/// Everything the sink thread shares with the Python objects.
struct Shared {
    on_event: Option<Py<PyAny>>,
    loads: Py<PyAny>,
    /// `resolve(future)`: sets the future's result unless it is done.
    resolve: Py<PyAny>,
    tasks: Mutex<HashMap<TaskId, Arc<CancelState>>>,
}

impl Shared {
    fn cancel_state(&self, id: TaskId) -> Arc<CancelState> {
        Arc::clone(self.tasks.lock().entry(id).or_default())
    }
}

/// The sink that carries the engine's events and cancels into Python.
struct PySink(Arc<Shared>);

impl Sink for PySink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        if let Some(callback) = &self.0.on_event {
            let json = serde_json::to_string(event).map_err(SinkError::new)?;
            Python::attach(|py| {
                let call = self
                    .0
                    .loads
                    .bind(py)
                    .call1((json,))
                    .and_then(|dict| callback.bind(py).call1((dict,)));
                if let Err(e) = call {
                    // A failing callback is the runner's bug; the guard goes
                    // on and Python reports it where it reports such errors.
                    e.write_unraisable(py, Some(callback.bind(py)));
                }
            });
        }
        if event.kind.type_name() == "finished" {
            self.0.tasks.lock().remove(&event.task);
        }
        Ok(())
    }

    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        if let ActionKind::Cancel { .. } = action.kind {
            let state = self.0.cancel_state(action.task);
            let mut waiters = state.waiters.lock();
            state.cancelled.store(true, Ordering::Release);
            if !waiters.is_empty() {
                Python::attach(|py| {
                    for (future, event_loop) in waiters.drain(..) {
                        let resolve = self.0.resolve.bind(py);
                        if let Err(e) = event_loop
                            .bind(py)
                            .call_method1("call_soon_threadsafe", (resolve, future))
                        {
                            // The loop is closed: nobody awaits any more.
                            e.write_unraisable(py, None);
                        }
                    }
                });
            }
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        // Its own thread: a slow Python callback delays nobody (R6.2), and
        // the GIL is never taken while the engine holds its lock.
        Delivery::Isolated
    }

    fn name(&self) -> &str {
        "python"
    }
}

/// How long `Guard.flush` waits by default (R10.5: bounded).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// A watchdog for many tasks; see the module documentation in `stallguard.pyi`.
#[pyclass(frozen, module = "stallguard")]
struct Guard {
    guard: watchdog_core::Guard,
    shared: Arc<Shared>,
    manual: bool,
}

#[pymethods]
impl Guard {
    #[new]
    #[pyo3(signature = (clock = "real", on_event = None, process_groups = false))]
    fn new(
        py: Python<'_>,
        clock: &str,
        on_event: Option<Py<PyAny>>,
        process_groups: bool,
    ) -> PyResult<Self> {
        if let Some(cb) = &on_event {
            if !cb.bind(py).is_callable() {
                return Err(PyTypeError::new_err("on_event: expected a callable"));
            }
        }
        let helpers = PyModule::from_code(
            py,
            c"def resolve(future):\n    if not future.done():\n        future.set_result(None)\n",
            c"stallguard_helpers.py",
            c"stallguard_helpers",
        )?;
        let shared = Arc::new(Shared {
            on_event,
            loads: PyModule::import(py, "json")?.getattr("loads")?.unbind(),
            resolve: helpers.getattr("resolve")?.unbind(),
            tasks: Mutex::new(HashMap::new()),
        });
        let mut builder = watchdog_core::Guard::builder().sink(PySink(Arc::clone(&shared)));
        if process_groups {
            // A cancel stops the process group a task attached (R3.5, R6.4):
            // SIGTERM, then SIGKILL after the grace period.
            builder = builder.sink(ProcessSink::new());
        }
        let (builder, manual) = match clock {
            "real" => (builder, false),
            "manual" => (builder.clock(ManualClock::new()), true),
            other => {
                return Err(PyValueError::new_err(format!(
                    "clock: expected \"real\" or \"manual\", got {other:?}"
                )))
            }
        };
        // R10.5: a guard whose threads cannot start is an error, as
        // `threading.Thread.start` raises RuntimeError, not a guard that
        // judges nothing.
        let guard = builder
            .try_build()
            .map_err(|e| PyRuntimeError::new_err(format!("stallguard: {e}")))?;
        Ok(Guard {
            guard,
            shared,
            manual,
        })
    }

    /// Starts watching a task named `name` with the given budgets.
    #[pyo3(signature = (
        name, *, idle = None, execution = None, startup = None, deadline = None,
        max_deadline = None, liveness = None, heartbeat_interval = None,
        terminate_after = None, grace_period = None, long_running_after = None,
        renewed_by = None, notify_only = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        name: &str,
        idle: Option<&Bound<'_, PyAny>>,
        execution: Option<&Bound<'_, PyAny>>,
        startup: Option<&Bound<'_, PyAny>>,
        deadline: Option<&Bound<'_, PyAny>>,
        max_deadline: Option<&Bound<'_, PyAny>>,
        liveness: Option<&Bound<'_, PyAny>>,
        heartbeat_interval: Option<&Bound<'_, PyAny>>,
        terminate_after: Option<&Bound<'_, PyAny>>,
        grace_period: Option<&Bound<'_, PyAny>>,
        long_running_after: Option<&Bound<'_, PyAny>>,
        renewed_by: Option<&Bound<'_, PyAny>>,
        notify_only: Option<bool>,
    ) -> PyResult<Task> {
        let mut p = Profile::default();
        if let Some(v) = idle {
            p.idle = budget("idle", v)?;
        }
        if let Some(v) = execution {
            p.execution = budget("execution", v)?;
        }
        if let Some(v) = startup {
            p.startup = budget("startup", v)?;
        }
        if let Some(v) = deadline {
            p.deadline = budget("deadline", v)?;
        }
        if let Some(v) = max_deadline {
            p.max_deadline = budget("max_deadline", v)?;
        }
        if let Some(v) = liveness {
            p.liveness = budget("liveness", v)?;
        }
        if let Some(v) = heartbeat_interval {
            p.heartbeat_interval = budget("heartbeat_interval", v)?;
        }
        if let Some(v) = grace_period {
            p.grace_period = budget("grace_period", v)?.unwrap_or(Duration::ZERO);
        }
        if let Some(v) = long_running_after {
            p.long_running_after = budget("long_running_after", v)?;
        }
        if let Some(v) = terminate_after {
            p.terminate_after = v.extract::<u32>().map_err(|_| {
                PyValueError::new_err(format!(
                    "terminate_after: expected a whole number of strikes (0 notifies only), got {}",
                    repr(v)
                ))
            })?;
        }
        if let Some(v) = renewed_by {
            p.renewed_by = kinds(v)?;
        }
        if let Some(v) = notify_only {
            p.notify_only = v;
        }
        let handle = self.guard.start(name, p).map_err(guard_error)?;
        let cancel = self.shared.cancel_state(handle.id());
        Ok(Task {
            handle: Arc::new(handle),
            cancel,
            shared: Arc::clone(&self.shared),
            sampler: Mutex::new(None),
        })
    }

    /// Moves the manual clock forward by `ms` milliseconds and takes every
    /// verdict that came due.
    fn advance(&self, py: Python<'_>, ms: &Bound<'_, PyAny>) -> PyResult<()> {
        if !self.manual {
            return Err(PyRuntimeError::new_err(
                "advance: only a Guard(clock=\"manual\") can be advanced; real time moves by itself",
            ));
        }
        let by = budget("ms", ms)?.unwrap_or(Duration::ZERO);
        py.detach(|| self.guard.advance(by));
        Ok(())
    }

    /// Returns once every event emitted so far reached `on_event`; raises
    /// TimeoutError if that takes longer than `timeout` (default 5 s).
    #[pyo3(signature = (timeout = None))]
    fn flush(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let timeout = match timeout {
            None => FLUSH_TIMEOUT,
            Some(v) => budget("timeout", v)?.ok_or_else(|| {
                PyValueError::new_err(
                    "timeout: a flush is bounded: expected a duration, got \"off\"",
                )
            })?,
        };
        if py.detach(|| self.guard.flush(timeout)) {
            return Ok(());
        }
        Err(PyTimeoutError::new_err(format!(
            "flush: on_event did not catch up within {} (it is still running an event)",
            humantime::format_duration(timeout)
        )))
    }

    /// Returns the status dict of the live task named `name`, or None.
    fn status(&self, py: Python<'_>, name: &str) -> PyResult<Option<Py<PyAny>>> {
        self.guard
            .status(name)
            .map(|s| to_py(py, &self.shared, &s))
            .transpose()
    }

    /// Returns the status dicts of every live task, by start order.
    fn statuses(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.shared, &self.guard.statuses())
    }

    /// Returns True while any task is live (R4.3).
    fn is_busy(&self) -> bool {
        self.guard.is_busy()
    }

    fn __repr__(&self) -> String {
        format!(
            "Guard(clock={:?}, tasks={})",
            if self.manual { "manual" } else { "real" },
            self.guard.statuses().len()
        )
    }
}

/// One watched task: record what its work does, then finish it.
#[pyclass(frozen, module = "stallguard")]
struct Task {
    handle: Arc<watchdog_core::TaskHandle>,
    cancel: Arc<CancelState>,
    shared: Arc<Shared>,
    /// Samples the attached process's descendants (R5.5), for stall events.
    sampler: Mutex<Option<ProcessSampler>>,
}

#[pymethods]
impl Task {
    /// The task's name.
    #[getter]
    fn name(&self) -> String {
        self.handle
            .status()
            .map_or_else(|| self.handle.id().to_string(), |s| s.name)
    }

    /// Does nothing: the floor a call into the module costs, which the
    /// record-path bench (`bench/record.py`) compares `argument_delta` with.
    fn _noop(&self) {}

    /// A streamed tool-argument delta (R5.2), counted as progress.
    fn argument_delta(&self) {
        self.handle.argument_delta();
    }

    /// Output of the work: `nbytes` bytes holding `nlines` newlines (R5.1).
    #[pyo3(signature = (nbytes, nlines = 0))]
    fn output(&self, nbytes: u64, nlines: u64) {
        self.handle.output(nbytes, nlines);
    }

    /// The worker says it is alive (R2.5); progress only if opted in (R2.6).
    fn heartbeat(&self) {
        self.handle.heartbeat();
    }

    /// A progress value; renews only when it rises (R2.6). Returns whether
    /// it rose.
    fn progress(&self, value: f64) -> bool {
        self.handle.progress(value)
    }

    /// A tool call started (R5.3): the execution budget applies while it runs.
    fn tool_started(&self, call_id: &str, name: &str) -> PyResult<()> {
        self.handle.tool_started(call_id, name).map_err(guard_error)
    }

    /// A tool call finished with "success", "failure" (or "error") or "cancelled".
    fn tool_finished(&self, call_id: &str, outcome: &str) -> PyResult<()> {
        let outcome = match outcome {
            "success" => CallOutcome::Success,
            "failure" | "error" => CallOutcome::Error,
            "cancelled" => CallOutcome::Cancelled,
            other => {
                return Err(PyValueError::new_err(format!(
                    "outcome: expected \"success\", \"failure\" or \"cancelled\", got {other:?}"
                )))
            }
        };
        self.handle
            .tool_finished(call_id, outcome)
            .map_err(guard_error)
    }

    /// Attaches a process group leader to the task (R3.5, R5.5): a guard
    /// built with `process_groups=True` stops its group on a cancel, and its
    /// descendants, sampled every `sample_every`, are named in stall events.
    #[pyo3(signature = (pid, sample_every = None))]
    fn attach_process(&self, pid: u32, sample_every: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        if pid <= 1 {
            return Err(PyValueError::new_err(format!(
                "pid: expected a process group leader's pid (> 1), got {pid}"
            )));
        }
        let every = match sample_every {
            Some(v) => budget("sample_every", v)?,
            None => Some(Duration::from_secs(1)),
        };
        let recorder = self.handle.recorder();
        recorder.set_pid(pid);
        let sampler = match every {
            Some(every) => Some(
                ProcessSampler::spawn(pid, every, Some(recorder))
                    .map_err(|e| PyValueError::new_err(format!("sample_every: {e}")))?,
            ),
            None => None,
        };
        *self.sampler.lock() = sampler;
        Ok(())
    }

    /// Pauses every budget (R2.8), as while waiting on a human.
    fn pause(&self) -> PyResult<()> {
        self.handle.pause().map_err(guard_error)
    }

    /// Resumes the budgets, keeping the time already used (R2.8).
    fn resume(&self) -> PyResult<()> {
        self.handle.resume().map_err(guard_error)
    }

    /// Reports the task's own fault: a cancel with `reason` (R2.10).
    fn trigger(&self, reason: &str) -> PyResult<()> {
        self.handle.trigger(reason).map_err(guard_error)
    }

    /// Cancels the task now with `reason` (R3.5).
    fn cancel(&self, reason: &str) -> PyResult<()> {
        self.handle.cancel(reason).map_err(guard_error)
    }

    /// An adapter for `format`'s stream events: "anthropic", "openai",
    /// "responses" or "gemini" (R5.2, R5.9).
    fn argument_stream(&self, format: &str) -> PyResult<ArgumentStream> {
        let format = ArgumentStream::format(format)?;
        Ok(ArgumentStream::new(format, self.handle.recorder()))
    }

    /// An adapter for Anthropic Messages stream events (R5.2).
    fn anthropic_stream(&self) -> ArgumentStream {
        ArgumentStream::new(StreamFormat::Anthropic, self.handle.recorder())
    }

    /// An adapter for OpenAI chat-completions chunks (R5.2, R5.9).
    fn openai_stream(&self) -> ArgumentStream {
        ArgumentStream::new(StreamFormat::OpenAi, self.handle.recorder())
    }

    /// An adapter for OpenAI Responses API stream events (R5.9).
    fn responses_stream(&self) -> ArgumentStream {
        ArgumentStream::new(StreamFormat::Responses, self.handle.recorder())
    }

    /// An adapter for Gemini `streamGenerateContent` chunks (R5.9).
    fn gemini_stream(&self) -> ArgumentStream {
        ArgumentStream::new(StreamFormat::Gemini, self.handle.recorder())
    }

    /// True once the guard cancelled the task (a stall, a deadline, a
    /// trigger or a cancel).
    #[getter]
    fn is_cancelled(&self) -> bool {
        self.cancel.cancelled.load(Ordering::Acquire)
            || self
                .handle
                .status()
                .is_some_and(|s| s.state == TaskState::Cancelling)
    }

    /// An awaitable that completes when the task is cancelled.
    fn cancelled(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let event_loop = PyModule::import(py, "asyncio")?.call_method0("get_running_loop")?;
        let future = event_loop.call_method0("create_future")?;
        let mut waiters = self.cancel.waiters.lock();
        if self.cancel.cancelled.load(Ordering::Acquire) {
            future.call_method1("set_result", (py.None(),))?;
        } else {
            waiters.push((future.clone().unbind(), event_loop.unbind()));
        }
        Ok(future.unbind())
    }

    /// The task's status dict (R4.2), or None once it has finished.
    fn status(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.handle
            .status()
            .map(|s| to_py(py, &self.shared, &s))
            .transpose()
    }

    /// Settles the task: "completed", "failed" or "cancelled". `finished`
    /// is its last event (R3.8).
    #[pyo3(signature = (outcome = "completed"))]
    fn finish(&self, outcome: &str) -> PyResult<()> {
        let outcome = match outcome {
            "completed" => Outcome::Completed,
            "failed" => Outcome::Failed,
            "cancelled" => Outcome::Cancelled,
            other => {
                return Err(PyValueError::new_err(format!(
                    "outcome: expected \"completed\", \"failed\" or \"cancelled\", got {other:?}"
                )))
            }
        };
        self.sampler.lock().take();
        self.handle.finish(outcome, None, None).map_err(guard_error)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Leaving a `with` block finishes the task: completed, or failed when
    /// an exception is leaving it.
    fn __exit__(
        &self,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        let outcome = if exc_type.is_some_and(|t| !t.is_none()) {
            Outcome::Failed
        } else {
            Outcome::Completed
        };
        self.sampler.lock().take();
        // Already finished by hand: nothing more to say.
        let _ = self.handle.finish(outcome, None, None);
        false
    }
}

/// Reads a duration given as a humantime string ("90s", "1h 30m"), a number
/// of milliseconds or a `datetime.timedelta`; "off" (or None-like zero for
/// the heartbeat) disables a budget.
fn budget(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<Duration>> {
    let bad = || {
        PyValueError::new_err(format!(
            "{key}: expected a duration (a string like \"90s\" or \"1h 30m\", \"off\", \
             a number of milliseconds, or a datetime.timedelta), got {}",
            repr(v)
        ))
    };
    // The core's reason (out of range, negative), then the value as given.
    let because = |e: watchdog_core::DurationError| {
        PyValueError::new_err(format!("{key}: {e}; got {}", repr(v)))
    };
    if v.is_instance_of::<PyBool>() {
        return Err(bad());
    }
    if let Ok(s) = v.cast::<PyString>() {
        let s = s.to_str()?.trim();
        if s == "off" {
            return Ok(None);
        }
        // R10.6, R8.12: the core parses and bounds it, as for TOML and flags.
        return watchdog_core::parse_duration(s).map(Some).map_err(because);
    }
    let ms = if let Ok(ms) = v.extract::<f64>() {
        ms
    } else if v.hasattr("total_seconds")? {
        let secs: f64 = v
            .call_method0("total_seconds")?
            .extract()
            .map_err(|_| bad())?;
        secs * 1000.0
    } else {
        return Err(bad());
    };
    watchdog_core::duration_from_millis(ms)
        .map(Some)
        .map_err(because)
}

/// Reads `renewed_by`: a list of signal kind names.
fn kinds(v: &Bound<'_, PyAny>) -> PyResult<KindSet> {
    let bad = |what: String| PyValueError::new_err(format!("renewed_by: {what}"));
    let list = v
        .cast::<PyList>()
        .map_err(|_| bad(format!("expected a list of signal kinds, got {}", repr(v))))?;
    let mut set = KindSet::EMPTY;
    for item in list.iter() {
        let name: String = item
            .extract()
            .map_err(|_| bad(format!("expected a signal kind name, got {}", repr(&item))))?;
        let kind: SignalKind = name.parse().map_err(|e| bad(format!("{e}")))?;
        set = set.with(kind);
    }
    Ok(set)
}

fn repr(v: &Bound<'_, PyAny>) -> String {
    v.repr()
        .map_or_else(|_| "<unprintable>".to_owned(), |r| r.to_string())
}

fn guard_error(e: GuardError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn to_py<T: serde::Serialize>(py: Python<'_>, shared: &Shared, v: &T) -> PyResult<Py<PyAny>> {
    let json = serde_json::to_string(v).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(shared.loads.bind(py).call1((json,))?.unbind())
}

/// The native part of the `stallguard` package, re-exported by its
/// `__init__.py` (so `stallguard.temporal` can live beside it in Python).
#[pymodule]
#[pyo3(name = "_native")]
fn stallguard_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Guard>()?;
    m.add_class::<Task>()?;
    m.add_class::<ArgumentStream>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
