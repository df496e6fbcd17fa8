//! The stream adapters (R5.2, R5.9) as one JS class: `task.argumentStream(format)`
//! (and `anthropicStream()` and its siblings in `index.js`) hand one out;
//! each feeds the task's recorder through the engine's `StreamAdapter`
//! trait, so every format the engine has is here through one wrapper.

use std::collections::HashMap;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use stallwarden_sources::args::{Step, StreamAdapter, StreamFormat};
use stallwarden_sources::Refusal;
use watchdog_core::Recorder;

/// Feeds one provider's stream events to the engine's argument tracker.
///
/// # Examples
///
/// ```js
/// const s = t.argumentStream('gemini');
/// s.feed(data); // 'renewed' | 'tracked' | 'ignored', or throws the reason
/// ```
#[napi]
pub struct ArgumentStream {
    format: StreamFormat,
    inner: Box<dyn StreamAdapter>,
}

impl ArgumentStream {
    /// An adapter of `format` renewing `recorder`'s task.
    pub(crate) fn new(format: StreamFormat, recorder: Recorder) -> Self {
        ArgumentStream {
            format,
            inner: format.adapter(recorder),
        }
    }
}

#[napi]
impl ArgumentStream {
    /// Feeds one SSE `data:` payload: `'renewed'`, `'tracked'` or
    /// `'ignored'`; a refused event throws with the reason.
    #[napi]
    pub fn feed(&mut self, data: String) -> Result<&'static str> {
        match self.inner.feed(&data) {
            Ok(Step::Renewed) => Ok("renewed"),
            Ok(Step::Tracked) => Ok("tracked"),
            Ok(_) => Ok("ignored"),
            Err(reason) => Err(Error::new(Status::InvalidArg, reason.to_string())),
        }
    }

    /// Ends the turn: the next message starts a new generation.
    #[napi]
    pub fn turn_end(&mut self) {
        self.inner.turn_end();
    }

    /// The wire format: `'anthropic'`, `'openai'`, `'responses'` or `'gemini'`.
    #[napi(getter)]
    pub fn format(&self) -> &'static str {
        self.format.name()
    }

    /// How many deltas renewed the task so far.
    #[napi(getter)]
    pub fn accepted(&self) -> f64 {
        self.inner.tracker().accepted() as f64
    }

    /// Refusals so far, by reason.
    #[napi(getter)]
    pub fn rejections(&self) -> HashMap<String, f64> {
        self.inner
            .tracker()
            .rejections()
            .iter()
            .map(|(r, n)| (r.key().to_owned(), n as f64))
            .collect()
    }
}
