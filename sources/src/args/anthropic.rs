//! The Anthropic Messages streaming adapter (R5.2): one SSE `data:` payload
//! in, tracker calls out. Parsing and the event-to-rule mapping live here;
//! the rules themselves live in [`super::ArgumentTracker`].
//!
//! Mapping:
//! - `message_start` starts a generation. Anthropic events carry no
//!   timestamp, so the adapter numbers each `message_start` with a strictly
//!   rising sequence number and offers that as the message timestamp; a
//!   message start while a message is still active is refused
//!   ([`Rejection::GenerationActive`]) until `message_stop`, an `error`
//!   event, or [`AnthropicStream::turn_end`].
//! - `content_block_start` of a `tool_use` (also `server_tool_use` and
//!   `mcp_tool_use`) block announces it; text and thinking blocks are
//!   [`Step::Ignored`].
//! - `content_block_delta` with an `input_json_delta` offers its
//!   `partial_json`; text, thinking and signature deltas are not argument
//!   progress and are [`Step::Ignored`] (output of the model is the runner's
//!   to report as `output` if it wants to).
//! - `content_block_stop` closes an announced block; on a block that was
//!   never a tool call it is [`Step::Ignored`].
//! - `message_stop` and `error` end the generation; `ping`,
//!   `message_delta` and unknown event types (the API may add some) are
//!   [`Step::Ignored`].

use serde_json::Value;
use watchdog_core::Recorder;

use super::{json_index, json_str, ArgumentTracker, Parse, Rejection, Step, StreamAdapter};

/// Feeds Anthropic Messages stream events to an [`ArgumentTracker`].
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::{anthropic::AnthropicStream, Step, StreamAdapter};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let mut stream = AnthropicStream::new(task.recorder());
/// for data in [
///     r#"{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[]}}"#,
///     r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01","name":"bash","input":{}}}"#,
/// ] {
///     assert_eq!(stream.feed(data), Ok(Step::Tracked));
/// }
/// let delta = r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\": \"ls"}}"#;
/// assert_eq!(stream.feed(delta), Ok(Step::Renewed));
/// assert_eq!(stream.feed(r#"{"type":"ping"}"#), Ok(Step::Ignored));
/// ```
#[derive(Debug)]
pub struct AnthropicStream {
    tracker: ArgumentTracker,
    /// The last sequence number given to a `message_start`.
    seq: i64,
}

impl StreamAdapter for AnthropicStream {
    fn turn_end(&mut self) {
        self.tracker.message_end();
    }

    adapter_common!(dispatch);
}

impl AnthropicStream {
    /// Creates an adapter renewing `recorder`'s task.
    pub fn new(recorder: Recorder) -> Self {
        AnthropicStream {
            tracker: ArgumentTracker::new(recorder),
            seq: 0,
        }
    }

    /// Parses `event` and applies it. Shape errors come back as `Err(Parse)`
    /// (counted by the caller); rule results as `Ok(result)` (already
    /// counted by the tracker).
    fn dispatch(&mut self, event: &Value) -> Result<Result<Step, Rejection>, Parse> {
        let ty = json_str(event.get("type"))?;
        let t = &mut self.tracker;
        Ok(match ty {
            "message_start" => {
                json_str(event.get("message").and_then(|m| m.get("id")))?;
                self.seq = self.seq.saturating_add(1);
                t.message_start(self.seq).map(|()| Step::Tracked)
            }
            "content_block_start" => {
                let index = json_index(event.get("index"))?;
                let block = event.get("content_block").ok_or(Parse::MALFORMED)?;
                match json_str(block.get("type"))? {
                    "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                        let id = json_str(block.get("id"))?;
                        let name = json_str(block.get("name"))?;
                        t.block_start(index, id, name).map(|()| Step::Tracked)
                    }
                    _ => Ok(Step::Ignored),
                }
            }
            "content_block_delta" => {
                let index = json_index(event.get("index"))?;
                let delta = event.get("delta").ok_or(Parse::MALFORMED)?;
                match json_str(delta.get("type"))? {
                    "input_json_delta" => {
                        let text = json_str(delta.get("partial_json"))?;
                        t.delta(index, text).map(|()| Step::Renewed)
                    }
                    _ => Ok(Step::Ignored),
                }
            }
            "content_block_stop" => {
                let index = json_index(event.get("index"))?;
                if t.is_announced(index) {
                    t.block_stop(index).map(|()| Step::Tracked)
                } else {
                    Ok(Step::Ignored)
                }
            }
            "message_stop" | "error" => {
                let was = t.is_active();
                t.message_end();
                Ok(if was { Step::Tracked } else { Step::Ignored })
            }
            _ => Ok(Step::Ignored),
        })
    }
}
