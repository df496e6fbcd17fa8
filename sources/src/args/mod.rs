//! Streamed tool-argument deltas and their stream adapters (R5.2).
//!
//! [`ArgumentTracker`] holds the generation / block / freshness rules that
//! decide whether a delta is fresh progress; the adapters feed it from the
//! providers' wire formats: [`anthropic::AnthropicStream`] (Messages),
//! [`openai::OpenAiStream`] (chat completions, with or without `index`),
//! [`responses::ResponsesStream`] (the Responses API) and
//! [`gemini::GeminiStream`] (`streamGenerateContent`).
//! Partial arguments never leave this module: the tracker keeps at most a
//! 64-bit fingerprint per delta and never the text, and nothing here starts a
//! tool call (that is [`crate::tools`], once the call is final).
//!
//! Freshness has two modes (R5.2). [`Freshness::Ordered`], the default of
//! every adapter, is for ordered exactly-once streams (SSE over HTTP, a
//! child's stdout): every non-empty delta on an open announced block is
//! fresh, with no per-delta state at all. Real streams repeat short
//! fragments (`":"`, `","`, indentation) and a long file write streams tens
//! of thousands of deltas, so any fingerprint set there refuses genuine
//! progress and a cap on it kills the very generation the rule protects
//! (seed 004). [`Freshness::Deduplicated`] is for sequence-less RPC where a
//! chunk can be replayed: a delta is fingerprinted with its position (block
//! index and the block's length before it), so a replay never renews while a
//! repeated fragment at a new position does; past [`MAX_FINGERPRINTS`] the
//! oldest fingerprints are forgotten, never refused.

#[macro_use]
mod adapter;
pub mod anthropic;
mod blocks;
pub mod gemini;
pub mod openai;
mod rejection;
pub mod responses;

use std::fmt;

use watchdog_core::Recorder;

use crate::refusal::refuse;
use adapter::{feed_json, settle, Acc};
pub use adapter::{StreamAdapter, StreamFormat, UnknownStreamFormat};
use blocks::{BlockSet, Replays};
pub use rejection::{Rejection, RejectionCounts};

/// Block indices are accepted in `0..MAX_BLOCKS` (R5.2).
pub const MAX_BLOCKS: u64 = 4096;

/// Fingerprints a [`Freshness::Deduplicated`] generation remembers; past
/// this the oldest are forgotten (R5.2), so an older replay counts as fresh
/// (a bounded risk that the deadline budget covers) and nothing fails closed.
pub const MAX_FINGERPRINTS: usize = 4096;

/// How the tracker decides that a delta on an open block is fresh (R5.2).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::{ArgumentTracker, Freshness, Rejection};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let mut rpc = ArgumentTracker::with_freshness(task.recorder(), Freshness::Deduplicated);
/// rpc.message_start(1).unwrap();
/// rpc.block_start(0, "call_1", "write").unwrap();
/// rpc.delta(0, ",").unwrap();        // position 0
/// rpc.delta(0, ",").unwrap();        // the same fragment at position 1: fresh
/// assert_eq!(Freshness::default(), Freshness::Ordered);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Freshness {
    /// Every non-empty delta on an open announced block is fresh: for
    /// ordered, exactly-once streams. O(1) memory per block, no cap.
    #[default]
    Ordered,
    /// A delta already seen at the same position (block index and the
    /// block's accumulated length before it) is a replay and does not renew:
    /// for sequence-less RPC. At most [`MAX_FINGERPRINTS`] remembered,
    /// oldest forgotten first.
    Deduplicated,
}

pub use crate::refusal::Step;

/// Decides which streamed tool-argument deltas are fresh progress (R5.2)
/// and renews the task for those only.
///
/// State is bounded whatever the input: two 4096-bit block sets and, in
/// [`Freshness::Deduplicated`] mode only, at most [`MAX_FINGERPRINTS`]
/// 64-bit fingerprints and one length per open block. Ids, names and delta
/// text are checked and dropped, never stored or logged. Every refusal is a
/// [`Rejection`], counted on the task (`args.` keys, read back by
/// [`ArgumentTracker::rejections`]); nothing here panics on input.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::{ArgumentTracker, Rejection};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let mut args = ArgumentTracker::new(task.recorder());
///
/// args.message_start(1).unwrap();
/// args.block_start(0, "toolu_01", "bash").unwrap();
/// args.delta(0, r#"{"command": "#).unwrap(); // renews the task
/// args.delta(0, r#"{"command": "#).unwrap(); // an ordered stream: renews again
/// args.block_stop(0).unwrap();
/// assert_eq!(args.delta(0, "\"ls\"}"), Err(Rejection::BlockClosed));
/// args.message_end();
/// assert_eq!(args.accepted(), 2);
/// assert_eq!(args.rejections().get(Rejection::BlockClosed), 1);
/// ```
pub struct ArgumentTracker {
    recorder: Recorder,
    freshness: Freshness,
    last_timestamp: Option<u64>,
    active: bool,
    announced: BlockSet,
    closed: BlockSet,
    /// Present in [`Freshness::Deduplicated`] mode only.
    dedup: Option<Box<Replays>>,
    accepted: u64,
}

impl fmt::Debug for ArgumentTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArgumentTracker")
            .field("task", &self.recorder.id())
            .field("freshness", &self.freshness)
            .field("active", &self.active)
            .field("last_timestamp", &self.last_timestamp)
            .field("open_blocks", &self.open_blocks())
            .field("fingerprints", &self.fingerprints())
            .field("accepted", &self.accepted)
            .field("rejections", &self.rejections())
            .finish()
    }
}

impl ArgumentTracker {
    /// Creates a tracker that renews `recorder`'s task on fresh deltas, in
    /// the default [`Freshness::Ordered`] mode.
    pub fn new(recorder: Recorder) -> Self {
        ArgumentTracker::with_freshness(recorder, Freshness::Ordered)
    }

    /// Creates a tracker with the given freshness mode.
    pub fn with_freshness(recorder: Recorder, freshness: Freshness) -> Self {
        ArgumentTracker {
            recorder,
            freshness,
            last_timestamp: None,
            active: false,
            announced: BlockSet::default(),
            closed: BlockSet::default(),
            dedup: match freshness {
                Freshness::Ordered => None,
                Freshness::Deduplicated => Some(Box::default()),
            },
            accepted: 0,
        }
    }

    /// Returns the tracker's freshness mode.
    pub fn freshness(&self) -> Freshness {
        self.freshness
    }

    /// Starts a new assistant message's generation.
    ///
    /// Accepted only when `timestamp` is non-negative, strictly above the
    /// last accepted one, and no generation is active.
    pub fn message_start(&mut self, timestamp: i64) -> Result<(), Rejection> {
        let r = self.try_message_start(timestamp);
        self.note(r)
    }

    fn try_message_start(&mut self, timestamp: i64) -> Result<(), Rejection> {
        let ts = u64::try_from(timestamp).map_err(|_| Rejection::NegativeTimestamp)?;
        if self.last_timestamp.is_some_and(|last| ts <= last) {
            return Err(Rejection::StaleTimestamp);
        }
        if self.active {
            return Err(Rejection::GenerationActive);
        }
        self.last_timestamp = Some(ts);
        self.active = true;
        Ok(())
    }

    /// Ends the active generation (message end or turn end) and clears its
    /// blocks and fingerprints; does nothing when none is active.
    pub fn message_end(&mut self) {
        self.active = false;
        self.announced.clear();
        self.closed.clear();
        if let Some(d) = &mut self.dedup {
            d.clear();
        }
    }

    /// Announces tool-call block `index` with call `id` running tool `name`.
    ///
    /// Accepted once per index per generation, with a non-empty id and name
    /// and an index below [`MAX_BLOCKS`]. The id and name are not kept.
    pub fn block_start(&mut self, index: u64, id: &str, name: &str) -> Result<(), Rejection> {
        let r = self.try_block_start(index, id, name);
        self.note(r)
    }

    fn try_block_start(&mut self, index: u64, id: &str, name: &str) -> Result<(), Rejection> {
        if !self.active {
            return Err(Rejection::NoActiveGeneration);
        }
        let i = self.index(index)?;
        if id.is_empty() {
            return Err(Rejection::EmptyId);
        }
        if name.is_empty() {
            return Err(Rejection::EmptyName);
        }
        if self.announced.contains(i) {
            return Err(Rejection::BlockAlreadyAnnounced);
        }
        self.announced.insert(i);
        Ok(())
    }

    /// Closes block `index`; it never reopens in this generation.
    pub fn block_stop(&mut self, index: u64) -> Result<(), Rejection> {
        let r = self.open_block(index).map(|i| {
            self.closed.insert(i);
            if let Some(d) = &mut self.dedup {
                d.lengths.remove(&i);
            }
        });
        self.note(r)
    }

    /// Offers a delta of block `index`'s arguments; renews the task when it
    /// is fresh progress.
    ///
    /// Fresh means: an open announced block and a non-empty text; in
    /// [`Freshness::Deduplicated`] mode also a fingerprint of `(index, the
    /// block's length before it, text)` not among the last
    /// [`MAX_FINGERPRINTS`] of this generation. The text is at most hashed,
    /// then dropped.
    pub fn delta(&mut self, index: u64, text: &str) -> Result<(), Rejection> {
        self.offer(index, None, text)
    }

    /// Offers a delta that the wire places at byte `offset` of block
    /// `index`'s arguments, for sequence-less transports that carry one.
    ///
    /// In [`Freshness::Deduplicated`] mode this is what tells a replay (the
    /// same text at the same offset, refused as [`Rejection::DuplicateDelta`])
    /// from a repeated fragment further on (fresh). Without an offset
    /// ([`ArgumentTracker::delta`]) the position is the block's accumulated
    /// length, so a chunk delivered again after others counts as fresh: the
    /// stream itself cannot tell it from a genuine repeat (seed 004). In
    /// [`Freshness::Ordered`] mode the offset is not used.
    ///
    /// # Examples
    ///
    /// ```
    /// use stallwarden_sources::args::{ArgumentTracker, Freshness, Rejection};
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// let mut rpc = ArgumentTracker::with_freshness(task.recorder(), Freshness::Deduplicated);
    /// rpc.message_start(1).unwrap();
    /// rpc.block_start(0, "call_1", "write").unwrap();
    /// rpc.delta_at(0, 0, "{\"a\":").unwrap();
    /// rpc.delta_at(0, 5, "1}").unwrap();
    /// assert_eq!(rpc.delta_at(0, 5, "1}"), Err(Rejection::DuplicateDelta)); // replayed
    /// ```
    pub fn delta_at(&mut self, index: u64, offset: u64, text: &str) -> Result<(), Rejection> {
        self.offer(index, Some(offset), text)
    }

    fn offer(&mut self, index: u64, at: Option<u64>, text: &str) -> Result<(), Rejection> {
        let r = self.try_delta(index, at, text);
        if r.is_ok() {
            self.accepted = self.accepted.saturating_add(1);
            self.recorder.argument_delta();
        }
        self.note(r)
    }

    fn try_delta(&mut self, index: u64, at: Option<u64>, text: &str) -> Result<(), Rejection> {
        let i = self.open_block(index)?;
        if text.is_empty() {
            return Err(Rejection::EmptyDelta);
        }
        match &mut self.dedup {
            None => Ok(()),
            Some(d) => d.offer(i, at, text),
        }
    }

    /// Counts a rejection found outside the tracker (an adapter's parse).
    ///
    /// Every rejection is counted on the task, under `args.` and the
    /// reason, so its status snapshot shows it by key (R4.2, R10.6).
    pub fn reject(&mut self, reason: Rejection) -> Rejection {
        refuse(&self.recorder, reason)
    }

    /// Returns true while a message's generation is active.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Returns true when block `index` was announced in this generation.
    pub fn is_announced(&self, index: u64) -> bool {
        self.index(index).is_ok_and(|i| self.announced.contains(i))
    }

    /// Returns true when block `index` is open: announced in the active
    /// generation and not closed.
    pub fn is_open(&self, index: u64) -> bool {
        self.open_block(index).is_ok()
    }

    /// Returns how many blocks are open (announced, not closed).
    pub fn open_blocks(&self) -> usize {
        self.announced.count() - self.closed.count()
    }

    /// Returns how many fingerprints the active generation holds (always 0
    /// in [`Freshness::Ordered`] mode).
    pub fn fingerprints(&self) -> usize {
        self.dedup.as_ref().map_or(0, |d| d.order.len())
    }

    /// Returns how many deltas were accepted over the tracker's life.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// Returns the task's `args.` refusals by reason, read from the task
    /// (R10.6): every adapter and tracker on the task counts there, so
    /// this is theirs together; all zero once the task finished.
    pub fn rejections(&self) -> RejectionCounts {
        RejectionCounts::of(&self.recorder)
    }

    /// Returns the recorder of the task this tracker renews.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    fn index(&self, index: u64) -> Result<u16, Rejection> {
        if index < MAX_BLOCKS {
            Ok(index as u16)
        } else {
            Err(Rejection::IndexOutOfRange)
        }
    }

    fn open_block(&self, index: u64) -> Result<u16, Rejection> {
        if !self.active {
            return Err(Rejection::NoActiveGeneration);
        }
        let i = self.index(index)?;
        if !self.announced.contains(i) {
            return Err(Rejection::BlockNotAnnounced);
        }
        if self.closed.contains(i) {
            return Err(Rejection::BlockClosed);
        }
        Ok(i)
    }

    fn note<T>(&mut self, r: Result<T, Rejection>) -> Result<T, Rejection> {
        r.map_err(|reason| self.reject(reason))
    }
}

/// Reads a JSON block index: a non-negative integer.
fn json_index(v: Option<&serde_json::Value>) -> Result<u64, Rejection> {
    match v {
        Some(serde_json::Value::Number(n)) => match (n.as_u64(), n.as_i64()) {
            (Some(i), _) => Ok(i),
            // A negative integer is an index out of range, not a type error.
            (None, Some(_)) => Err(Rejection::IndexOutOfRange),
            (None, None) => Err(Rejection::MalformedEvent),
        },
        _ => Err(Rejection::MalformedEvent),
    }
}

/// Reads a JSON string field.
fn json_str(v: Option<&serde_json::Value>) -> Result<&str, Rejection> {
    v.and_then(serde_json::Value::as_str)
        .ok_or(Rejection::MalformedEvent)
}

/// A shape error found while parsing, before any rule applied; the adapter
/// counts it, where a rule's rejection is counted by the tracker.
struct Parse(Rejection);

impl Parse {
    const MALFORMED: Parse = Parse(Rejection::MalformedEvent);
}

impl From<Rejection> for Parse {
    fn from(r: Rejection) -> Self {
        Parse(r)
    }
}
