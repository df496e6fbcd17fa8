//! `stallwarden run --stream FORMAT` (R5.10): the command's stdout is also
//! read as a headless agent CLI's JSON-lines stream. The bytes still pass
//! through the pump unchanged and are counted as output there; a copy of
//! each read goes to an [`AgentStream`] that reports the agent's tool calls
//! and turns to the task.

use stallwarden::sources::agent::{AgentStream, Format};
use stallwarden::Recorder;

/// The `--stream` value: a format, or `none` to turn a profile's off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamFlag(pub(crate) Option<Format>);

/// Parses `--stream`.
pub(crate) fn format(s: &str) -> Result<StreamFlag, String> {
    if s == "none" {
        return Ok(StreamFlag(None));
    }
    s.parse()
        .map(|f| StreamFlag(Some(f)))
        .map_err(|e: stallwarden::sources::agent::UnknownFormat| e.to_string() + ", or none")
}

/// Picks the format: the flag wins over the profile's `stream` key.
pub(crate) fn choose(flag: Option<StreamFlag>, profile: Option<Format>) -> Option<Format> {
    match flag {
        Some(StreamFlag(f)) => f,
        None => profile,
    }
}

/// A reader of the copied stdout bytes, fed from the stdout pump's thread.
#[derive(Debug)]
pub(crate) struct Tap(AgentStream);

impl Tap {
    /// Creates the tap for `format`, reporting to `recorder`'s task.
    pub(crate) fn new(format: Format, recorder: Recorder) -> Tap {
        Tap(AgentStream::new(format, recorder))
    }

    /// Reads the next bytes the command wrote (already passed on).
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.0.feed(bytes);
    }

    /// The command's stdout ended.
    pub(crate) fn finish(&mut self) {
        self.0.finish();
    }
}
