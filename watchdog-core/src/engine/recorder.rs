//! The [`Recorder`]: the record path into a task's own cell (R9.1), the
//! rare operations that take the scheduler lock, the tool calls (R5.3,
//! R10.6), and the single-writer [`OutputCounter`] (R5.1, R9.1). Every
//! inherent method of `Recorder` is in this file; `OutputCounter` shares
//! it because each names the other ([`Recorder::output_counter`] makes
//! one, and a counter records through its recorder).

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::driver::Inner;
use crate::engine::repeat::Repeats;
use crate::engine::slab::CellRef;
use crate::state::cell::CounterSlot;
use crate::state::probe::{ChildProbe, VerdictLook};
use crate::state::task::{Out, Task};
use crate::state::window::{call_input, call_result, new_judge};
use crate::vocab::clock::{Clock, MonotonicClock, Nanos};
use crate::vocab::error::{check, shown, CallProblem, GuardError};
use crate::vocab::event::TaskId;
use crate::vocab::signal::SignalKind;
use crate::vocab::status::{BackgroundTask, CallOutcome, LastCall, Stamp, TaskStatus};

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
    pub fn repeats(&self) -> Repeats {
        let judge = self
            .slow(|t, _, _| Ok(t.judge()))
            // A finished task's sources judge alone: nobody asks any more.
            .unwrap_or_else(|_| new_judge());
        Repeats::new(judge, self.cell.clone(), Arc::clone(&self.inner), self.id)
    }

    /// The guard's clock now.
    pub(crate) fn now(&self) -> Nanos {
        self.inner.clock.now()
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

// Tool calls (R5.3, R10.6): every door that reports them lands in these
// methods, and through them in the task's one `Calls` table.
impl Recorder {
    /// Records the start of tool call `id` running tool `name` (R5.3): a
    /// `tool-call` signal, and the execution budget while any is in flight.
    ///
    /// An empty or over-long ([`MAX_CALL_ID`](crate::MAX_CALL_ID)) id or name is refused before
    /// anything is recorded; an id already in flight, or a start past
    /// [`MAX_CALLS_IN_FLIGHT`](crate::MAX_CALLS_IN_FLIGHT), is refused with nothing changed but the
    /// signal.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Phase, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("toolu_1", "bash").unwrap();
    /// assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
    /// let e = task.tool_started("", "bash").unwrap_err();
    /// assert_eq!(e.to_string(), "task `turn`: tool call id is empty");
    /// ```
    pub fn tool_started(&self, id: &str, name: &str) -> Result<(), GuardError> {
        check(id, name).map_err(|problem| self.bad_call(problem))?;
        self.tool_signal();
        self.slow(|t, now, _| t.tool_started(now, id, name, None))
    }

    /// Records the start of tool call `id` running tool `name` on `input`
    /// (its arguments, as the runner has them), for the judgement of
    /// repeated calls (R5.12): a start whose name and input repeat a call
    /// in the task's window is a `repeat` signal, not a `tool-call` one.
    /// Otherwise as [`Recorder::tool_started`].
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{CallOutcome, Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("agent", Profile::default()).unwrap();
    /// for id in ["c1", "c2", "c3"] {
    ///     task.tool_started_with(id, "Bash(cat config.yaml)", br#"{"command":"cat config.yaml"}"#).unwrap();
    ///     task.tool_finished_with(id, CallOutcome::Success, b"port: 8080").unwrap();
    /// }
    /// let r = task.status().unwrap().repeating.unwrap();
    /// assert_eq!(r.to_string(), "Bash(cat config.yaml) returned the same result 3 times in 0s");
    /// ```
    pub fn tool_started_with(&self, id: &str, name: &str, input: &[u8]) -> Result<(), GuardError> {
        check(id, name).map_err(|problem| self.bad_call(problem))?;
        let digest = call_input(name, input);
        let judge = self.slow(|t, _, _| Ok(t.judge()))?;
        let seen = judge.lock().call_started(digest, self.now());
        if seen {
            self.signal(SignalKind::Repeat);
        } else {
            self.tool_signal();
        }
        self.slow(|t, now, _| t.tool_started(now, id, name, Some(digest)))
    }

    /// Records the end of tool call `id` with its `result` (or a digest of
    /// it), for the judgement of repeated calls (R5.12): a call whose
    /// name, input and result repeat one in the task's window is a
    /// `repeat` signal, not a `tool-call` one, and the stall says so
    /// (`Bash(cat config.yaml) returned the same result 8 times`).
    /// Otherwise as [`Recorder::tool_finished`]. See
    /// [`Recorder::tool_started_with`].
    pub fn tool_finished_with(
        &self,
        id: &str,
        outcome: CallOutcome,
        result: &[u8],
    ) -> Result<(), GuardError> {
        if check(id, "-").is_err() {
            return self.slow(|t, _, _| Err(t.not_in_flight(shown(id))));
        }
        let peek = self.slow(|t, _, _| Ok((t.call_digest(id), t.judge())))?;
        let (Some((name, input)), judge) = peek else {
            // As `tool_finished`: nothing changes but the signal.
            self.tool_signal();
            return self.slow(|t, _, _| Err(t.not_in_flight(shown(id))));
        };
        let digest = call_result(
            input.unwrap_or_else(|| call_input(&name, b"")),
            outcome,
            result,
        );
        let seen = judge.lock().call_finished(digest, &name, self.now());
        if seen {
            self.signal(SignalKind::Repeat);
        } else {
            self.tool_signal();
        }
        self.slow(|t, now, _| t.tool_finished(now, id, outcome))
    }

    /// Records the end of tool call `id` (R5.3), whichever door started it;
    /// an id not in flight is an error that changes nothing but the
    /// signal, and names the id cut to [`MAX_CALL_ID`](crate::MAX_CALL_ID) bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{CallOutcome, Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("toolu_1", "bash").unwrap();
    /// task.tool_finished("toolu_1", CallOutcome::Success).unwrap();
    /// assert!(task.tool_finished("toolu_1", CallOutcome::Success).is_err());
    /// ```
    pub fn tool_finished(&self, id: &str, outcome: CallOutcome) -> Result<(), GuardError> {
        if check(id, "-").is_err() {
            // Never in flight: no signal, and the id is cut for the error.
            return self.slow(|t, _, _| Err(t.not_in_flight(shown(id))));
        }
        self.tool_signal();
        self.slow(|t, now, _| t.tool_finished(now, id, outcome))
    }

    /// Finishes every call in flight with `outcome`, as when a turn or a
    /// stream ended without their results; returns how many there were.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{CallOutcome, Guard, ManualClock, Phase, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("a", "bash").unwrap();
    /// task.tool_started("b", "grep").unwrap();
    /// assert_eq!(task.finish_calls(CallOutcome::Cancelled), Ok(2));
    /// assert_eq!(task.status().unwrap().phase, Phase::Idle);
    /// assert_eq!(task.last_call().unwrap().name, "grep");
    /// ```
    pub fn finish_calls(&self, outcome: CallOutcome) -> Result<usize, GuardError> {
        // Like each finish, a `tool-call` signal, before the silence is
        // handed back to the idle budget; none when nothing was in flight.
        if self.calls_in_flight() != 0 {
            self.tool_signal();
        }
        self.slow(|t, now, _| t.finish_calls(now, outcome))
    }

    /// Returns true while tool call `id` is in flight, whichever door
    /// started it.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("toolu_1", "bash").unwrap();
    /// assert!(task.is_call_in_flight("toolu_1"));
    /// assert!(!task.is_call_in_flight("toolu_2"));
    /// ```
    pub fn is_call_in_flight(&self, id: &str) -> bool {
        self.slow(|t, _, _| Ok(t.is_call_in_flight(id)))
            .unwrap_or(false)
    }

    /// Returns how many tool calls are in flight (0 once the task finished).
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("turn", Profile::default()).unwrap();
    /// task.tool_started("toolu_1", "bash").unwrap();
    /// assert_eq!(task.calls_in_flight(), 1);
    /// ```
    pub fn calls_in_flight(&self) -> usize {
        self.slow(|t, _, _| Ok(t.calls_in_flight())).unwrap_or(0)
    }

    fn bad_call(&self, problem: CallProblem) -> GuardError {
        let task = self
            .slow(|t, _, _| Ok(t.name.to_string()))
            .unwrap_or_else(|_| self.id().to_string());
        GuardError::BadCall { task, problem }
    }
}

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
