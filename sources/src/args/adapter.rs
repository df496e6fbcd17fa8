//! The stream-adapter trait the four wire formats implement (R5.2, R5.9),
//! and the format names the bindings choose one by.
//!
//! An adapter turns one provider's stream events into
//! [`ArgumentTracker`] calls. Only [`StreamAdapter::feed_value`] and
//! [`StreamAdapter::turn_end`] differ by format; parsing bytes and text is
//! shared here, so a runner, the agent-stream reader and each binding drive
//! every format through one interface (a `Box<dyn StreamAdapter>` from
//! [`StreamFormat::adapter`]).

/// The parts of a [`StreamAdapter`] impl every adapter shares: the tracker
/// accessors (its `tracker` field) and `feed_value` through the adapter's
/// own parser, `dispatch` (one event, one result) or `apply` (a chunk of
/// parts folded by `Acc`).
macro_rules! adapter_common {
    (dispatch) => {
        fn feed_value(&mut self, event: &Value) -> Result<Step, Rejection> {
            let r = self.dispatch(event);
            super::settle(&mut self.tracker, r)
        }
        adapter_common!();
    };
    (apply) => {
        fn feed_value(&mut self, chunk: &Value) -> Result<Step, Rejection> {
            let mut acc = super::Acc::default();
            let r = self.apply(chunk, &mut acc);
            acc.settle(&mut self.tracker, r)
        }
        adapter_common!();
    };
    () => {
        fn tracker(&self) -> &ArgumentTracker {
            &self.tracker
        }

        fn tracker_mut(&mut self) -> &mut ArgumentTracker {
            &mut self.tracker
        }
    };
}

use std::fmt;
use std::str::FromStr;

use serde_json::Value;
use watchdog_core::Recorder;

use super::anthropic::AnthropicStream;
use super::gemini::GeminiStream;
use super::openai::OpenAiStream;
use super::responses::ResponsesStream;
use super::{ArgumentTracker, Parse, Rejection, Step};

/// Feeds one provider's streamed tool-call events to an [`ArgumentTracker`]
/// (R5.2, R5.9).
///
/// Every refusal comes back as a [`Rejection`] and is counted by the
/// tracker (and on the task); nothing panics on input.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::{StreamAdapter, StreamFormat, Step};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let mut stream = StreamFormat::Anthropic.adapter(task.recorder());
/// stream.feed(r#"{"type":"message_start","message":{"id":"msg_01"}}"#).unwrap();
/// stream.feed(r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01","name":"bash","input":{}}}"#).unwrap();
/// let delta = r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\""}}"#;
/// assert_eq!(stream.feed(delta), Ok(Step::Renewed));
/// assert_eq!(stream.tracker().accepted(), 1);
/// ```
pub trait StreamAdapter: Send + fmt::Debug {
    /// Feeds one already-parsed event (or chunk): [`Step::Renewed`] when a
    /// delta in it renewed the task, else the first rejection, else
    /// [`Step::Tracked`] or [`Step::Ignored`].
    fn feed_value(&mut self, event: &Value) -> Result<Step, Rejection>;

    /// Ends the current message, as when the runner drops a stream midway
    /// or the turn ends; the next message starts a new generation.
    fn turn_end(&mut self);

    /// Returns the tracker, for its counters.
    fn tracker(&self) -> &ArgumentTracker;

    /// Returns the tracker to count a rejection on.
    fn tracker_mut(&mut self) -> &mut ArgumentTracker;

    /// Feeds one payload as raw bytes (an SSE `data:` payload, without
    /// `data: `); invalid JSON or UTF-8 is [`Rejection::InvalidJson`].
    fn feed_bytes(&mut self, data: &[u8]) -> Result<Step, Rejection> {
        feed_json(self, data)
    }

    /// Feeds one payload as text; see [`StreamAdapter::feed_bytes`].
    fn feed(&mut self, data: &str) -> Result<Step, Rejection> {
        self.feed_bytes(data.as_bytes())
    }
}

/// Parses `data` as JSON and feeds it, counting what does not parse.
pub(super) fn feed_json<A: StreamAdapter + ?Sized>(
    adapter: &mut A,
    data: &[u8],
) -> Result<Step, Rejection> {
    match serde_json::from_slice::<Value>(data) {
        Ok(v) => adapter.feed_value(&v),
        Err(_) => Err(adapter.tracker_mut().reject(Rejection::InvalidJson)),
    }
}

/// The wire formats an argument stream can speak, by the names the
/// bindings take.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::StreamFormat;
/// let f: StreamFormat = "gemini".parse().unwrap();
/// assert_eq!(f, StreamFormat::Gemini);
/// assert_eq!(f.to_string(), "gemini");
/// assert_eq!(
///     "claude".parse::<StreamFormat>().unwrap_err().to_string(),
///     "unknown argument stream format `claude`, expected one of anthropic, openai, responses, gemini"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamFormat {
    /// Anthropic Messages streaming events ([`AnthropicStream`]).
    Anthropic,
    /// OpenAI chat-completions chunks ([`OpenAiStream`]).
    OpenAi,
    /// OpenAI Responses API streaming events ([`ResponsesStream`]).
    Responses,
    /// Gemini `streamGenerateContent` chunks ([`GeminiStream`]).
    Gemini,
}

impl StreamFormat {
    /// Every format, in the order errors list them.
    pub const ALL: [StreamFormat; 4] = [
        StreamFormat::Anthropic,
        StreamFormat::OpenAi,
        StreamFormat::Responses,
        StreamFormat::Gemini,
    ];

    /// Returns the format's name: `anthropic`, `openai`, `responses` or
    /// `gemini`.
    pub fn name(self) -> &'static str {
        match self {
            StreamFormat::Anthropic => "anthropic",
            StreamFormat::OpenAi => "openai",
            StreamFormat::Responses => "responses",
            StreamFormat::Gemini => "gemini",
        }
    }

    /// Returns a new adapter of this format renewing `recorder`'s task, in
    /// the default [`super::Freshness::Ordered`] mode.
    pub fn adapter(self, recorder: Recorder) -> Box<dyn StreamAdapter> {
        match self {
            StreamFormat::Anthropic => Box::new(AnthropicStream::new(recorder)),
            StreamFormat::OpenAi => Box::new(OpenAiStream::new(recorder)),
            StreamFormat::Responses => Box::new(ResponsesStream::new(recorder)),
            StreamFormat::Gemini => Box::new(GeminiStream::new(recorder)),
        }
    }
}

impl fmt::Display for StreamFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A format name that is not one of [`StreamFormat::ALL`].
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::StreamFormat;
/// assert!("sse".parse::<StreamFormat>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown argument stream format `{0}`, expected one of anthropic, openai, responses, gemini"
)]
pub struct UnknownStreamFormat(pub String);

impl FromStr for StreamFormat {
    type Err = UnknownStreamFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StreamFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownStreamFormat(s.to_owned()))
    }
}

/// Counts a shape error found while parsing; a rule's result, already
/// counted by the tracker, passes on.
pub(super) fn settle(
    tracker: &mut ArgumentTracker,
    r: Result<Result<Step, Rejection>, Parse>,
) -> Result<Step, Rejection> {
    match r {
        Err(Parse(r)) => Err(tracker.reject(r)),
        Ok(r) => r,
    }
}

/// Folds the results of one chunk's parts into one answer, for the
/// adapters whose chunks carry several (OpenAI chat, Gemini).
#[derive(Default)]
pub(super) struct Acc {
    renewed: bool,
    tracked: bool,
    first_rejection: Option<Rejection>,
}

impl Acc {
    pub(super) fn push(&mut self, r: Result<Step, Rejection>) {
        match r {
            Ok(Step::Renewed) => self.renewed = true,
            Ok(Step::Tracked) => self.tracked = true,
            Ok(Step::Ignored) => {}
            Err(e) => {
                self.first_rejection.get_or_insert(e);
            }
        }
    }

    /// Counts a shape error that cut the chunk short, then answers.
    pub(super) fn settle(
        mut self,
        tracker: &mut ArgumentTracker,
        r: Result<(), Parse>,
    ) -> Result<Step, Rejection> {
        if let Err(Parse(r)) = r {
            self.push(Err(tracker.reject(r)));
        }
        self.result()
    }

    pub(super) fn result(&self) -> Result<Step, Rejection> {
        match (self.renewed, self.first_rejection, self.tracked) {
            (true, _, _) => Ok(Step::Renewed),
            (false, Some(e), _) => Err(e),
            (false, None, true) => Ok(Step::Tracked),
            (false, None, false) => Ok(Step::Ignored),
        }
    }
}
