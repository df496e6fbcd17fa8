//! The virtual clocks for deterministic tests: [`ManualClock`], moved only
//! when told to, and [`LaggingClock`], whose coarse reading trails it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{coarse_stamp, dur_nanos, Clock, Nanos};

/// A virtual clock that moves only when told to; clones share one time.
///
/// Pair it with [`Guard::advance`](crate::Guard::advance) to test timing
/// logic deterministically, with no real sleep. Its wall clock can be moved
/// independently (even backwards) to show that silence ignores it (R2.7).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{Clock, ManualClock};
///
/// let a = ManualClock::new();
/// let b = a.clone();
/// a.advance(Duration::from_millis(250));
/// assert_eq!(b.now(), a.now());
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug)]
struct ManualInner {
    mono: AtomicU64,
    /// Wall offset in nanoseconds from the Unix epoch at mono 0, signed.
    wall_base: parking_lot::Mutex<SystemTime>,
}

impl ManualClock {
    /// Creates a virtual clock at instant 1 ns, with wall time 2026-01-01.
    pub fn new() -> Self {
        ManualClock {
            inner: Arc::new(ManualInner {
                mono: AtomicU64::new(1),
                wall_base: parking_lot::Mutex::new(
                    SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600),
                ),
            }),
        }
    }

    /// Moves the monotonic (and wall) time forward by `d`.
    pub fn advance(&self, d: Duration) {
        let n = dur_nanos(d);
        self.inner
            .mono
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                Some(v.saturating_add(n))
            })
            .ok();
    }

    /// Moves only the wall clock, by a signed number of seconds, as an NTP
    /// step or a manual `date -s` would. Monotonic time is untouched.
    pub fn jump_wall(&self, secs: i64) {
        let mut base = self.inner.wall_base.lock();
        *base = if secs >= 0 {
            *base + Duration::from_secs(secs as u64)
        } else {
            *base - Duration::from_secs(secs.unsigned_abs())
        };
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        Nanos(self.inner.mono.load(Ordering::SeqCst))
    }

    fn wall_at(&self, at: Nanos) -> SystemTime {
        *self.inner.wall_base.lock() + Duration::from_nanos(at.0)
    }

    fn is_virtual(&self) -> bool {
        true
    }
}

/// A virtual clock whose stamps come from a coarse reading that trails it
/// by a lag the test sets, through the same stamp rule as
/// [`MonotonicClock`](super::MonotonicClock).
///
/// It replays in virtual time what a VM's lagging or stalled coarse clock
/// does to verdicts (R9.5). A guard built on it is virtual, as on a
/// [`ManualClock`]: move it with [`Guard::advance`](crate::Guard::advance).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{Clock, LaggingClock, Nanos};
///
/// let clock = LaggingClock::new(Duration::from_millis(4));
/// clock.advance(Duration::from_millis(100));
/// clock.set_lag(Duration::from_millis(15)); // more than two ticks behind
/// let first = clock.stamp(Nanos::ZERO); // the first signal: precise
/// assert_eq!(first, clock.now());
/// clock.advance(Duration::from_millis(1));
/// assert_eq!(clock.stamp(first), clock.now()); // still precise while it lags
/// ```
#[derive(Clone, Debug)]
pub struct LaggingClock {
    manual: ManualClock,
    /// Two ticks: what the stamp rule adds to a coarse reading.
    slack: u64,
    coarse: Arc<CoarseModel>,
}

#[derive(Debug, Default)]
struct CoarseModel {
    /// How far the coarse reading trails `now`, in nanoseconds.
    lag: AtomicU64,
    /// A coarse reading held still while `now` moves on; 0 when not frozen.
    frozen: AtomicU64,
}

impl LaggingClock {
    /// Creates a virtual clock with a kernel tick of `tick` whose coarse
    /// reading does not lag yet.
    pub fn new(tick: Duration) -> Self {
        LaggingClock {
            manual: ManualClock::new(),
            slack: dur_nanos(tick).saturating_mul(2),
            coarse: Arc::default(),
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.manual.advance(d);
    }

    /// Makes the coarse reading trail `now` by `lag` from here on.
    pub fn set_lag(&self, lag: Duration) {
        self.coarse.frozen.store(0, Ordering::SeqCst);
        self.coarse.lag.store(dur_nanos(lag), Ordering::SeqCst);
    }

    /// Holds the coarse reading where it is while `now` moves on, as a
    /// VM's stalled timekeeping does, until the next [`LaggingClock::set_lag`].
    pub fn freeze_coarse(&self) {
        let at = self.coarse_reading();
        self.coarse.frozen.store(at.0, Ordering::SeqCst);
    }

    /// Returns the coarse reading the stamp rule sees now.
    pub fn coarse_reading(&self) -> Nanos {
        match self.coarse.frozen.load(Ordering::SeqCst) {
            0 => {
                let lag = self.coarse.lag.load(Ordering::SeqCst);
                Nanos(self.manual.now().0.saturating_sub(lag).max(1))
            }
            at => Nanos(at),
        }
    }

    /// The underlying virtual clock, shared with this one.
    pub(crate) fn manual(&self) -> &ManualClock {
        &self.manual
    }
}

impl Clock for LaggingClock {
    fn now(&self) -> Nanos {
        self.manual.now()
    }

    fn stamp(&self, prev: Nanos) -> Nanos {
        coarse_stamp(self.coarse_reading(), self.slack, prev, || self.now())
    }

    fn wall_at(&self, at: Nanos) -> SystemTime {
        self.manual.wall_at(at)
    }

    fn is_virtual(&self) -> bool {
        true
    }
}
