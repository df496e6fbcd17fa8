//! The per-task hot cell: the only memory the record path touches (R9.1).
//!
//! A signal is a clock read and a couple of relaxed stores into this task's
//! own cell: no lock, nothing shared with other tasks, no timer reset, no
//! wake-up. The driver reads these atomics lazily when a timer expires
//! (R3.10). A few rare transitions (first progress, first heartbeat,
//! progress after a stall) raise a flag that sends the recorder down the
//! slow path once, so the driver hears about them without waiting a budget.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Mutex;

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

// Aligned to a cache line so two tasks written by two threads never share
// one (R9.1: two threads on two tasks lose <= 20 %).
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct TaskCell {
    /// Last signal of each kind; 0 = never (R4.1). The last renewal is the
    /// latest of the renewing kinds, worked out when a verdict needs it, so
    /// a signal costs one store, not two.
    pub(crate) last_by_kind: [AtomicU64; SignalKind::COUNT],
    pub(crate) bytes: AtomicU64,
    pub(crate) lines: AtomicU64,
    /// Highest progress value, as f64 bits (non-negative floats order like
    /// their bits, so `fetch_max` is "did it rise").
    pub(crate) progress: AtomicU64,
    pub(crate) flags: AtomicU32,
    pub(crate) renewed_by: KindSet,
    /// Per kind, the flags that send a signal of that kind down the slow
    /// path (precomputed so the record path does one AND).
    wants: [u32; SignalKind::COUNT],
    /// Single-writer counters of `OutputCounter`s; read only for totals.
    pub(crate) counters: Mutex<Vec<Arc<CounterSlot>>>,
}

/// Byte and line totals written by exactly one thread at a time, so a
/// relaxed load and store count exactly without a locked instruction.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct CounterSlot {
    pub(crate) bytes: AtomicU64,
    pub(crate) lines: AtomicU64,
}

impl TaskCell {
    pub(crate) fn new(renewed_by: KindSet, flags: u32) -> Self {
        TaskCell {
            last_by_kind: Default::default(),
            bytes: AtomicU64::new(0),
            lines: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            flags: AtomicU32::new(flags),
            renewed_by,
            wants: SignalKind::ALL.map(|kind| {
                let mut wants = 0;
                if renewed_by.contains(kind) {
                    wants |= STARTUP_PENDING | STALLED;
                }
                if kind == SignalKind::Heartbeat {
                    wants |= LIVENESS_UNARMED | LIVENESS_LOST;
                }
                wants
            }),
            counters: Mutex::new(Vec::new()),
        }
    }

    /// Returns total output bytes and lines across every counter.
    pub(crate) fn totals(&self) -> (u64, u64) {
        let mut bytes = self.bytes.load(Relaxed);
        let mut lines = self.lines.load(Relaxed);
        for c in self.counters.lock().iter() {
            bytes = bytes.wrapping_add(c.bytes.load(Relaxed));
            lines = lines.wrapping_add(c.lines.load(Relaxed));
        }
        (bytes, lines)
    }

    /// Stores a signal at `now`; returns true when the slow path must run.
    #[inline]
    pub(crate) fn record(&self, kind: SignalKind, now: Nanos) -> bool {
        self.last_by_kind[kind.slot()].store(now.as_nanos(), Relaxed);
        self.flags.load(Relaxed) & self.wants[kind.slot()] != 0
    }

    /// Raises a progress value; returns true if it rose (R2.6).
    pub(crate) fn raise_progress(&self, value: f64) -> bool {
        if !(value.is_finite() && value >= 0.0) {
            return false;
        }
        // +1 on the bits so that a first value of 0.0 still counts as a rise
        // from "never".
        // `+ 0.0` turns -0.0 into 0.0: its sign bit would otherwise make it
        // compare above every positive value and block later progress.
        let bits = (value + 0.0).to_bits() + 1;
        self.progress.fetch_max(bits, Relaxed) < bits
    }

    /// The latest signal of a renewing kind; `Nanos::ZERO` if none yet.
    pub(crate) fn last_renewal(&self) -> Nanos {
        let latest = self
            .renewed_by
            .iter()
            .map(|k| self.last_by_kind[k.slot()].load(Relaxed))
            .max()
            .unwrap_or(0);
        Nanos::from_nanos(latest)
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
