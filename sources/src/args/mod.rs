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
pub mod gemini;
pub mod openai;
pub mod responses;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::{BuildHasher, RandomState};

use watchdog_core::Recorder;

use adapter::{feed_json, settle, Acc};
pub use adapter::{StreamAdapter, StreamFormat, UnknownStreamFormat};

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
/// use stallguard_sources::args::{ArgumentTracker, Freshness, Rejection};
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

/// Why an event did not renew the task; every rejection is counted.
///
/// The first group is the tracker's own rules (R5.2); the second is what
/// the stream adapters refuse before the rules apply (malformed input).
///
/// # Examples
///
/// ```
/// use stallguard_sources::args::Rejection;
/// assert_eq!(Rejection::DuplicateDelta.to_string(), "delta already seen at this position in this generation");
/// assert_eq!(Rejection::ALL.len(), Rejection::COUNT);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// A message timestamp below zero.
    #[error("message timestamp is negative")]
    NegativeTimestamp,
    /// A message timestamp not above the last accepted one (a replay or a
    /// reordered stream).
    #[error("message timestamp is not above the last accepted one")]
    StaleTimestamp,
    /// A message start while another message's generation is active.
    #[error("a generation is already active")]
    GenerationActive,
    /// A block or delta event with no active generation.
    #[error("no active generation")]
    NoActiveGeneration,
    /// A block index outside `0..4096`.
    #[error("block index outside 0..4096")]
    IndexOutOfRange,
    /// A tool-call block announced with an empty id.
    #[error("tool-call block has an empty id")]
    EmptyId,
    /// A tool-call block announced with an empty name.
    #[error("tool-call block has an empty name")]
    EmptyName,
    /// A second announcement of a block (open or closed) in one generation.
    #[error("block already announced in this generation")]
    BlockAlreadyAnnounced,
    /// A delta or stop on a block never announced.
    #[error("block was never announced")]
    BlockNotAnnounced,
    /// A delta or stop on a block that already closed.
    #[error("block already closed")]
    BlockClosed,
    /// A delta that is not a non-empty string.
    #[error("delta is empty")]
    EmptyDelta,
    /// A delta already seen at the same position in this generation (a
    /// replay; [`Freshness::Deduplicated`] only).
    #[error("delta already seen at this position in this generation")]
    DuplicateDelta,
    /// Not JSON (or not UTF-8).
    #[error("not valid JSON")]
    InvalidJson,
    /// JSON of the wrong shape: a missing field or a field of the wrong type.
    #[error("malformed event")]
    MalformedEvent,
    /// A message timestamp that is not an integer or does not fit.
    #[error("message timestamp is not a representable integer")]
    BadTimestamp,
    /// A chat-completions choice other than index 0 (not tracked).
    #[error("choice index other than 0 is not tracked")]
    UnsupportedChoice,
}

impl Rejection {
    /// Every reason, in counter order.
    pub const ALL: [Rejection; 16] = [
        Rejection::NegativeTimestamp,
        Rejection::StaleTimestamp,
        Rejection::GenerationActive,
        Rejection::NoActiveGeneration,
        Rejection::IndexOutOfRange,
        Rejection::EmptyId,
        Rejection::EmptyName,
        Rejection::BlockAlreadyAnnounced,
        Rejection::BlockNotAnnounced,
        Rejection::BlockClosed,
        Rejection::EmptyDelta,
        Rejection::DuplicateDelta,
        Rejection::InvalidJson,
        Rejection::MalformedEvent,
        Rejection::BadTimestamp,
        Rejection::UnsupportedChoice,
    ];

    /// The number of reasons.
    pub const COUNT: usize = Rejection::ALL.len();

    /// Returns the snake_case name used in logs and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            Rejection::NegativeTimestamp => "negative_timestamp",
            Rejection::StaleTimestamp => "stale_timestamp",
            Rejection::GenerationActive => "generation_active",
            Rejection::NoActiveGeneration => "no_active_generation",
            Rejection::IndexOutOfRange => "index_out_of_range",
            Rejection::EmptyId => "empty_id",
            Rejection::EmptyName => "empty_name",
            Rejection::BlockAlreadyAnnounced => "block_already_announced",
            Rejection::BlockNotAnnounced => "block_not_announced",
            Rejection::BlockClosed => "block_closed",
            Rejection::EmptyDelta => "empty_delta",
            Rejection::DuplicateDelta => "duplicate_delta",
            Rejection::InvalidJson => "invalid_json",
            Rejection::MalformedEvent => "malformed_event",
            Rejection::BadTimestamp => "bad_timestamp",
            Rejection::UnsupportedChoice => "unsupported_choice",
        }
    }

    fn slot(self) -> usize {
        // ALL is in declaration order, so the discriminant is the slot.
        self as usize
    }
}

/// Per-reason counters of rejections.
///
/// # Examples
///
/// ```
/// use stallguard_sources::args::{RejectionCounts, Rejection};
/// let counts = RejectionCounts::default();
/// assert_eq!(counts.get(Rejection::EmptyDelta), 0);
/// assert_eq!(counts.total(), 0);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RejectionCounts([u64; Rejection::COUNT]);

impl RejectionCounts {
    /// Returns how many times `reason` was counted.
    pub fn get(&self, reason: Rejection) -> u64 {
        self.0[reason.slot()]
    }

    /// Returns the sum over every reason.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Iterates the reasons counted at least once, with their counts.
    pub fn iter(&self) -> impl Iterator<Item = (Rejection, u64)> + '_ {
        Rejection::ALL
            .into_iter()
            .map(|r| (r, self.get(r)))
            .filter(|(_, n)| *n != 0)
    }

    fn add(&mut self, reason: Rejection) {
        let c = &mut self.0[reason.slot()];
        *c = c.saturating_add(1);
    }
}

impl fmt::Debug for RejectionCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(r, n)| (r.as_str(), n)))
            .finish()
    }
}

/// What an accepted event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A fresh delta: the task was renewed.
    Renewed,
    /// A message or block boundary was accepted; nothing renewed.
    Tracked,
    /// An event that is not argument progress (ping, text, usage): nothing
    /// renewed, nothing counted.
    Ignored,
}

/// Decides which streamed tool-argument deltas are fresh progress (R5.2)
/// and renews the task for those only.
///
/// State is bounded whatever the input: two 4096-bit block sets and, in
/// [`Freshness::Deduplicated`] mode only, at most [`MAX_FINGERPRINTS`]
/// 64-bit fingerprints and one length per open block. Ids, names and delta
/// text are checked and dropped, never stored or logged. Every refusal is a
/// [`Rejection`], counted in [`ArgumentTracker::rejections`]; nothing here
/// panics on input.
///
/// # Examples
///
/// ```
/// use stallguard_sources::args::{ArgumentTracker, Rejection};
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
    rejections: RejectionCounts,
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
            .field("rejections", &self.rejections)
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
            rejections: RejectionCounts::default(),
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
    /// use stallguard_sources::args::{ArgumentTracker, Freshness, Rejection};
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
    /// Every rejection is also counted on the task, so its status snapshot
    /// shows it by reason (R4.2).
    pub fn reject(&mut self, reason: Rejection) -> Rejection {
        self.rejections.add(reason);
        self.recorder.refused(reason.as_str());
        tracing::debug!(task = %self.recorder.id(), reason = reason.as_str(), "argument event rejected");
        reason
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

    /// Returns the per-reason rejection counters.
    pub fn rejections(&self) -> &RejectionCounts {
        &self.rejections
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

/// One bit per block index in `0..4096`.
#[derive(Clone)]
struct BlockSet(Box<[u64; (MAX_BLOCKS / 64) as usize]>);

impl Default for BlockSet {
    fn default() -> Self {
        BlockSet(Box::new([0; (MAX_BLOCKS / 64) as usize]))
    }
}

impl BlockSet {
    fn contains(&self, i: u16) -> bool {
        self.0[usize::from(i / 64)] & (1 << (i % 64)) != 0
    }
    fn insert(&mut self, i: u16) {
        self.0[usize::from(i / 64)] |= 1 << (i % 64);
    }
    fn clear(&mut self) {
        self.0.fill(0);
    }
    fn count(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// What [`Freshness::Deduplicated`] remembers of a generation: the last
/// [`MAX_FINGERPRINTS`] positional fingerprints, oldest first, and each open
/// block's accumulated length.
struct Replays {
    /// Keys the fingerprints; random per tracker so that no input can be
    /// crafted offline to collide.
    hasher: RandomState,
    seen: HashSet<u64, IdentityHash>,
    order: VecDeque<u64>,
    lengths: HashMap<u16, u64>,
}

impl Default for Replays {
    fn default() -> Self {
        Replays {
            hasher: RandomState::new(),
            seen: HashSet::with_hasher(IdentityHash),
            order: VecDeque::new(),
            lengths: HashMap::new(),
        }
    }
}

impl Replays {
    /// Offers `text` at `at` (the wire's own offset), or at the end of what
    /// the block accepted so far when the wire carries none.
    fn offer(&mut self, block: u16, at: Option<u64>, text: &str) -> Result<(), Rejection> {
        let accumulated = self.lengths.get(&block).copied().unwrap_or(0);
        let before = at.unwrap_or(accumulated);
        let fp = self.hasher.hash_one((block, before, text));
        if self.seen.contains(&fp) {
            return Err(Rejection::DuplicateDelta);
        }
        if self.order.len() >= MAX_FINGERPRINTS {
            if let Some(oldest) = self.order.pop_front() {
                self.seen.remove(&oldest);
            }
        }
        self.seen.insert(fp);
        self.order.push_back(fp);
        let end = before.saturating_add(text.len() as u64);
        self.lengths.insert(block, accumulated.max(end));
        Ok(())
    }

    fn clear(&mut self) {
        self.seen.clear();
        self.order.clear();
        self.lengths.clear();
    }
}

/// The fingerprints are already keyed SipHash outputs; hashing them again
/// would only cost time.
#[derive(Clone, Copy, Default)]
struct IdentityHash;

impl BuildHasher for IdentityHash {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

struct IdentityHasher(u64);

impl std::hash::Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed; fold anything else for completeness.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
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
