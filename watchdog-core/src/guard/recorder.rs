//! The [`Recorder`]: the record path into a task's own cell (R9.1), and
//! the rare operations that take the scheduler lock.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::cell::CounterSlot;
use crate::clock::{Clock, MonotonicClock, Nanos};
use crate::error::GuardError;
use crate::event::TaskId;
use crate::signal::SignalKind;
use crate::slab::CellRef;
use crate::status::{BackgroundTask, LastCall, Stamp, TaskStatus};
use crate::task::{ChildProbe, Out, Task, VerdictLook};

use super::{Inner, OutputCounter};

/// Records signals for one task; cheap to clone and send to other threads.
///
/// Recording is a synchronous, lock-free store into the task's own cell
/// (R9.1). Operations that change the task's phase (tool calls, pause,
/// extend, trigger) take the guard's lock and are meant for events, not
/// for every byte.
///
/// # Examples
///
/// ```
/// use watchdog_core::{Guard, ManualClock, Profile, SignalKind};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("agent", Profile::default()).unwrap();
/// let rec = task.recorder();
/// std::thread::spawn(move || rec.output(5, 1)).join().unwrap();
/// assert!(task.last_signal(SignalKind::Output).is_some());
/// ```
#[derive(Clone)]
pub struct Recorder {
    /// The task's cell, counted so its slot outlives every recorder.
    pub(super) cell: CellRef,
    pub(super) inner: Arc<Inner>,
    pub(super) id: TaskId,
    /// The task's name, for the error once it has finished and left the
    /// registry (R3.8).
    pub(super) name: Arc<str>,
    /// A copy of the guard's clock when it is the real one, read without a
    /// virtual call on the record path (R9.1).
    pub(super) fast_clock: Option<MonotonicClock>,
    /// `repeat` is in the profile's `renewed-by` (R5.12): a repeat then
    /// renews as the output it was before. Kept here, not in the cell,
    /// which has no room for a ninth stamp.
    pub(super) repeat_renews: bool,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("task", &self.id)
            .field("last_renewal", &self.cell.last_renewal())
            .finish()
    }
}

impl Recorder {
    /// Returns the task's id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// Returns true when signals of `kind` renew this task's budgets (its
    /// profile's `renewed-by`, R2.6), so a source can skip measuring what
    /// would not count (R5.11).
    ///
    /// ```
    /// use watchdog_core::{Guard, KindSet, ManualClock, Profile, SignalKind};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let net = KindSet::DEFAULT_RENEWING.with(SignalKind::Net);
    /// let task = guard.start("dl", Profile::default().renewed_by(net)).unwrap();
    /// assert!(task.recorder().renews(SignalKind::Net));
    /// assert!(!task.recorder().renews(SignalKind::Cpu));
    /// ```
    pub fn renews(&self, kind: SignalKind) -> bool {
        match kind {
            SignalKind::Repeat => self.repeat_renews,
            kind => self.cell.renews(kind),
        }
    }

    /// Records one signal of `kind` now.
    ///
    /// A [`SignalKind::Repeat`] has no stamp of its own: it renews as an
    /// `output` signal when the profile's `renewed-by` holds `repeat`, and
    /// records nothing otherwise (R5.12).
    #[inline]
    pub fn signal(&self, kind: SignalKind) {
        let kind = match kind {
            SignalKind::Repeat if !self.repeat_renews => return,
            SignalKind::Repeat => SignalKind::Output,
            kind => kind,
        };
        // The previous stamp of the kind tells the clock whether its coarse
        // reading can be trusted (R9.5): same cache line as the store.
        let prev = self.cell.last_stamp(kind);
        if self.cell.record(kind, self.stamp(prev)) {
            self.poke();
        }
    }

    /// The clock's stamp for a signal, read without a virtual call on the
    /// real clock.
    #[inline]
    fn stamp(&self, prev: Nanos) -> Nanos {
        match &self.fast_clock {
            Some(clock) => clock.stamp(prev),
            None => self.inner.clock.stamp(prev),
        }
    }

    /// Records output: `bytes` written, of which `lines` newlines (R5.1).
    #[inline]
    pub fn output(&self, bytes: u64, lines: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.cell.bytes.fetch_add(bytes, Relaxed);
        if lines != 0 {
            self.cell.lines.fetch_add(lines, Relaxed);
        }
        self.signal(SignalKind::Output);
    }

    /// Returns the task's judge of repetition (R5.12), made on first use
    /// and shared by every source of the task.
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("wait", Profile::default()).unwrap();
    /// let mut lines = task.recorder().repeats().lines();
    /// lines.feed(b"waiting...\nwaiting...\n");
    /// let r = task.status().unwrap().repeating.unwrap();
    /// assert_eq!((r.shown.as_str(), r.count), ("waiting...", 2));
    /// ```
    pub fn repeats(&self) -> crate::repeat::Repeats {
        let judge = self
            .slow(|t, _, _| Ok(t.judge()))
            // A finished task's sources judge alone: nobody asks any more.
            .unwrap_or_else(|_| crate::repeat::new_judge());
        crate::repeat::Repeats::new(judge, self.clone())
    }

    /// The guard's clock now.
    pub(crate) fn now(&self) -> Nanos {
        self.inner.clock.now()
    }

    /// The task's latest renewal; `Nanos::ZERO` before any.
    pub(crate) fn last_renewal(&self) -> Nanos {
        self.cell.last_renewal()
    }

    /// Returns a counter for one output source (a pipe reader) of this
    /// task: the fastest exact way to record output.
    ///
    /// [`Recorder::output`] may be called from many threads at once, so it
    /// counts with locked read-modify-write instructions. An
    /// `OutputCounter` is used by one thread at a time (it is `Send` but not
    /// `Sync`), so it counts with a plain load and store and records a
    /// signal for little more than a clock read and a store (R9.1). Totals
    /// in status and heartbeats add every counter up.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("cmd", Profile::default()).unwrap();
    /// let stdout = task.output_counter();
    /// let stderr = task.output_counter();
    /// std::thread::spawn(move || stdout.record(10, 1)).join().unwrap();
    /// stderr.record(5, 0);
    /// task.output(1, 1);
    /// let status = task.status().unwrap();
    /// assert_eq!((status.total_bytes, status.total_lines), (16, 2));
    /// ```
    pub fn output_counter(&self) -> OutputCounter {
        let slot = Arc::new(CounterSlot::default());
        // A finished task takes no counter; its counts then go nowhere.
        let _ = self.slow(|t, _, _| {
            t.add_counter(Arc::clone(&slot));
            Ok(())
        });
        OutputCounter {
            recorder: self.clone(),
            slot,
            _single_writer: std::marker::PhantomData,
        }
    }

    /// Records an accepted tool-argument delta (R5.2).
    #[inline]
    pub fn argument_delta(&self) {
        self.signal(SignalKind::ArgumentDelta);
    }

    /// Records a heartbeat: liveness, and progress only if the profile's
    /// `renewed-by` opts in (R2.5, R2.6).
    #[inline]
    pub fn heartbeat(&self) {
        self.signal(SignalKind::Heartbeat);
    }

    /// Records a progress value; it counts only when it rises above every
    /// earlier value of this task (R2.6). Returns whether it did. Negative
    /// and non-finite values never count.
    ///
    /// One task has one progress scale here. A source with several scales
    /// (MCP progress tokens) judges "rose" per scale itself and records
    /// `signal(SignalKind::Progress)` when one does.
    pub fn progress(&self, value: f64) -> bool {
        let rose = self.cell.raise_progress(value);
        if rose {
            self.signal(SignalKind::Progress);
        }
        rose
    }

    /// Records a `tool-call` signal, for the tool-call operations of
    /// `calls.rs` (the set of calls in flight itself is slow state).
    pub(crate) fn tool_signal(&self) {
        self.cell
            .record(SignalKind::ToolCall, self.inner.clock.now());
    }

    /// Stops every budget, the deadline included, until [`Recorder::resume`]
    /// (R2.8). Pausing a paused task does nothing.
    pub fn pause(&self) -> Result<(), GuardError> {
        self.slow(|t, now, _| t.pause(now))
    }

    /// Restarts the budgets where they stopped (R2.8).
    pub fn resume(&self) -> Result<(), GuardError> {
        self.slow(|t, now, _| t.resume(now))
    }

    /// Moves the deadline to at least `by` from now, as systemd's
    /// `EXTEND_TIMEOUT_USEC` (R2.9). Returns the new deadline measured from
    /// the start; refused, not capped, past `max-deadline`.
    pub fn extend(&self, by: Duration) -> Result<Duration, GuardError> {
        self.slow(|t, now, out| t.extend(now, by, out))
    }

    /// Reports the task's own fault: a cancel with `reason` (R2.10).
    pub fn trigger(&self, reason: &str) -> Result<(), GuardError> {
        self.slow(|t, now, out| t.trigger(now, reason, out))
    }

    /// Cancels the task now with `reason`, as if a budget had run out.
    pub fn cancel(&self, reason: &str) -> Result<(), GuardError> {
        self.slow(|t, now, out| t.cancel_by_request(now, reason, out))
    }

    /// Ends startup (`READY=1`): the idle budget runs from now (R2.3).
    pub fn ready(&self) {
        let _ = self.slow(|t, now, _| {
            t.ready(now);
            Ok(())
        });
    }

    /// Sets the task's last step for status and stall events (`STATUS=`).
    pub fn set_step(&self, step: impl Into<String>) {
        let step = step.into();
        let _ = self.slow(|t, _, _| {
            t.set_step(step);
            Ok(())
        });
    }

    /// Attaches a process (group leader) that actions will name.
    pub fn set_pid(&self, pid: u32) {
        let _ = self.slow(|t, _, _| {
            t.set_pid(pid);
            Ok(())
        });
    }

    /// Attaches a cached view of the process's descendants (R5.5).
    pub fn set_children_probe(&self, probe: Arc<dyn ChildProbe>) {
        let _ = self.slow(|t, _, _| {
            t.set_children(probe);
            Ok(())
        });
    }

    /// Attaches a look taken just before each verdict on this task (R8.16,
    /// R3.10): see [`VerdictLook`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use watchdog_core::{Guard, ManualClock, Profile, VerdictLook};
    ///
    /// #[derive(Debug)]
    /// struct Nothing;
    /// impl VerdictLook for Nothing {
    ///     fn before_verdict(&self) {}
    /// }
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("cmd", Profile::default()).unwrap();
    /// task.recorder().set_verdict_look(Arc::new(Nothing));
    /// ```
    pub fn set_verdict_look(&self, look: Arc<dyn VerdictLook>) {
        let _ = self.slow(|t, _, _| {
            t.set_look(look);
            Ok(())
        });
    }

    /// Counts one input that a source refused for `reason`, a static key
    /// `source.reason` (the source's namespace, a dot, the reason in snake
    /// case: `args.empty_delta`, `notify.bad_value`; R10.6); the status
    /// snapshot shows the count per key (R4.2), so a runner can see what
    /// its sources turned away.
    ///
    /// This takes the guard's lock like the other rare calls: it is meant
    /// for refusals, which real streams send a few of, not for every signal.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.recorder().refused("args.empty_delta");
    /// task.recorder().refused("args.empty_delta");
    /// assert_eq!(task.status().unwrap().refused["args.empty_delta"], 2);
    /// ```
    pub fn refused(&self, reason: &'static str) {
        let _ = self.slow(|t, _, _| {
            t.count_refused(reason);
            Ok(())
        });
    }

    /// Replaces the record of background tasks this task launched (R5.6);
    /// while it is non-empty (or `unnamed` is set) the task is `monitoring`.
    pub fn set_background(&self, tasks: Vec<BackgroundTask>, unnamed: bool) {
        let _ = self.slow(|t, _, _| {
            t.set_background(tasks, unnamed);
            Ok(())
        });
    }

    /// Returns the latest tool call, absent until one is observed (R4.1).
    pub fn last_call(&self) -> Option<LastCall> {
        let mut s = self.inner.sched.lock();
        let now = self.inner.clock.now();
        s.task(self.cell.slot())
            .filter(|t| t.id == self.id)
            .and_then(|t| t.last_call(now, &*self.inner.clock))
    }

    /// Returns when a signal of `kind` was last recorded, absent if never
    /// (R4.1). Reads only this task's cell.
    pub fn last_signal(&self, kind: SignalKind) -> Option<Stamp> {
        let t = self.cell.last(kind)?;
        let now = self.inner.clock.now();
        Some(Stamp {
            at: self.inner.clock.wall_at(t),
            age: now.saturating_since(t),
        })
    }

    /// Returns a snapshot of the task, or `None` once it has finished.
    pub fn status(&self) -> Option<TaskStatus> {
        let mut s = self.inner.sched.lock();
        let now = self.inner.clock.now();
        s.task(self.cell.slot())
            .filter(|t| t.id == self.id)
            .map(|t| t.status(now, &*self.inner.clock))
    }

    #[cold]
    fn poke(&self) {
        let _ = self.slow(|_, _, _| Ok(()));
    }

    pub(crate) fn slow<R>(
        &self,
        f: impl FnOnce(&mut Task<'_>, Nanos, &mut Out<'_>) -> Result<R, GuardError>,
    ) -> Result<R, GuardError> {
        self.inner
            .with_task(self.cell.slot(), self.id, f)
            .unwrap_or_else(|| {
                // The task left the registry when it finished (R3.8).
                Err(GuardError::Finished {
                    task: self.name.to_string(),
                    id: self.id,
                })
            })
    }
}
