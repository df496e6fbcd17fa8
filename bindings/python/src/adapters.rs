//! The stream adapters (R5.2, R5.9) as Python classes: `task.anthropic_stream()`
//! and its siblings hand one out; each feeds the task's recorder.

use std::collections::HashMap;

use parking_lot::Mutex;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use stallguard_sources::args::{
    anthropic::AnthropicStream, openai::OpenAiStream, responses::ResponsesStream, Step,
};

use crate::repr;

macro_rules! adapter {
    ($(#[$doc:meta])* $py:ident, $name:literal, $inner:ty) => {
        $(#[$doc])*
        #[pyclass(frozen, module = "stallguard", name = $name)]
        pub(crate) struct $py(pub(crate) Mutex<$inner>);

        #[pymethods]
        impl $py {
            /// Feeds one event (an SSE `data:` payload as str, bytes, or an
            /// already-parsed dict); returns "renewed", "tracked" or
            /// "ignored", and raises ValueError with the reason of a refusal.
            fn feed(&self, data: &Bound<'_, PyAny>) -> PyResult<&'static str> {
                let step = if let Ok(s) = data.cast::<PyString>() {
                    self.0.lock().feed(s.to_str()?)
                } else if let Ok(b) = data.extract::<&[u8]>() {
                    self.0.lock().feed_bytes(b)
                } else {
                    let json = PyModule::import(data.py(), "json")?
                        .call_method1("dumps", (data,))
                        .map_err(|_| {
                            PyTypeError::new_err(format!(
                                "feed: expected str, bytes or a JSON-serializable dict, got {}",
                                repr(data)
                            ))
                        })?;
                    self.0.lock().feed(json.extract::<&str>()?)
                };
                match step {
                    Ok(Step::Renewed) => Ok("renewed"),
                    Ok(Step::Tracked) => Ok("tracked"),
                    Ok(_) => Ok("ignored"),
                    Err(reason) => Err(PyValueError::new_err(format!(
                        "{reason} ({})",
                        reason.as_str()
                    ))),
                }
            }

            /// Ends the current message, as when a stream is dropped midway.
            fn turn_end(&self) {
                self.0.lock().turn_end();
            }

            /// How many deltas renewed the task so far.
            #[getter]
            fn accepted(&self) -> u64 {
                self.0.lock().tracker().accepted()
            }

            /// Refusals so far, by reason.
            #[getter]
            fn rejections(&self) -> HashMap<&'static str, u64> {
                self.0
                    .lock()
                    .tracker()
                    .rejections()
                    .iter()
                    .map(|(r, n)| (r.as_str(), n))
                    .collect()
            }
        }
    };
}

adapter!(
    /// Feeds Anthropic Messages stream events to the task.
    AnthropicAdapter, "AnthropicStream", AnthropicStream
);
adapter!(
    /// Feeds OpenAI chat-completions chunks to the task.
    OpenAiAdapter, "OpenAiStream", OpenAiStream
);
adapter!(
    /// Feeds OpenAI Responses API stream events to the task.
    ResponsesAdapter, "ResponsesStream", ResponsesStream
);
