//! `stallwarden.Task`: one watched task, the recording calls its work makes,
//! its controls (pause, resume, trigger, cancel) and its settling.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use stallwarden_sources::args::StreamFormat;
use stallwarden_sources::procs::ProcessSampler;
use watchdog_core::repeat::LineJudge;
use watchdog_core::{CallOutcome, Outcome, OutputCounter, TaskState};

use crate::adapters::ArgumentStream;
use crate::options::{duration_or_off, guard_error, to_py};
use crate::sink::{CancelState, Shared};

/// One watched task: record what its work does, then finish it.
#[pyclass(frozen, module = "stallwarden")]
pub(crate) struct Task {
    pub(crate) handle: Arc<watchdog_core::TaskHandle>,
    pub(crate) cancel: Arc<CancelState>,
    pub(crate) shared: Arc<Shared>,
    /// Samples the attached process's descendants (R5.5), for stall events.
    pub(crate) sampler: Mutex<Option<ProcessSampler>>,
    /// The task's output as `write` judges it (R5.12), made on first use.
    pub(crate) lines: Mutex<Option<(LineJudge, OutputCounter)>>,
}

/// A call's input or result as the engine judges it (R5.12): `str` and
/// `bytes` as they are, anything else as JSON with sorted keys.
fn as_text(v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    let json = v.py().import("json")?;
    let kwargs = PyDict::new(v.py());
    kwargs.set_item("sort_keys", true)?;
    let text = json.call_method("dumps", (v,), Some(&kwargs))?;
    Ok(text.extract::<String>()?.into_bytes())
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

    /// Output of the work, as `stallwarden run` reads it: every byte
    /// counted, each ended line judged; lines that only repeat recent ones
    /// renew nothing (R5.1, R5.12).
    fn write(&self, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = if let Ok(s) = data.cast::<PyString>() {
            s.to_cow()?.as_bytes().to_vec()
        } else if let Ok(b) = data.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else {
            return Err(PyValueError::new_err(format!(
                "data: expected str or bytes, got {}",
                data.get_type().name()?
            )));
        };
        if bytes.is_empty() {
            return Ok(());
        }
        let mut lines = self.lines.lock();
        let (judge, counter) = lines.get_or_insert_with(|| {
            let rec = self.handle.recorder();
            (rec.repeats().lines(), rec.output_counter())
        });
        let v = judge.feed(&bytes);
        counter.record_as(bytes.len() as u64, v.newlines, v.kind);
        Ok(())
    }

    /// A tool call started (R5.3): the execution budget applies while it runs.
    /// With its `input` (str, bytes, or any value as JSON), a start that
    /// repeats a call in the task's window renews nothing (R5.12).
    #[pyo3(signature = (call_id, name, input = None))]
    fn tool_started(
        &self,
        call_id: &str,
        name: &str,
        input: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        match input {
            Some(input) => self
                .handle
                .tool_started_with(call_id, name, &as_text(input)?),
            None => self.handle.tool_started(call_id, name),
        }
        .map_err(guard_error)
    }

    /// A tool call finished with "success", "failure" (or "error") or
    /// "cancelled"; with its `result` (or a digest of it), a call whose
    /// name, input and result repeat one in the window renews nothing
    /// (R5.12).
    #[pyo3(signature = (call_id, outcome, result = None))]
    fn tool_finished(
        &self,
        call_id: &str,
        outcome: &str,
        result: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
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
        match result {
            Some(result) => self
                .handle
                .tool_finished_with(call_id, outcome, &as_text(result)?),
            None => self.handle.tool_finished(call_id, outcome),
        }
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
            Some(v) => duration_or_off("sample_every", v)?,
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
