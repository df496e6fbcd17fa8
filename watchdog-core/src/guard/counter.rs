//! The single-writer [`OutputCounter`]: exact output totals for one pipe
//! reader with no locked instruction (R5.1, R9.1).

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::cell::CounterSlot;
use crate::signal::SignalKind;

use super::Recorder;

/// Counts one output source of a task with a single writer; see
/// [`Recorder::output_counter`].
pub struct OutputCounter {
    pub(super) recorder: Recorder,
    pub(super) slot: Arc<CounterSlot>,
    /// `Send` but not `Sync`: one thread writes at a time, which is what
    /// lets `record` count exactly without a locked instruction.
    pub(super) _single_writer: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl fmt::Debug for OutputCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputCounter")
            .field("task", &self.recorder.id)
            .field("bytes", &self.slot.bytes.load(Ordering::Relaxed))
            .field("lines", &self.slot.lines.load(Ordering::Relaxed))
            .finish()
    }
}

impl OutputCounter {
    /// Records output: `bytes` written, of which `lines` newlines (R5.1).
    #[inline]
    pub fn record(&self, bytes: u64, lines: u64) {
        let add = |c: &crate::loom::sync::atomic::AtomicU64, n: u64| {
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        };
        add(&self.slot.bytes, bytes);
        if lines != 0 {
            add(&self.slot.lines, lines);
        }
        self.recorder.signal(SignalKind::Output);
    }

    /// Records output judged by a [`crate::repeat::LineJudge`]: counted
    /// as any output, and signalled as `kind`, [`SignalKind::Output`] or
    /// [`SignalKind::Repeat`] (R5.12).
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile, SignalKind};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("wait", Profile::default()).unwrap();
    /// let counter = task.recorder().output_counter();
    /// counter.record_as(11, 1, SignalKind::Repeat);
    /// let status = task.status().unwrap();
    /// assert_eq!(status.total_bytes, 11);
    /// assert!(status.last_of(SignalKind::Output).is_none());
    /// ```
    #[inline]
    pub fn record_as(&self, bytes: u64, lines: u64, kind: SignalKind) {
        let add = |c: &crate::loom::sync::atomic::AtomicU64, n: u64| {
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        };
        add(&self.slot.bytes, bytes);
        if lines != 0 {
            add(&self.slot.lines, lines);
        }
        self.recorder.signal(kind);
    }

    /// Counts output without signalling anything: for bytes whose meaning
    /// another source judges and signals (an agent stream, R5.12).
    #[inline]
    pub fn count(&self, bytes: u64, lines: u64) {
        let add = |c: &crate::loom::sync::atomic::AtomicU64, n: u64| {
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        };
        add(&self.slot.bytes, bytes);
        if lines != 0 {
            add(&self.slot.lines, lines);
        }
    }

    /// Returns the recorder of the task this counter feeds.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }
}
