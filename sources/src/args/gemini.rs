//! The Gemini `streamGenerateContent` adapter (R5.9): one streamed
//! `GenerateContentResponse` chunk in, tracker calls out. Parsing and the
//! chunk-to-rule mapping live here; the rules live in
//! [`super::ArgumentTracker`].
//!
//! Gemini sends a function call in one of two ways, and only one of them is
//! argument progress:
//! - **Whole**: a `functionCall` part with a `name` (and its `args` object)
//!   and no `willContinue`. Nothing was generated piecewise, so this is a
//!   tool-call announcement ([`Step::Tracked`]): the block opens and closes
//!   in the same chunk and renews nothing. The runner reports the call
//!   itself through [`crate::tools`] when it runs it.
//! - **Streamed** (`streamFunctionCallArguments`): a part
//!   `{"name": N, "willContinue": true}` announces the call; then parts
//!   carrying `partialArgs` stream it, each entry with a non-empty
//!   `stringValue` or any `numberValue` / `boolValue` / `nullValue` being a
//!   delta; an empty `stringValue` (the end of one string) and a bare
//!   `{"willContinue": true}` (the end of one array element) are boundaries
//!   ([`Step::Tracked`]); an empty `functionCall: {}`, or a `partialArgs` part
//!   without `willContinue`, ends the call.
//!
//! Calls take block indices in order of announcement within the response.
//! A chunk whose `responseId` differs from the current one starts a new
//! response (the old one is ended first); a chunk without one continues the
//! current response or starts one. A `finishReason` ends the response after
//! the chunk's parts. Text and thought parts, usage-only chunks and
//! unknown fields are [`Step::Ignored`]; a candidate other than index 0 is
//! refused ([`Rejection::UnsupportedChoice`]).

use std::borrow::Cow;
use std::hash::{BuildHasher, RandomState};

use serde_json::Value;
use watchdog_core::Recorder;

use super::{
    json_index, json_str, Acc, ArgumentTracker, Freshness, Parse, Rejection, Step, StreamAdapter,
};

/// Feeds Gemini `streamGenerateContent` chunks to an [`ArgumentTracker`].
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::{gemini::GeminiStream, Step, StreamAdapter};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let mut stream = GeminiStream::new(task.recorder());
/// let start = r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"getWeather","willContinue":true}}]}}]}"#;
/// assert_eq!(stream.feed(start), Ok(Step::Tracked));
/// let part = r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.location","stringValue":"Boston","willContinue":true}],"willContinue":true}}]}}]}"#;
/// assert_eq!(stream.feed(part), Ok(Step::Renewed));
/// // A whole call announces, it does not renew.
/// let whole = r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"weather","args":{"location":"Paris"}}}]},"finishReason":"STOP"}]}"#;
/// assert_eq!(stream.feed(whole), Ok(Step::Tracked));
/// ```
#[derive(Debug)]
pub struct GeminiStream {
    tracker: ArgumentTracker,
    hasher: RandomState,
    /// Hash of the current `responseId`, when the chunks carry one.
    current: Option<u64>,
    /// The last sequence number given to a generation.
    seq: i64,
    /// The next block index in the current response.
    next_block: u64,
    /// The block of the call being streamed, if any.
    streaming: Option<u64>,
}

impl StreamAdapter for GeminiStream {
    /// Ends the current response, as when the runner drops a stream midway.
    fn turn_end(&mut self) {
        self.tracker.message_end();
        self.current = None;
        self.next_block = 0;
        self.streaming = None;
    }

    adapter_common!(apply);
}

impl GeminiStream {
    /// Creates an adapter renewing `recorder`'s task, in the default
    /// [`Freshness::Ordered`] mode (a streamed response is ordered).
    pub fn new(recorder: Recorder) -> Self {
        GeminiStream::with_freshness(recorder, Freshness::Ordered)
    }

    /// Creates an adapter with the given freshness mode (R5.2).
    pub fn with_freshness(recorder: Recorder, freshness: Freshness) -> Self {
        GeminiStream {
            tracker: ArgumentTracker::with_freshness(recorder, freshness),
            hasher: RandomState::new(),
            current: None,
            seq: 0,
            next_block: 0,
            streaming: None,
        }
    }

    fn apply(&mut self, chunk: &Value, acc: &mut Acc) -> Result<(), Parse> {
        if !chunk.is_object() {
            return Err(Parse::MALFORMED);
        }
        let candidates = match chunk.get("candidates") {
            None | Some(Value::Null) => {
                acc.push(Ok(Step::Ignored));
                return Ok(());
            }
            Some(c) => c.as_array().ok_or(Parse::MALFORMED)?,
        };
        let response = match chunk.get("responseId") {
            None | Some(Value::Null) => None,
            Some(id) => Some(self.hasher.hash_one(id.as_str().ok_or(Parse::MALFORMED)?)),
        };
        for candidate in candidates {
            match candidate.get("index") {
                None | Some(Value::Null) => {}
                index if json_index(index)? != 0 => {
                    acc.push(Err(self.tracker.reject(Rejection::UnsupportedChoice)));
                    continue;
                }
                _ => {}
            }
            let parts = match candidate.get("content").and_then(|c| c.get("parts")) {
                None | Some(Value::Null) => None,
                Some(p) => Some(p.as_array().ok_or(Parse::MALFORMED)?),
            };
            for part in parts.into_iter().flatten() {
                if let Some(call) = part.get("functionCall") {
                    self.begin(response, acc)?;
                    self.function_call(call, acc)?;
                }
            }
            match candidate.get("finishReason") {
                None | Some(Value::Null) => {}
                Some(Value::String(_)) => {
                    if self.tracker.is_active() {
                        self.turn_end();
                        acc.push(Ok(Step::Tracked));
                    }
                }
                Some(_) => return Err(Parse::MALFORMED),
            }
        }
        acc.push(Ok(Step::Ignored));
        Ok(())
    }

    /// Makes sure a generation is active for `response`.
    fn begin(&mut self, response: Option<u64>, acc: &mut Acc) -> Result<(), Parse> {
        if self.tracker.is_active() {
            match (response, self.current) {
                (Some(id), Some(cur)) if id != cur => {} // a new response
                (Some(id), None) => {
                    self.current = Some(id);
                    return Ok(());
                }
                _ => return Ok(()),
            }
        }
        self.turn_end();
        self.seq = self.seq.saturating_add(1);
        self.tracker.message_start(self.seq).map_err(Parse)?;
        self.current = response;
        acc.push(Ok(Step::Tracked));
        Ok(())
    }

    fn function_call(&mut self, call: &Value, acc: &mut Acc) -> Result<(), Parse> {
        if !call.is_object() {
            return Err(Parse::MALFORMED);
        }
        let cont = match call.get("willContinue") {
            None | Some(Value::Null) => false,
            Some(v) => v.as_bool().ok_or(Parse::MALFORMED)?,
        };
        let name = match call.get("name") {
            None | Some(Value::Null) => None,
            Some(n) => Some(n.as_str().ok_or(Parse::MALFORMED)?),
        };
        let partial = match call.get("partialArgs") {
            None | Some(Value::Null) => None,
            Some(p) => Some(p.as_array().ok_or(Parse::MALFORMED)?),
        };
        if let Some(name) = name {
            // A new call: whatever was streaming has ended.
            self.close_streaming(acc);
            let index = self.next_block;
            self.next_block = self.next_block.saturating_add(1);
            let id = match call.get("id") {
                None | Some(Value::Null) => name,
                Some(id) => id.as_str().ok_or(Parse::MALFORMED)?,
            };
            acc.push(
                self.tracker
                    .block_start(index, id, name)
                    .map(|()| Step::Tracked),
            );
            if cont {
                self.streaming = Some(index);
            } else {
                // Whole: announced, never argument progress.
                acc.push(self.tracker.block_stop(index).map(|()| Step::Tracked));
            }
            return Ok(());
        }
        if let Some(entries) = partial {
            let Some(index) = self.streaming else {
                acc.push(Err(self.tracker.reject(Rejection::BlockNotAnnounced)));
                return Ok(());
            };
            for entry in entries {
                match partial_value(entry)? {
                    Some(text) => {
                        acc.push(self.tracker.delta(index, &text).map(|()| Step::Renewed));
                    }
                    None => acc.push(Ok(Step::Tracked)),
                }
            }
        }
        if !cont {
            // `{}` or a last `partialArgs` part: the call is complete.
            self.close_streaming(acc);
        } else if partial.is_none() {
            acc.push(Ok(Step::Tracked));
        }
        Ok(())
    }

    fn close_streaming(&mut self, acc: &mut Acc) {
        if let Some(index) = self.streaming.take() {
            acc.push(self.tracker.block_stop(index).map(|()| Step::Tracked));
        }
    }
}

/// Reads one `partialArgs` entry: `Some(text)` for a value fragment (the
/// text is only offered to the tracker, never kept), `None` for the empty
/// string that ends a string value.
fn partial_value(entry: &Value) -> Result<Option<Cow<'_, str>>, Parse> {
    json_str(entry.get("jsonPath"))?;
    if let Some(s) = entry.get("stringValue") {
        let s = s.as_str().ok_or(Parse::MALFORMED)?;
        return Ok((!s.is_empty()).then_some(Cow::Borrowed(s)));
    }
    for key in ["numberValue", "boolValue", "nullValue"] {
        if let Some(v) = entry.get(key) {
            return Ok(Some(Cow::Owned(v.to_string())));
        }
    }
    Err(Parse::MALFORMED)
}
