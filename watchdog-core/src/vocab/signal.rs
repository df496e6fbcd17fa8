//! Signal kinds (SPEC §1) and the small bit set a profile's `renewed-by`
//! list compiles to, so the record path tests membership with one AND.

use std::fmt;
use std::str::FromStr;

/// What a source reports about a task.
///
/// Progress kinds say the work moved; [`SignalKind::Heartbeat`],
/// [`SignalKind::Cpu`] and [`SignalKind::Net`] only say the worker is alive,
/// and renew budgets only when a profile opts in (R2.6).
///
/// # Examples
///
/// ```
/// use watchdog_core::SignalKind;
///
/// let kind: SignalKind = "argument-delta".parse().unwrap();
/// assert_eq!(kind, SignalKind::ArgumentDelta);
/// assert_eq!(kind.to_string(), "argument-delta");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum SignalKind {
    /// A streamed tool-argument delta was accepted (R5.2).
    ArgumentDelta,
    /// The work wrote bytes (R5.1, R5.7).
    Output,
    /// A tool call started or finished (R5.3).
    ToolCall,
    /// A numeric progress value rose (R5.8).
    Progress,
    /// The worker said it is alive (R5.4); liveness, not progress.
    Heartbeat,
    /// The process tree used CPU since the last sample (R5.5).
    Cpu,
    /// The process tree's TCP sockets received bytes since the last sample
    /// (R5.11).
    Net,
    /// A kind the runner defines; all custom kinds share this slot.
    Custom,
    /// Output or a tool call that only repeats one already in the task's
    /// recent window (R5.12); outside the default `renewed-by`.
    Repeat,
}

impl SignalKind {
    /// Every kind, in slot order.
    pub const ALL: [SignalKind; 9] = [
        SignalKind::ArgumentDelta,
        SignalKind::Output,
        SignalKind::ToolCall,
        SignalKind::Progress,
        SignalKind::Heartbeat,
        SignalKind::Cpu,
        SignalKind::Net,
        SignalKind::Custom,
        SignalKind::Repeat,
    ];

    /// Number of kinds.
    pub const COUNT: usize = 9;

    /// Number of kinds with a stamp of their own in a task's cell: all but
    /// [`SignalKind::Repeat`], the last. A repeat renews nothing unless the
    /// profile opts in, and then it renews as the `output` it was before
    /// R5.12 (its stamp is output's); so the cell keeps its 128 bytes
    /// (R9.1, R9.3).
    pub const STAMPED: usize = 8;

    /// Returns the index of this kind in per-kind arrays.
    pub const fn slot(self) -> usize {
        self as usize
    }

    /// Returns the kebab-case name used in configs and events.
    pub const fn as_str(self) -> &'static str {
        match self {
            SignalKind::ArgumentDelta => "argument-delta",
            SignalKind::Output => "output",
            SignalKind::ToolCall => "tool-call",
            SignalKind::Progress => "progress",
            SignalKind::Heartbeat => "heartbeat",
            SignalKind::Cpu => "cpu",
            SignalKind::Net => "net",
            SignalKind::Custom => "custom",
            SignalKind::Repeat => "repeat",
        }
    }
}

impl fmt::Display for SignalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a signal kind name that is not one of SPEC §1's kinds.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown signal kind `{0}`, expected one of argument-delta, output, tool-call, progress, heartbeat, cpu, net, custom, repeat")]
pub struct UnknownKind(pub String);

impl FromStr for SignalKind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SignalKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

impl serde::Serialize for SignalKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

// A `KindSet` is a `u16`: one bit per kind. `Repeat` is last, so the
// stamped kinds are the first `STAMPED` slots.
const _: () = assert!(SignalKind::COUNT == SignalKind::ALL.len() && SignalKind::COUNT <= 16);
const _: () = assert!(SignalKind::Repeat as usize == SignalKind::STAMPED);

/// A set of signal kinds, one bit per kind.
///
/// # Examples
///
/// ```
/// use watchdog_core::{KindSet, SignalKind};
///
/// let set = KindSet::DEFAULT_RENEWING;
/// assert!(set.contains(SignalKind::Output));
/// assert!(!set.contains(SignalKind::Heartbeat));
/// let with_hb = set.with(SignalKind::Heartbeat);
/// assert!(with_hb.contains(SignalKind::Heartbeat));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KindSet(u16);

impl KindSet {
    /// The empty set.
    pub const EMPTY: KindSet = KindSet(0);
    /// `argument-delta`, `output`, `tool-call`, `progress` (R2.6); not
    /// `repeat` (R5.12).
    pub const DEFAULT_RENEWING: KindSet = KindSet(
        1 << SignalKind::ArgumentDelta as u16
            | 1 << SignalKind::Output as u16
            | 1 << SignalKind::ToolCall as u16
            | 1 << SignalKind::Progress as u16,
    );

    /// Returns a copy with `kind` added.
    pub const fn with(self, kind: SignalKind) -> KindSet {
        KindSet(self.0 | 1 << kind as u16)
    }

    /// Returns true when `kind` is in the set.
    #[inline]
    pub const fn contains(self, kind: SignalKind) -> bool {
        self.0 & (1 << kind as u16) != 0
    }

    /// Iterates the kinds in the set, in slot order.
    pub fn iter(self) -> impl Iterator<Item = SignalKind> {
        SignalKind::ALL
            .into_iter()
            .filter(move |k| self.contains(*k))
    }
}

impl FromIterator<SignalKind> for KindSet {
    fn from_iter<I: IntoIterator<Item = SignalKind>>(iter: I) -> Self {
        iter.into_iter().fold(KindSet::EMPTY, KindSet::with)
    }
}

impl fmt::Debug for KindSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl serde::Serialize for KindSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}
