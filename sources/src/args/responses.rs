//! The OpenAI Responses API streaming adapter (R5.9): one SSE `data:`
//! payload (a typed `response.*` event) in, tracker calls out. Parsing and
//! the event-to-rule mapping live here; the rules live in
//! [`super::ArgumentTracker`].
//!
//! Mapping:
//! - `response.created` starts a generation for the response's `id`. A
//!   `response.created` for another response while one is active ends the
//!   old one first (its terminal event was lost, the stream moved on); the
//!   same response created twice is refused ([`Rejection::GenerationActive`]).
//!   Only a 64-bit hash of the id is kept.
//! - `response.output_item.added` of a `function_call` (or a
//!   `custom_tool_call`) item announces block `output_index` with the item's
//!   `call_id` and `name`; other items (messages, reasoning, hosted tools)
//!   are [`Step::Ignored`].
//! - `response.function_call_arguments.delta` (and
//!   `response.custom_tool_call_input.delta`) offers `delta` on block
//!   `output_index`.
//! - `response.function_call_arguments.done` (and `.custom_tool_call_input.done`)
//!   closes the block; `response.output_item.done` closes it too when it is
//!   still open, and is [`Step::Ignored`] otherwise.
//! - `response.completed`, `response.failed`, `response.incomplete` and
//!   `error` end the generation.
//! - Every other event type (text deltas, reasoning, hosted tool progress,
//!   types the API adds later) is [`Step::Ignored`], never an error.

use std::hash::{BuildHasher, RandomState};

use serde_json::Value;
use watchdog_core::Recorder;

use super::{
    json_index, json_str, ArgumentTracker, Freshness, Parse, Rejection, Step, StreamAdapter,
};

/// Feeds OpenAI Responses API stream events to an [`ArgumentTracker`].
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::{responses::ResponsesStream, Step, StreamAdapter};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let mut stream = ResponsesStream::new(task.recorder());
/// for event in [
///     r#"{"type":"response.created","response":{"id":"resp_1","status":"in_progress"},"sequence_number":0}"#,
///     r#"{"type":"response.output_item.added","item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_weather"},"output_index":0,"sequence_number":1}"#,
/// ] {
///     assert_eq!(stream.feed(event), Ok(Step::Tracked));
/// }
/// let delta = r#"{"type":"response.function_call_arguments.delta","delta":"{\"city\"","item_id":"fc_1","output_index":0,"sequence_number":2}"#;
/// assert_eq!(stream.feed(delta), Ok(Step::Renewed));
/// assert_eq!(stream.feed(r#"{"type":"response.output_text.delta","delta":"hi"}"#), Ok(Step::Ignored));
/// ```
#[derive(Debug)]
pub struct ResponsesStream {
    tracker: ArgumentTracker,
    hasher: RandomState,
    /// Hash of the current response id.
    current: Option<u64>,
    /// The last sequence number given to a generation.
    seq: i64,
}

impl StreamAdapter for ResponsesStream {
    /// Ends the current response, as when the runner drops a stream midway.
    fn turn_end(&mut self) {
        self.tracker.message_end();
        self.current = None;
    }

    adapter_common!(dispatch);
}

impl ResponsesStream {
    /// Creates an adapter renewing `recorder`'s task, in the default
    /// [`Freshness::Ordered`] mode (an SSE stream is ordered).
    pub fn new(recorder: Recorder) -> Self {
        ResponsesStream::with_freshness(recorder, Freshness::Ordered)
    }

    /// Creates an adapter with the given freshness mode (R5.2).
    pub fn with_freshness(recorder: Recorder, freshness: Freshness) -> Self {
        ResponsesStream {
            tracker: ArgumentTracker::with_freshness(recorder, freshness),
            hasher: RandomState::new(),
            current: None,
            seq: 0,
        }
    }

    fn end(&mut self) -> Step {
        let was = self.tracker.is_active();
        self.turn_end();
        if was {
            Step::Tracked
        } else {
            Step::Ignored
        }
    }

    fn dispatch(&mut self, event: &Value) -> Result<Result<Step, Rejection>, Parse> {
        let ty = json_str(event.get("type"))?;
        Ok(match ty {
            "response.created" => {
                let id = json_str(event.get("response").and_then(|r| r.get("id")))?;
                let id = self.hasher.hash_one(id);
                if self.current == Some(id) && self.tracker.is_active() {
                    return Err(Parse(Rejection::GenerationActive));
                }
                self.tracker.message_end();
                self.seq = self.seq.saturating_add(1);
                let started = self.tracker.message_start(self.seq);
                if started.is_ok() {
                    self.current = Some(id);
                }
                started.map(|()| Step::Tracked)
            }
            "response.output_item.added" => {
                let index = json_index(event.get("output_index"))?;
                let item = event.get("item").ok_or(Parse::MALFORMED)?;
                match json_str(item.get("type"))? {
                    "function_call" | "custom_tool_call" => {
                        let id = json_str(item.get("call_id"))?;
                        let name = json_str(item.get("name"))?;
                        self.tracker
                            .block_start(index, id, name)
                            .map(|()| Step::Tracked)
                    }
                    _ => Ok(Step::Ignored),
                }
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                let index = json_index(event.get("output_index"))?;
                let text = json_str(event.get("delta"))?;
                self.tracker.delta(index, text).map(|()| Step::Renewed)
            }
            "response.function_call_arguments.done" | "response.custom_tool_call_input.done" => {
                let index = json_index(event.get("output_index"))?;
                self.tracker.block_stop(index).map(|()| Step::Tracked)
            }
            "response.output_item.done" => {
                let index = json_index(event.get("output_index"))?;
                if self.tracker.is_open(index) {
                    self.tracker.block_stop(index).map(|()| Step::Tracked)
                } else {
                    Ok(Step::Ignored)
                }
            }
            "response.completed" | "response.failed" | "response.incomplete" | "error" => {
                Ok(self.end())
            }
            _ => Ok(Step::Ignored),
        })
    }
}
