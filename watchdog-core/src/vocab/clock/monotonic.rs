//! The real clock: `CLOCK_MONOTONIC` for verdicts, `CLOCK_MONOTONIC_COARSE`
//! under the stamp rule of R9.5 for recorded signals.

use std::time::{Duration, SystemTime};

use super::{coarse_stamp, Clock, Nanos};

/// The real monotonic clock.
///
/// On Linux, [`Clock::now`] reads `CLOCK_MONOTONIC` (about 20 ns), which the
/// deadline driver and slow-path operations use, so a verdict is taken when
/// its budget has really run out. [`Clock::stamp`], which stamps every
/// recorded signal, reads `CLOCK_MONOTONIC_COARSE` (a few nanoseconds, one
/// kernel tick of resolution, typically 1–4 ms) and trusts it only where a
/// precise reading already vouches for it (R9.5):
///
/// - the first signal of its kind in a coarse tick (the previous stamp is
///   older than the coarse reading) is stamped with `CLOCK_MONOTONIC`
///   itself: exact, whatever the coarse clock's lag. A task that signals
///   and then goes silent is judged from a precise stamp;
/// - a later signal in the same tick, while the previous stamp is within
///   two ticks of the coarse reading, is stamped with the coarse reading
///   plus two ticks (the hot path of a busy task, R9.1);
/// - a previous stamp more than two ticks ahead of the coarse reading
///   shows the coarse clock lagging (a VM whose timekeeping stalled), and
///   the signal is stamped precisely again until the coarse clock catches
///   up.
///
/// ARCHITECTURE.md ("Time you can trust") gives the argument and what is
/// left: a burst of signals that keeps going after its tick's coarse
/// reading has stalled for more than two ticks.
///
/// # Examples
///
/// ```
/// use watchdog_core::{Clock, MonotonicClock};
///
/// let clock = MonotonicClock::new();
/// let a = clock.now();
/// let b = clock.now();
/// assert!(b >= a);
/// ```
#[derive(Clone, Debug)]
pub struct MonotonicClock {
    origin_mono: u64,
    /// How far the coarse clock trails the precise one in a healthy tick
    /// (two ticks): added to its readings when a precise stamp vouches.
    pub(super) coarse_slack: u64,
    origin_wall: SystemTime,
    #[cfg(not(target_os = "linux"))]
    origin: std::time::Instant,
}

impl MonotonicClock {
    /// Creates a clock whose origin is now.
    pub fn new() -> Self {
        let origin_wall = SystemTime::now();
        MonotonicClock {
            origin_mono: raw_mono(libc::CLOCK_MONOTONIC),
            coarse_slack: 2 * coarse_resolution(),
            origin_wall,
            #[cfg(not(target_os = "linux"))]
            origin: std::time::Instant::now(),
        }
    }
}

impl MonotonicClock {
    /// `now`, kept out of line: the record path takes it once per coarse
    /// tick at most while a task is busy.
    #[cold]
    #[inline(never)]
    fn precise(&self) -> Nanos {
        self.now()
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(target_os = "linux")]
#[inline]
fn raw_mono(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec, and CLOCK_MONOTONIC and
    // CLOCK_MONOTONIC_COARSE (the only ids passed) are supported by every
    // Linux since 2.6.32; the call cannot fail with them.
    unsafe { libc::clock_gettime(id, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The coarse clock's resolution: how far its reading may trail the
/// precise clock. Four milliseconds (the slowest common kernel tick) if
/// the kernel does not say.
#[cfg(target_os = "linux")]
fn coarse_resolution() -> u64 {
    const FALLBACK: u64 = 4_000_000;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    let res = (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64);
    if rc == 0 && res > 0 {
        res
    } else {
        FALLBACK
    }
}

#[cfg(not(target_os = "linux"))]
fn raw_mono(_: i32) -> u64 {
    0
}

#[cfg(not(target_os = "linux"))]
fn coarse_resolution() -> u64 {
    0
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Nanos {
        #[cfg(target_os = "linux")]
        {
            // +1 so that no real reading is ever `Nanos::ZERO`, which the
            // engine's atomics use to mean "never observed" (R4.1).
            Nanos(raw_mono(libc::CLOCK_MONOTONIC).saturating_sub(self.origin_mono) + 1)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (self.origin_mono, self.coarse_slack);
            Nanos(dur_nanos(self.origin.elapsed()) + 1)
        }
    }

    #[inline]
    fn stamp(&self, prev: Nanos) -> Nanos {
        #[cfg(target_os = "linux")]
        {
            let coarse =
                raw_mono(libc::CLOCK_MONOTONIC_COARSE).saturating_sub(self.origin_mono) + 1;
            coarse_stamp(Nanos(coarse), self.coarse_slack, prev, || self.precise())
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = prev;
            self.now()
        }
    }

    fn wall_at(&self, at: Nanos) -> SystemTime {
        self.origin_wall + Duration::from_nanos(at.0)
    }
}
