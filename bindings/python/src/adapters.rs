//! The stream adapters (R5.2, R5.9) as one Python class: `task.argument_stream(format)`
//! (and `task.anthropic_stream()` and its siblings) hand one out; each feeds
//! the task's recorder through the engine's `StreamAdapter` trait, so every
//! format the engine has is here, Gemini included.

use std::collections::HashMap;

use parking_lot::Mutex;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use stallwarden_sources::args::{Step, StreamAdapter, StreamFormat};
use stallwarden_sources::Refusal;
use watchdog_core::Recorder;

use crate::options::repr;

/// Feeds one provider's stream events to the task (R5.2, R5.9).
#[pyclass(frozen, module = "stallwarden", name = "ArgumentStream")]
pub(crate) struct ArgumentStream {
    format: StreamFormat,
    inner: Mutex<Box<dyn StreamAdapter>>,
}

impl ArgumentStream {
    /// An adapter of `format` renewing `recorder`'s task.
    pub(crate) fn new(format: StreamFormat, recorder: Recorder) -> Self {
        ArgumentStream {
            format,
            inner: Mutex::new(format.adapter(recorder)),
        }
    }

    /// Reads a format name, as `argument_stream` takes it.
    pub(crate) fn format(name: &str) -> PyResult<StreamFormat> {
        name.parse()
            .map_err(|e| PyValueError::new_err(format!("format: {e}")))
    }
}

#[pymethods]
impl ArgumentStream {
    /// Feeds one event (an SSE `data:` payload as str, bytes, or an
    /// already-parsed dict); returns "renewed", "tracked" or "ignored", and
    /// raises ValueError with the reason of a refusal.
    fn feed(&self, data: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        // to_cow, not to_str: the abi3-py39 wheel (R11.2) cannot borrow a
        // str's UTF-8 before 3.10's limited API.
        let step = if let Ok(s) = data.cast::<PyString>() {
            let text = s.to_cow()?;
            self.inner.lock().feed(&text)
        } else if let Ok(b) = data.extract::<&[u8]>() {
            self.inner.lock().feed_bytes(b)
        } else {
            let json = PyModule::import(data.py(), "json")?
                .call_method1("dumps", (data,))
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "feed: expected str, bytes or a JSON-serializable dict, got {}",
                        repr(data)
                    ))
                })?;
            let text = json.extract::<String>()?;
            self.inner.lock().feed(&text)
        };
        match step {
            Ok(Step::Renewed) => Ok("renewed"),
            Ok(Step::Tracked) => Ok("tracked"),
            Ok(_) => Ok("ignored"),
            Err(reason) => Err(PyValueError::new_err(format!(
                "{reason} ({})",
                reason.key()
            ))),
        }
    }

    /// Ends the current message, as when a stream is dropped midway.
    fn turn_end(&self) {
        self.inner.lock().turn_end();
    }

    /// The wire format: "anthropic", "openai", "responses" or "gemini".
    #[getter(format)]
    fn format_name(&self) -> &'static str {
        self.format.name()
    }

    /// How many deltas renewed the task so far.
    #[getter]
    fn accepted(&self) -> u64 {
        self.inner.lock().tracker().accepted()
    }

    /// Refusals so far, by reason.
    #[getter]
    fn rejections(&self) -> HashMap<&'static str, u64> {
        self.inner
            .lock()
            .tracker()
            .rejections()
            .iter()
            .map(|(r, n)| (r.key(), n))
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("ArgumentStream(format={:?})", self.format.name())
    }
}
