//! The per-task hot cell: the only memory the record path touches (R9.1).
//!
//! A signal is a clock read and a couple of relaxed stores into this task's
//! own cell: no lock, nothing shared with other tasks, no timer reset, no
//! wake-up. The driver reads these atomics lazily when a timer expires
//! (R3.10). A few rare transitions (first progress, first heartbeat,
//! progress after a stall) raise a flag that sends the recorder down the
//! slow path once, so the driver hears about them without waiting a budget.
//!
//! A cell is two cache lines, so two tasks written by two threads never
//! share one. What the recorders need takes 100 bytes of the 128; the
//! scheduler keeps the task's heap position and three of its instants in
//! the rest, under its lock, rather than in the task's slow state (R9.3).
//! The timer's due instant lives beside the cells in the slab: with eight
//! signal kinds (R5.11's `net` the eighth) it no longer fits, and a cell of
//! 136 bytes would round up to 256 at this alignment.
//!
//! The cell sits in the task's-state tier, not the vocabulary: it is the
//! lock-free half of one task's state, no public type names it, and only
//! the task (this tier) and the slab, driver and recorder (the engine)
//! read or write it. It imports only the clock and the signal kinds.
//!
//! # Invariants
//!
//! Who writes and who reads each word of a [`TaskCell`]:
//!
//! - `last_by_kind`, `bytes`, `lines`, `progress`: written by recorders,
//!   from any thread, with no lock (`Relaxed` stores, `fetch_add`,
//!   `fetch_max`); read by verdicts and snapshots under the scheduler lock.
//!   Nothing is published through them but their own value: a verdict
//!   reads whatever stamp is there when it is taken (R3.10).
//! - `flags`: written only under the scheduler lock, by the task's
//!   verdicts and operations (`set_flag`: raised on a stall or a lost
//!   liveness, cleared as the task absorbs the renewal); read by every
//!   [`TaskCell::record`].
//! - `wants`: written by [`TaskCell::reset`] while nobody holds the cell,
//!   read-only for the task's life.
//! - `refs`: the slab's count of holders (see `engine/slab.rs`).
//! - `heap_pos`, `anchor`, `seen_renewal`, `silent_since`: the scheduler's
//!   words, read and written only under its lock; atomic only so the cell
//!   is `Sync` without `unsafe`.
//!
//! The one ordering that matters is the record/stall handshake on
//! `last_by_kind` and `flags` (R3.3, R10.5): see [`TaskCell::record`].
//! Every other access is `Relaxed` on purpose.
//!
//! # Lock order
//!
//! The cell has no lock. The record path takes none either: it stores,
//! passes a light barrier, loads `flags`, and only when a flag it wants is
//! up goes to the slow path, which takes the scheduler lock after the
//! store, never before it.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::loom::light_barrier;
use crate::loom::sync::atomic::{AtomicU32, AtomicU64};

use crate::vocab::clock::Nanos;
use crate::vocab::signal::{KindSet, SignalKind};

/// Startup budget still applies: the first renewal must re-arm the driver.
pub(crate) const STARTUP_PENDING: u32 = 1;
/// The task is stalled: the next renewal is a recovery (R3.3).
pub(crate) const STALLED: u32 = 1 << 1;
/// Liveness is configured but not armed: the first heartbeat arms it (R2.5).
pub(crate) const LIVENESS_UNARMED: u32 = 1 << 2;
/// Liveness was lost: the next heartbeat re-arms it.
pub(crate) const LIVENESS_LOST: u32 = 1 << 3;
/// Bits per kind in [`TaskCell`]'s packed `wants` word.
const WANT_BITS: usize = 4;

/// One instant kept by the scheduler in a cell's spare room. Only touched
/// under the scheduler lock; atomic so the cell stays `Sync` without
/// `unsafe`, relaxed so it costs a plain load or store.
#[derive(Debug)]
pub(crate) struct Word(AtomicU64);

impl Word {
    pub(crate) fn new(t: Nanos) -> Self {
        Word(AtomicU64::new(t.as_nanos()))
    }

    #[inline]
    pub(crate) fn get(&self) -> Nanos {
        Nanos::from_nanos(self.0.load(Relaxed))
    }

    #[inline]
    pub(crate) fn set(&self, t: Nanos) {
        self.0.store(t.as_nanos(), Relaxed);
    }
}

// Aligned to 128 bytes so two tasks written by two threads never share a
// cache line, nor the pair of lines that x86 cores fetch together (R9.1:
// two threads on two tasks lose <= 20 %).
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct TaskCell {
    /// Last signal of each kind; 0 = never (R4.1). The last renewal is the
    /// latest of the renewing kinds, worked out when a verdict needs it, so
    /// a signal costs one store, not two.
    pub(crate) last_by_kind: [AtomicU64; SignalKind::STAMPED],
    pub(crate) bytes: AtomicU64,
    pub(crate) lines: AtomicU64,
    /// Highest progress value, as f64 bits (non-negative floats order like
    /// their bits, so `fetch_max` is "did it rise").
    pub(crate) progress: AtomicU64,
    pub(crate) flags: AtomicU32,
    /// Per kind, four bits: the flags that send a signal of that kind down
    /// the slow path (precomputed so the record path does a shift and an
    /// AND). A kind renews budgets iff its `STARTUP_PENDING` bit is set.
    wants: AtomicU32,
    /// Holders of the cell: the scheduler while the task is live, and every
    /// recorder. The slot is reused only once this reaches zero.
    pub(crate) refs: AtomicU32,

    // The scheduler's words, in what would otherwise be padding.
    /// Position of the task in the timer heap; `u32::MAX` when absent.
    pub(crate) heap_pos: AtomicU32,
    /// Lower bound of "last renewal": the start, a stall verdict (R3.2), or
    /// a resume shifted back by the silence already used (R2.8).
    pub(crate) anchor: Word,
    /// The latest renewal the scheduler has absorbed.
    pub(crate) seen_renewal: Word,
    /// Where the current silence began, for stall and recovery events.
    pub(crate) silent_since: Word,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<TaskCell>() == 128);
// Every kind's flags fit the packed `wants` word.
const _: () = assert!(SignalKind::STAMPED * WANT_BITS <= u32::BITS as usize);

/// The kinds with a stamp in the cell, in slot order: every kind but
/// `repeat` (see [`SignalKind::STAMPED`]).
pub(crate) const STAMPED_KINDS: [SignalKind; SignalKind::STAMPED] = {
    let mut kinds = [SignalKind::Output; SignalKind::STAMPED];
    let mut i = 0;
    while i < SignalKind::STAMPED {
        kinds[i] = SignalKind::ALL[i];
        i += 1;
    }
    kinds
};

/// Byte and line totals written by exactly one thread at a time, so a
/// relaxed load and store count exactly without a locked instruction.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct CounterSlot {
    pub(crate) bytes: AtomicU64,
    pub(crate) lines: AtomicU64,
}

impl TaskCell {
    /// A cell no task uses yet.
    pub(crate) fn vacant() -> Self {
        TaskCell {
            last_by_kind: Default::default(),
            bytes: AtomicU64::new(0),
            lines: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            flags: AtomicU32::new(0),
            wants: AtomicU32::new(0),
            refs: AtomicU32::new(0),
            heap_pos: AtomicU32::new(u32::MAX),
            anchor: Word::new(Nanos::ZERO),
            seen_renewal: Word::new(Nanos::ZERO),
            silent_since: Word::new(Nanos::ZERO),
        }
    }

    /// Prepares a cell nobody holds for a task started at `start`.
    pub(crate) fn reset(&self, renewed_by: KindSet, flags: u32, start: Nanos) {
        for last in &self.last_by_kind {
            last.store(0, Relaxed);
        }
        self.bytes.store(0, Relaxed);
        self.lines.store(0, Relaxed);
        self.progress.store(0, Relaxed);
        self.flags.store(flags, Relaxed);
        let wants = STAMPED_KINDS.iter().fold(0, |acc, &kind| {
            let mut wants = 0;
            if renewed_by.contains(kind) {
                wants |= STARTUP_PENDING | STALLED;
            }
            if kind == SignalKind::Heartbeat {
                wants |= LIVENESS_UNARMED | LIVENESS_LOST;
            }
            acc | wants << (kind.slot() * WANT_BITS)
        });
        self.wants.store(wants, Relaxed);
        self.heap_pos.store(u32::MAX, Relaxed);
        self.anchor.set(start);
        self.seen_renewal.set(Nanos::ZERO);
        self.silent_since.set(start);
    }

    /// The stamp of the last signal of `kind`, `Nanos::ZERO` if none.
    #[inline]
    pub(crate) fn last_stamp(&self, kind: SignalKind) -> Nanos {
        Nanos::from_nanos(self.last_by_kind[kind.slot()].load(Relaxed))
    }

    /// Stores a signal at `now`; returns true when the slow path must run.
    ///
    /// The store and the flags load are the recorder's half of the
    /// record/stall handshake (R3.3, R10.5). The driver raises `STALLED`,
    /// then reads the stamps; a recorder stores a stamp, then reads the
    /// flags. That is store buffering: with nothing between each side's
    /// write and read, both reads may miss the other side's write (the loom
    /// model `a_renewal_racing_a_stall_verdict_is_never_missed` finds it),
    /// and the task stays stalled with a renewal nobody absorbed until its
    /// next verdict, a whole budget late. A full barrier between write and
    /// read on both sides forbids that: then either this load sees
    /// `STALLED` and the recorder takes the slow path, or the driver's read
    /// after its barrier sees this stamp. No weaker ordering will do, and a
    /// `SeqCst` fence here would cost every signal; so the barriers are an
    /// asymmetric pair: the record path pays [`light_barrier`] (a compiler
    /// barrier where the kernel has membarrier), the driver pays
    /// [`crate::loom::heavy_barrier`] once per pass that raised a flag
    /// (`Inner::run_due`, `Inner::with_task`).
    #[inline]
    pub(crate) fn record(&self, kind: SignalKind, now: Nanos) -> bool {
        self.last_by_kind[kind.slot()].store(now.as_nanos(), Relaxed);
        light_barrier();
        self.flags.load(Relaxed) & (self.wants.load(Relaxed) >> (kind.slot() * WANT_BITS)) != 0
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

    /// Returns true when signals of `kind` renew budgets; never for
    /// `repeat`, which has no slot here (the recorder knows whether it
    /// renews as output).
    pub(crate) fn renews(&self, kind: SignalKind) -> bool {
        if kind.slot() >= SignalKind::STAMPED {
            return false;
        }
        (self.wants.load(Relaxed) >> (kind.slot() * WANT_BITS)) & STARTUP_PENDING != 0
    }

    /// The latest signal of a renewing kind; `Nanos::ZERO` if none yet.
    pub(crate) fn last_renewal(&self) -> Nanos {
        let latest = STAMPED_KINDS
            .into_iter()
            .filter(|&k| self.renews(k))
            .map(|k| self.last_by_kind[k.slot()].load(Relaxed))
            .max()
            .unwrap_or(0);
        Nanos::from_nanos(latest)
    }

    /// The stamp of the last signal of `kind`; `None` if none yet, and
    /// always for `repeat`, which has no stamp of its own.
    pub(crate) fn last(&self, kind: SignalKind) -> Option<Nanos> {
        match self.last_by_kind.get(kind.slot())?.load(Relaxed) {
            0 => None,
            n => Some(Nanos::from_nanos(n)),
        }
    }

    /// Returns output bytes and lines: this cell's own counts plus those of
    /// the task's single-writer `counters`.
    pub(crate) fn totals(&self, counters: &[Arc<CounterSlot>]) -> (u64, u64) {
        let mut bytes = self.bytes.load(Relaxed);
        let mut lines = self.lines.load(Relaxed);
        for c in counters {
            bytes = bytes.wrapping_add(c.bytes.load(Relaxed));
            lines = lines.wrapping_add(c.lines.load(Relaxed));
        }
        (bytes, lines)
    }

    pub(crate) fn set_flag(&self, flag: u32, on: bool) {
        if on {
            self.flags.fetch_or(flag, Relaxed);
        } else {
            self.flags.fetch_and(!flag, Relaxed);
        }
    }
}
