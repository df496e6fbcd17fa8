//! Time as a value passed in: the [`Clock`] trait and [`Nanos`], with the
//! real monotonic clock (`monotonic.rs`) and the virtual clocks for
//! deterministic tests (`manual.rs`).
//!
//! Silence is measured on a monotonic clock (R2.7); wall time is only read to
//! label events for people, and is taken together with the monotonic reading.

use std::fmt;
use std::time::{Duration, SystemTime};

mod manual;
mod monotonic;
#[cfg(test)]
mod tests;

pub use manual::{LaggingClock, ManualClock};
pub use monotonic::MonotonicClock;

/// A monotonic instant in nanoseconds since the clock's own origin.
///
/// `Nanos` fits in an atomic, so a task can publish its last signal with one
/// store. Arithmetic saturates rather than wrapping.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::Nanos;
///
/// let t = Nanos::from_millis(1_500);
/// assert_eq!(t + Duration::from_millis(500), Nanos::from_secs(2));
/// assert_eq!(Nanos::from_secs(1).saturating_since(t), Duration::ZERO);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(u64);

impl Nanos {
    /// The clock's origin.
    pub const ZERO: Nanos = Nanos(0);
    /// The largest representable instant, used as "never".
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// Builds an instant from raw nanoseconds.
    pub const fn from_nanos(n: u64) -> Self {
        Nanos(n)
    }

    /// Builds an instant from milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Nanos(ms.saturating_mul(1_000_000))
    }

    /// Builds an instant from seconds.
    pub const fn from_secs(s: u64) -> Self {
        Nanos(s.saturating_mul(1_000_000_000))
    }

    /// Returns the raw nanosecond count.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Returns the time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Nanos) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// Returns `self - d`, stopping at the origin.
    pub fn saturating_sub(self, d: Duration) -> Nanos {
        Nanos(self.0.saturating_sub(dur_nanos(d)))
    }
}

/// Converts a duration to nanoseconds, saturating at `u64::MAX` (584 years).
pub(crate) fn dur_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl std::ops::Add<Duration> for Nanos {
    type Output = Nanos;
    fn add(self, d: Duration) -> Nanos {
        Nanos(self.0.saturating_add(dur_nanos(d)))
    }
}

impl fmt::Debug for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", Duration::from_nanos(self.0))
    }
}

/// A source of monotonic time, with the wall time that goes with it.
///
/// The engine reads [`Clock::stamp`] on every recorded signal and
/// [`Clock::now`] for verdicts, so implementations must be cheap and must
/// never go backwards.
///
/// # Examples
///
/// ```
/// use watchdog_core::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let before = clock.now();
/// clock.advance(Duration::from_secs(3));
/// assert_eq!(clock.now().saturating_since(before), Duration::from_secs(3));
/// ```
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Returns the current monotonic instant.
    fn now(&self) -> Nanos;

    /// Returns an instant to stamp a signal with, given `prev`, the stamp of
    /// the previous signal of the same kind on the same task
    /// ([`Nanos::ZERO`] if none): never earlier than [`Clock::now`] read at
    /// the same moment, and possibly coarser (R9.5).
    ///
    /// A stamp that ran ahead only makes a verdict later; one that lagged
    /// would let a budget run out before the silence really lasted it.
    /// The default is `now`, which a virtual clock keeps exact.
    #[inline]
    fn stamp(&self, prev: Nanos) -> Nanos {
        let _ = prev;
        self.now()
    }

    /// Returns the wall time that corresponds to the monotonic instant `at`.
    ///
    /// Used only for labels shown to people (RFC 3339 timestamps, Unix-time
    /// gauges); never for measuring silence (R2.7).
    fn wall_at(&self, at: Nanos) -> SystemTime;

    /// Returns true for clocks that only move when a test moves them.
    ///
    /// A guard on a virtual clock spawns no driver thread: the test drives it
    /// with [`Guard::advance`](crate::Guard::advance).
    fn is_virtual(&self) -> bool {
        false
    }
}

/// The stamp rule of R9.5, shared by [`MonotonicClock`] and
/// [`LaggingClock`]: the coarse reading plus `slack` when `prev` (the
/// previous stamp of the kind) lies within `slack` ahead of it, a precise
/// reading otherwise.
///
/// `prev` at or after the coarse reading means a signal was already
/// stamped in this coarse tick; `prev` beyond `coarse + slack` means a
/// precise stamp has shown the coarse clock lagging by more than `slack`.
/// One wrapping subtraction and one comparison decide both.
#[inline(always)]
fn coarse_stamp(coarse: Nanos, slack: u64, prev: Nanos, precise: impl FnOnce() -> Nanos) -> Nanos {
    if prev.0.wrapping_sub(coarse.0) <= slack {
        Nanos(coarse.0 + slack)
    } else {
        precise()
    }
}
