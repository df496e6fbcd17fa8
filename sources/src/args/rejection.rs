//! Why an argument event did not renew the task, and the task's counts
//! of it (R5.2, R10.6).

use std::fmt;

use watchdog_core::Recorder;

use crate::refusal::{refusals, Refusal};

/// Why an event did not renew the task; every rejection is counted on the
/// task under `args.` and the reason (R10.6).
///
/// The first group is the tracker's own rules (R5.2); the second is what
/// the stream adapters refuse before the rules apply (malformed input).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::Rejection;
/// use stallwarden_sources::Refusal;
/// assert_eq!(Rejection::DuplicateDelta.key(), "args.duplicate_delta");
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
    /// replay; [`super::Freshness::Deduplicated`] only).
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
    /// Every reason, in declaration order.
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
}

impl Refusal for Rejection {
    /// `args.` and the reason, e.g. `args.empty_delta`.
    fn key(&self) -> &'static str {
        match self {
            Rejection::NegativeTimestamp => "args.negative_timestamp",
            Rejection::StaleTimestamp => "args.stale_timestamp",
            Rejection::GenerationActive => "args.generation_active",
            Rejection::NoActiveGeneration => "args.no_active_generation",
            Rejection::IndexOutOfRange => "args.index_out_of_range",
            Rejection::EmptyId => "args.empty_id",
            Rejection::EmptyName => "args.empty_name",
            Rejection::BlockAlreadyAnnounced => "args.block_already_announced",
            Rejection::BlockNotAnnounced => "args.block_not_announced",
            Rejection::BlockClosed => "args.block_closed",
            Rejection::EmptyDelta => "args.empty_delta",
            Rejection::DuplicateDelta => "args.duplicate_delta",
            Rejection::InvalidJson => "args.invalid_json",
            Rejection::MalformedEvent => "args.malformed_event",
            Rejection::BadTimestamp => "args.bad_timestamp",
            Rejection::UnsupportedChoice => "args.unsupported_choice",
        }
    }
}

/// The task's `args.` refusals, by reason (R10.6): read from the task, not
/// kept by the tracker, so every adapter on the task is counted once.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::args::{ArgumentTracker, Rejection, RejectionCounts};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("turn", Profile::default()).unwrap();
/// let mut args = ArgumentTracker::new(task.recorder());
/// assert_eq!(args.delta(0, "x"), Err(Rejection::NoActiveGeneration));
/// let counts = RejectionCounts::of(&task.recorder());
/// assert_eq!(counts.get(Rejection::NoActiveGeneration), 1);
/// assert_eq!(counts.total(), 1);
/// assert_eq!(RejectionCounts::default().total(), 0);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RejectionCounts([u64; Rejection::COUNT]);

impl RejectionCounts {
    /// Reads the `args.` refusals counted on `recorder`'s task; all zero
    /// once it finished.
    pub fn of(recorder: &Recorder) -> RejectionCounts {
        let refused = refusals(recorder, "args");
        let mut counts = RejectionCounts::default();
        for (slot, reason) in counts.0.iter_mut().zip(Rejection::ALL) {
            *slot = refused.get(reason.key()).copied().unwrap_or(0);
        }
        counts
    }

    /// Returns how many times `reason` was counted.
    pub fn get(&self, reason: Rejection) -> u64 {
        // ALL is in declaration order, so the discriminant is the slot.
        self.0[reason as usize]
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
}

impl fmt::Debug for RejectionCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(r, n)| (r.key(), n)))
            .finish()
    }
}
