//! The stallwarden engine as a Python module (R11.1): `import stallwarden`.
//!
//! A thin shell over `watchdog-core` and the stream adapters of
//! `stallwarden-sources`: every rule is the engine's, nothing is
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

// R10.7: no function outside tests passes 150 lines (clippy.toml); on only
// where cfg(test) is off, so tests are exempt.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pyo3::exceptions::{PyRuntimeError, PyTimeoutError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use stallwarden_sinks::process::ProcessSink;
use watchdog_core::ManualClock;

mod adapters;
mod options;
mod sink;
mod task;

use adapters::ArgumentStream;
use options::{duration_or_off, guard_error, to_py};
use sink::{PySink, Shared};
use task::Task;

/// How long `Guard.flush` waits by default (R10.5: bounded).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// A watchdog for many tasks; see the module documentation in `stallwarden.pyi`.
#[pyclass(frozen, module = "stallwarden")]
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
            c"stallwarden_helpers.py",
            c"stallwarden_helpers",
        )?;
        let shared = Arc::new(Shared {
            on_event,
            loads: PyModule::import(py, "json")?.getattr("loads")?.unbind(),
            resolve: helpers.getattr("resolve")?.unbind(),
            tasks: Mutex::new(std::collections::HashMap::new()),
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
            .map_err(|e| PyRuntimeError::new_err(format!("stallwarden: {e}")))?;
        Ok(Guard {
            guard,
            shared,
            manual,
        })
    }

    /// Starts watching a task named `name` with the given options: the
    /// keys of a TOML profile in snake_case, read by the core's one entry
    /// (R10.6); `None` keeps a key's default.
    #[pyo3(signature = (name, **options))]
    fn start(&self, name: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<Task> {
        let p = options::profile(options)?;
        let handle = self.guard.start(name, p).map_err(guard_error)?;
        let cancel = self.shared.cancel_state(handle.id());
        Ok(Task {
            handle: Arc::new(handle),
            cancel,
            shared: Arc::clone(&self.shared),
            sampler: Mutex::new(None),
            lines: Mutex::new(None),
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
        let by = duration_or_off("ms", ms)?.unwrap_or(Duration::ZERO);
        py.detach(|| self.guard.advance(by));
        Ok(())
    }

    /// Returns once every event emitted so far reached `on_event`; raises
    /// TimeoutError if that takes longer than `timeout` (default 5 s).
    #[pyo3(signature = (timeout = None))]
    fn flush(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let timeout = match timeout {
            None => FLUSH_TIMEOUT,
            Some(v) => duration_or_off("timeout", v)?.ok_or_else(|| {
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

/// Returns the live (not zombie) processes of process group `pgid`, read
/// through the engine's one owner of `/proc` (R10.7): `stallwarden.temporal`
/// reaps a cancelled tool once its group is gone. An `OSError` when the
/// table cannot be read.
#[pyfunction]
fn _group_members(pgid: u32) -> PyResult<Vec<u32>> {
    Ok(stallwarden_sinks::process::group_members(pgid)?)
}

/// The native part of the `stallwarden` package, re-exported by its
/// `__init__.py` (so `stallwarden.temporal` can live beside it in Python).
#[pymodule]
#[pyo3(name = "_native")]
fn stallwarden_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Guard>()?;
    m.add_class::<Task>()?;
    m.add_class::<ArgumentStream>()?;
    m.add_function(wrap_pyfunction!(options::describe_profile, m)?)?;
    m.add_function(wrap_pyfunction!(_group_members, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
