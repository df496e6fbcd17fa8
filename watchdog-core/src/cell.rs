//! The per-task hot cell: the only memory the record path touches (R9.1).
//!
//! A signal is a clock read and a couple of relaxed stores into this task's
//! own cell: no lock, nothing shared with other tasks, no timer reset, no
//! wake-up. The driver reads these atomics lazily when a timer expires
//! (R3.10). A few rare transitions (first progress, first heartbeat,
//! progress after a stall) raise a flag that sends the recorder down the
//! slow path once, so the driver hears about them without waiting a budget.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::clock::Nanos;
use crate::signal::{KindSet, SignalKind};

/// Startup budget still applies: the first renewal must re-arm the driver.
pub(crate) const STARTUP_PENDING: u32 = 1;
/// The task is stalled: the next renewal is a recovery (R3.3).
pub(crate) const STALLED: u32 = 1 << 1;
/// Liveness is configured but not armed: the first heartbeat arms it (R2.5).
pub(crate) const LIVENESS_UNARMED: u32 = 1 << 2;
/// Liveness was lost: the next heartbeat re-arms it.
pub(crate) const LIVENESS_LOST: u32 = 1 << 3;

#[derive(Debug)]
pub(crate) struct TaskCell {
    /// Last signal whose kind is in `renewed_by`; 0 = never.
    pub(crate) last_renewal: AtomicU64,
    /// Last signal of each kind; 0 = never (R4.1).
    pub(crate) last_by_kind: [AtomicU64; SignalKind::COUNT],
    pub(crate) bytes: AtomicU64,
    pub(crate) lines: AtomicU64,
    /// Highest progress value, as f64 bits (non-negative floats order like
    /// their bits, so `fetch_max` is "did it rise").
    pub(crate) progress: AtomicU64,
    pub(crate) flags: AtomicU32,
    pub(crate) renewed_by: KindSet,
}

impl TaskCell {
    pub(crate) fn new(renewed_by: KindSet, flags: u32) -> Self {
        TaskCell {
            last_renewal: AtomicU64::new(0),
            last_by_kind: Default::default(),
            bytes: AtomicU64::new(0),
            lines: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            flags: AtomicU32::new(flags),
            renewed_by,
        }
    }

    /// Stores a signal at `now`; returns true when the slow path must run.
    #[inline]
    pub(crate) fn record(&self, kind: SignalKind, now: Nanos) -> bool {
        let n = now.as_nanos();
        self.last_by_kind[kind.slot()].store(n, Relaxed);
        let mut wants = 0;
        if self.renewed_by.contains(kind) {
            self.last_renewal.store(n, Relaxed);
            wants |= STARTUP_PENDING | STALLED;
        }
        if kind == SignalKind::Heartbeat {
            wants |= LIVENESS_UNARMED | LIVENESS_LOST;
        }
        self.flags.load(Relaxed) & wants != 0
    }

    /// Raises a progress value; returns true if it rose (R2.6).
    pub(crate) fn raise_progress(&self, value: f64) -> bool {
        if !(value.is_finite() && value >= 0.0) {
            return false;
        }
        // +1 on the bits so that a first value of 0.0 still counts as a rise
        // from "never".
        let bits = value.to_bits() + 1;
        self.progress.fetch_max(bits, Relaxed) < bits
    }

    pub(crate) fn last_renewal(&self) -> Nanos {
        Nanos::from_nanos(self.last_renewal.load(Relaxed))
    }

    pub(crate) fn last(&self, kind: SignalKind) -> Option<Nanos> {
        match self.last_by_kind[kind.slot()].load(Relaxed) {
            0 => None,
            n => Some(Nanos::from_nanos(n)),
        }
    }

    pub(crate) fn set_flag(&self, flag: u32, on: bool) {
        if on {
            self.flags.fetch_or(flag, Relaxed);
        } else {
            self.flags.fetch_and(!flag, Relaxed);
        }
    }
}
