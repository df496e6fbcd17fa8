//! The OpenAI chat-completions streaming adapter (R5.2): one SSE `data:`
//! payload (a `chat.completion.chunk`) in, tracker calls out. Parsing and
//! the chunk-to-rule mapping live here; the rules live in
//! [`super::ArgumentTracker`].
//!
//! Mapping:
//! - A chunk whose response `id` differs from the current one starts a new
//!   message. `created` is in whole seconds and several responses can share
//!   one, so the message timestamp is derived as `created * 65536 + n`,
//!   where `n` counts the new responses already seen within that same
//!   second: strictly rising for a live stream, lower for a replayed older
//!   response, which is refused ([`Rejection::StaleTimestamp`]) without
//!   disturbing the current message. Only a 64-bit hash of the id is kept.
//! - A new id ends the previous message first (the stream moved on), so a
//!   lost `finish_reason` does not wedge the tracker.
//! - In `choices[0].delta.tool_calls[]`, an entry carrying an `id` announces
//!   block `index` (with `function.name`); `function.arguments`, when
//!   present and non-empty on an announcing entry, or present on any later
//!   entry, is offered as a delta. Chat completions has no block stop: blocks
//!   close with the message.
//! - Entries without `index` (Gemini's OpenAI-compatible endpoint, Ollama,
//!   R5.9) are one call at a time: an entry with an `id` announces the next
//!   free block, and an entry without one continues the last announced
//!   block. A whole call in one entry (id, name and the complete arguments)
//!   is an announcement plus one delta.
//! - A non-null `finish_reason` (`tool_calls`, `stop`, `length`, ...) ends
//!   the message after the chunk's deltas; the `[DONE]` terminator ends it
//!   too.
//! - Text content, roles, refusals, usage-only chunks (`choices: []`) and
//!   the legacy `function_call` delta are not tracked ([`Step::Ignored`]).
//!   Choices other than index 0 (`n > 1`) are refused
//!   ([`Rejection::UnsupportedChoice`]): their blocks would share indices.

use std::hash::{BuildHasher, RandomState};

use serde_json::Value;
use watchdog_core::Recorder;

use super::{
    feed_json, json_index, json_str, Acc, ArgumentTracker, Parse, Rejection, Step, StreamAdapter,
};

/// Responses sharing one `created` second that can still be told apart.
const PER_SECOND: i64 = 1 << 16;

/// Feeds OpenAI chat-completions chunks to an [`ArgumentTracker`].
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::{openai::OpenAiStream, Step, StreamAdapter};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let mut stream = OpenAiStream::new(task.recorder());
/// let start = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]},"finish_reason":null}]}"#;
/// assert_eq!(stream.feed(start), Ok(Step::Tracked));
/// let args = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\""}}]},"finish_reason":null}]}"#;
/// assert_eq!(stream.feed(args), Ok(Step::Renewed));
/// assert_eq!(stream.feed("[DONE]"), Ok(Step::Tracked));
/// ```
#[derive(Debug)]
pub struct OpenAiStream {
    tracker: ArgumentTracker,
    hasher: RandomState,
    /// Hash of the current response id.
    current: Option<u64>,
    /// The last accepted message timestamp and its `created` second.
    last: Option<(i64, i64)>,
    /// The next free block of the current message, for entries without
    /// `index`.
    next_block: u64,
    /// The last block announced in the current message, with a hash of its
    /// call id (some servers repeat the id on every entry of one call).
    last_block: Option<(u64, u64)>,
}

impl StreamAdapter for OpenAiStream {
    /// Feeds one SSE `data:` payload as raw bytes: a chunk's JSON, or
    /// `[DONE]`, which ends the message.
    fn feed_bytes(&mut self, data: &[u8]) -> Result<Step, Rejection> {
        if data.trim_ascii() == b"[DONE]" {
            return Ok(self.end());
        }
        feed_json(self, data)
    }

    fn turn_end(&mut self) {
        self.tracker.message_end();
    }

    adapter_common!(apply);
}

impl OpenAiStream {
    /// Creates an adapter renewing `recorder`'s task.
    pub fn new(recorder: Recorder) -> Self {
        OpenAiStream {
            tracker: ArgumentTracker::new(recorder),
            hasher: RandomState::new(),
            current: None,
            last: None,
            next_block: 0,
            last_block: None,
        }
    }

    fn end(&mut self) -> Step {
        let was = self.tracker.is_active();
        self.tracker.message_end();
        if was {
            Step::Tracked
        } else {
            Step::Ignored
        }
    }

    fn apply(&mut self, chunk: &Value, acc: &mut Acc) -> Result<(), Parse> {
        let id = json_str(chunk.get("id"))?;
        let created = timestamp(chunk.get("created"))?;
        let choices = chunk
            .get("choices")
            .and_then(Value::as_array)
            .ok_or(Parse::MALFORMED)?;
        let id_hash = self.hasher.hash_one(id);
        if self.current != Some(id_hash) {
            self.new_message(id_hash, created)?;
            acc.push(Ok(Step::Tracked));
        }
        for choice in choices {
            if json_index(choice.get("index"))? != 0 {
                acc.push(Err(self.tracker.reject(Rejection::UnsupportedChoice)));
                continue;
            }
            if let Some(calls) = choice.get("delta").and_then(|d| d.get("tool_calls")) {
                let calls = calls.as_array().ok_or(Parse::MALFORMED)?;
                for call in calls {
                    self.tool_call(call, acc)?;
                }
            }
            match choice.get("finish_reason") {
                None | Some(Value::Null) => {}
                Some(Value::String(_)) => acc.push(Ok(self.end())),
                Some(_) => return Err(Parse::MALFORMED),
            }
        }
        acc.push(Ok(Step::Ignored));
        Ok(())
    }

    fn new_message(&mut self, id_hash: u64, created: i64) -> Result<(), Parse> {
        let n = match self.last {
            Some((ts, sec)) if sec == created => ts % PER_SECOND + 1,
            _ => 0,
        };
        if n >= PER_SECOND {
            return Err(Parse(Rejection::BadTimestamp));
        }
        let ts = created * PER_SECOND + n;
        if self.last.is_some_and(|(last, _)| ts <= last) {
            // A replayed older response: refuse it, keep the current one.
            return Err(Parse(Rejection::StaleTimestamp));
        }
        self.tracker.message_end();
        self.tracker.message_start(ts).map_err(Parse)?;
        self.next_block = 0;
        self.last_block = None;
        self.current = Some(id_hash);
        self.last = Some((ts, created));
        Ok(())
    }

    fn tool_call(&mut self, call: &Value, acc: &mut Acc) -> Result<(), Parse> {
        // An empty id (Qwen repeats `"id": ""` on every continuation entry)
        // is no id: the entry continues a call, it does not announce one.
        let id_hash = match call.get("id") {
            None | Some(Value::Null) => None,
            Some(id) => match id.as_str().ok_or(Parse::MALFORMED)? {
                "" => None,
                id => Some(self.hasher.hash_one(id)),
            },
        };
        let index = match call.get("index") {
            None | Some(Value::Null) => match (id_hash, self.last_block) {
                // The same call again: a continuation, not a new block.
                (Some(id), Some((i, last))) if id == last => {
                    return self.arguments(i, call, acc);
                }
                (Some(_), _) => self.next_block,
                (None, Some((i, _))) => i,
                (None, None) => {
                    acc.push(Err(self.tracker.reject(Rejection::BlockNotAnnounced)));
                    return Ok(());
                }
            },
            index => json_index(index)?,
        };
        let function = call.get("function");
        let arguments = match function.and_then(|f| f.get("arguments")) {
            None | Some(Value::Null) => None,
            Some(a) => Some(a.as_str().ok_or(Parse::MALFORMED)?),
        };
        match call
            .get("id")
            .and_then(Value::as_str)
            .filter(|_| id_hash.is_some())
        {
            None => {
                let text = arguments.ok_or(Parse::MALFORMED)?;
                acc.push(self.tracker.delta(index, text).map(|()| Step::Renewed));
            }
            Some(id) => {
                let name = match function.and_then(|f| f.get("name")) {
                    None | Some(Value::Null) => "",
                    Some(n) => n.as_str().ok_or(Parse::MALFORMED)?,
                };
                let started = self.tracker.block_start(index, id, name);
                if let (Ok(()), Some(h)) = (&started, id_hash) {
                    self.last_block = Some((index, h));
                    self.next_block = self.next_block.max(index.saturating_add(1));
                }
                acc.push(started.map(|()| Step::Tracked));
                // The announcing entry usually carries "" (not a delta);
                // some servers put the first text there.
                if let Some(text) = arguments.filter(|t| !t.is_empty()) {
                    acc.push(self.tracker.delta(index, text).map(|()| Step::Renewed));
                }
            }
        }
        Ok(())
    }
}

impl OpenAiStream {
    /// Offers an entry's `function.arguments`, if any, as a delta of `index`.
    fn arguments(&mut self, index: u64, call: &Value, acc: &mut Acc) -> Result<(), Parse> {
        match call.get("function").and_then(|f| f.get("arguments")) {
            None | Some(Value::Null) => acc.push(Ok(Step::Ignored)),
            Some(a) => {
                let text = a.as_str().ok_or(Parse::MALFORMED)?;
                acc.push(self.tracker.delta(index, text).map(|()| Step::Renewed));
            }
        }
        Ok(())
    }
}

/// Reads `created`: seconds since the epoch, a non-negative integer small
/// enough to leave room for the per-second counter.
fn timestamp(v: Option<&Value>) -> Result<i64, Parse> {
    let n = match v {
        Some(Value::Number(n)) => n,
        _ => return Err(Parse::MALFORMED),
    };
    match (n.as_i64(), n.as_u64()) {
        (Some(s), _) if s < 0 => Err(Parse(Rejection::NegativeTimestamp)),
        (Some(s), _) if s < i64::MAX / PER_SECOND => Ok(s),
        _ => Err(Parse(Rejection::BadTimestamp)),
    }
}
