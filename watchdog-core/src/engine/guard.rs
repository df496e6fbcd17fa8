//! The guard and the handles it gives out: the [`Guard`]'s API, its
//! [`GuardBuilder`], and the [`TaskHandle`] that owns one task and settles
//! it exactly once (R3.8), as `abandoned` when dropped unsettled (R3.9).
//! The three share a file because each names the next: the builder builds
//! a guard, [`Guard::builder`] returns the builder, [`Guard::start`]
//! returns a handle, and [`TaskHandle::guard`] returns the guard.
//!
//! Handles record signals into their own cells (see [`crate::state::cell`]); the
//! scheduler lock is only taken by slow-path operations and by the driver.
//! The driver is a plain OS thread, parked until the earliest due instant:
//! it does not depend on the host's async runtime making progress (R6.3),
//! and it wakes for expiring tasks, not for signals (R9.3). On a virtual
//! clock there is no thread; the test drives time with [`Guard::advance`].
//!
//! The rest of the engine is split by idea: `scheduler.rs` the registry
//! (slab, name index, timer heap), `driver.rs` the engine state shared by
//! every handle, the timer passes and the driver thread; `recorder.rs` the
//! [`Recorder`] (the record path, R9.1) and its single-writer
//! [`OutputCounter`](crate::OutputCounter).

use std::any::Any;
use std::fmt;
use std::io;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::dispatch::Dispatcher;
use crate::engine::driver::Inner;
use crate::engine::recorder::Recorder;
use crate::engine::spawn::SpawnGate;
use crate::state::task::{Out, TaskCtl};
use crate::vocab::clock::{Clock, LaggingClock, ManualClock, MonotonicClock, Nanos};
use crate::vocab::error::GuardError;
use crate::vocab::event::{EventKind, LeftoverAction, Outcome, ProcessName, TaskId};
use crate::vocab::profile::Profile;
use crate::vocab::signal::SignalKind;
use crate::vocab::sink::{AtStall, Sink};
use crate::vocab::status::TaskStatus;

/// The watchdog engine: starts tasks, judges their silence, and dispatches
/// events and actions to sinks.
///
/// Cloning is cheap and shares the engine. The driver stops when the last
/// `Guard` clone and the last [`TaskHandle`] are dropped.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::{Guard, ManualClock, Profile, RecordingSink};
///
/// let rec = RecordingSink::new();
/// let guard = Guard::builder().clock(ManualClock::new()).sink(rec.clone()).build();
/// let task = guard.start("turn", Profile::default().idle(Duration::from_secs(2))).unwrap();
/// guard.advance(Duration::from_secs(1));
/// task.output(12, 1);
/// guard.advance(Duration::from_secs(1)); // renewed at 1 s: not stalled yet
/// assert_eq!(rec.types_for("turn"), ["started"]);
/// guard.advance(Duration::from_secs(1)); // 2 s of silence
/// assert_eq!(rec.types_for("turn"), ["started", "stalled", "cancelling"]);
/// ```
#[derive(Clone)]
pub struct Guard {
    pub(super) owner: Arc<Owner>,
}

pub(super) struct Owner {
    pub(super) inner: Arc<Inner>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        self.inner.unpark_driver();
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.owner.inner.sched.lock();
        f.debug_struct("Guard")
            .field("tasks", &s.slab.len())
            .field("timers", &s.timers.len())
            .field("virtual", &self.owner.inner.clock.is_virtual())
            .finish()
    }
}

/// A guard on the real clock with no sinks.
///
/// # Panics
///
/// As [`GuardBuilder::build`], if its driver thread cannot start.
impl Default for Guard {
    fn default() -> Self {
        Guard::builder().build()
    }
}

impl Guard {
    /// Starts building a guard on the real clock with no sinks.
    pub fn builder() -> GuardBuilder {
        GuardBuilder::new()
    }

    /// Starts watching a task named `name` with `profile`.
    ///
    /// Fails if the profile is invalid or a live task has the same name.
    pub fn start(
        &self,
        name: impl Into<String>,
        profile: Profile,
    ) -> Result<TaskHandle, GuardError> {
        self.start_inner(name.into(), Arc::new(profile), None)
    }

    /// Starts watching a task attached to process `pid` (the leader of its
    /// process group), which cancel and kill actions will name.
    pub fn start_process(
        &self,
        name: impl Into<String>,
        profile: Profile,
        pid: u32,
    ) -> Result<TaskHandle, GuardError> {
        self.start_inner(name.into(), Arc::new(profile), Some(pid))
    }

    fn start_inner(
        &self,
        name: String,
        profile: Arc<Profile>,
        pid: Option<u32>,
    ) -> Result<TaskHandle, GuardError> {
        profile.validate().map_err(|source| GuardError::Profile {
            task: name.clone(),
            source,
        })?;
        let inner = &self.owner.inner;
        let id = TaskId::from_raw(inner.next_id.fetch_add(1, Ordering::Relaxed));
        let name: Arc<str> = name.into();
        let repeat_renews = profile.renewed_by.contains(SignalKind::Repeat);
        let cell = {
            let mut s = inner.sched.lock();
            if s.find(&name).is_some() {
                return Err(GuardError::DuplicateName(name.to_string()));
            }
            let now = inner.clock.now();
            // Tasks started with an equal profile share one allocation:
            // runners start thousands of tasks from a handful of profiles.
            let profile = match &s.last_profile {
                Some(p) if **p == *profile => Arc::clone(p),
                _ => {
                    s.last_profile = Some(Arc::clone(&profile));
                    profile
                }
            };
            let ctl = TaskCtl::new(id, Arc::clone(&name), profile, pid, now);
            let Some((slot, cell)) = s.slab.insert(ctl) else {
                return Err(GuardError::TooManyTasks(s.slab.len()));
            };
            let mut out = Out::new(&*inner.clock);
            if let Some(t) = s.task(slot) {
                t.started(&mut out);
            }
            s.add_name(slot);
            inner.rearm(&mut s, slot);
            inner.dispatch.push(out.items);
            cell
        };
        inner.dispatch.drain();
        Ok(TaskHandle {
            recorder: Recorder {
                cell,
                inner: Arc::clone(inner),
                id,
                name,
                fast_clock: inner.fast_clock.clone(),
                repeat_renews,
            },
            guard: self.clone(),
            finished: AtomicBool::new(false),
        })
    }

    /// Moves a virtual clock forward by `d` and takes every verdict that came
    /// due, each at its own due instant, in order.
    ///
    /// # Panics
    ///
    /// Panics if the guard runs on a real clock: real time cannot be moved.
    pub fn advance(&self, d: Duration) {
        let Some(clock) = &self.owner.inner.manual else {
            panic!("Guard::advance needs a guard built on a ManualClock");
        };
        clock.advance(d);
        self.tick();
    }

    /// Takes every verdict due by the clock's current reading.
    ///
    /// The driver thread does this on a real clock; call it yourself when a
    /// virtual clock was advanced elsewhere.
    pub fn tick(&self) {
        let inner = &self.owner.inner;
        let now = inner.clock.now();
        inner.look_before_verdicts(now);
        {
            let mut s = inner.sched.lock();
            inner.run_due(&mut s, now);
        }
        inner.dispatch.drain();
    }

    /// Returns the clock's current reading.
    pub fn now(&self) -> Nanos {
        self.owner.inner.clock.now()
    }

    /// Returns a snapshot of the live task named `name` (R4.2).
    pub fn status(&self, name: &str) -> Option<TaskStatus> {
        let inner = &self.owner.inner;
        let mut s = inner.sched.lock();
        let slot = s.find(name)?;
        let now = inner.clock.now();
        s.task(slot).map(|t| t.status(now, &*inner.clock))
    }

    /// Returns snapshots of every live task, by start order.
    pub fn statuses(&self) -> Vec<TaskStatus> {
        // Snapshots are taken a bounded batch per lock hold, so listing a
        // hundred thousand tasks never holds the driver off for more than
        // a batch (R9.3); a task that finishes in between is left out.
        const BATCH: usize = 256;
        let inner = &self.owner.inner;
        let mut ids: Vec<(TaskId, u32)> = inner
            .sched
            .lock()
            .slab
            .iter()
            .map(|(slot, t)| (t.id, slot))
            .collect();
        ids.sort_unstable();
        let mut all = Vec::with_capacity(ids.len());
        for batch in ids.chunks(BATCH) {
            let mut s = inner.sched.lock();
            let now = inner.clock.now();
            for &(id, slot) in batch {
                // The slot may hold a newer task by now.
                if let Some(t) = s.task(slot).filter(|t| t.id == id) {
                    all.push(t.status(now, &*inner.clock));
                }
            }
        }
        all
    }

    /// Returns true while any task is live, so a runner can keep the
    /// machine awake (R4.3).
    pub fn is_busy(&self) -> bool {
        self.owner.inner.sched.lock().slab.len() != 0
    }

    /// Cancels the live task named `name`, as if a budget had run out.
    pub fn cancel(&self, name: &str, reason: &str) -> Result<(), GuardError> {
        let inner = &self.owner.inner;
        let unknown = || GuardError::UnknownTask(name.to_owned());
        let (slot, id) = {
            let s = inner.sched.lock();
            let slot = s.find(name).ok_or_else(unknown)?;
            (slot, s.slab.ctl(slot).ok_or_else(unknown)?.id)
        };
        inner
            .with_task(slot, id, |t, now, out| {
                t.cancel_by_request(now, reason, out)
            })
            .unwrap_or_else(|| Err(GuardError::UnknownTask(name.to_owned())))
    }

    /// Waits until every isolated sink has handled everything emitted so
    /// far, or `timeout` passes; false if some sink did not catch up.
    ///
    /// Call it before a process exits so file and socket sinks are complete.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.owner.inner.dispatch.flush(timeout)
    }

    /// Returns how many timer entries the driver holds: one per armed task.
    /// Exposed for tests and benchmarks of the driver's cost.
    pub fn timer_entries(&self) -> usize {
        self.owner.inner.sched.lock().timers.len()
    }
}

/// Builds a [`Guard`].
///
/// # Examples
///
/// ```
/// use watchdog_core::{Guard, ManualClock, RecordingSink};
///
/// let guard = Guard::builder()
///     .clock(ManualClock::new())
///     .sink(RecordingSink::new())
///     .try_build()
///     .expect("no thread to start on a virtual clock with an inline sink");
/// assert!(!guard.is_busy());
/// ```
#[must_use]
pub struct GuardBuilder {
    clock: Arc<dyn Clock>,
    manual: Option<ManualClock>,
    fast_clock: Option<MonotonicClock>,
    sinks: Vec<Arc<dyn Sink>>,
    at_stall: Vec<Arc<dyn AtStall>>,
    gate: Option<SpawnGate>,
}

impl fmt::Debug for GuardBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardBuilder")
            .field("clock", &self.clock)
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

impl GuardBuilder {
    /// A builder on the real clock with no sinks; see [`Guard::builder`].
    pub(crate) fn new() -> Self {
        let clock = MonotonicClock::new();
        GuardBuilder {
            clock: Arc::new(clock.clone()),
            fast_clock: Some(clock),
            manual: None,
            sinks: Vec::new(),
            at_stall: Vec::new(),
            gate: None,
        }
    }

    /// Uses `clock` instead of the real monotonic clock.
    ///
    /// A [`ManualClock`] or a [`LaggingClock`] makes the guard virtual: no
    /// driver thread, time moves with [`Guard::advance`].
    pub fn clock<C: Clock + Any>(mut self, clock: C) -> Self {
        let any = &clock as &dyn Any;
        self.manual = any.downcast_ref::<ManualClock>().cloned().or_else(|| {
            any.downcast_ref::<LaggingClock>()
                .map(|c| c.manual().clone())
        });
        self.fast_clock = (&clock as &dyn Any)
            .downcast_ref::<MonotonicClock>()
            .cloned();
        self.clock = Arc::new(clock);
        self
    }

    /// Adds a sink. Sinks are called in the order added.
    pub fn sink(mut self, sink: impl Sink) -> Self {
        self.sinks.push(Arc::new(sink));
        self
    }

    /// Adds a step taken at each stall verdict before its `stalled` event
    /// reaches any sink, and so before the stop (R8.14): its stacks and
    /// `on-stall` run go into the event. Steps run in the order added, on
    /// the thread that delivers events; each must bound its own time. See
    /// [`AtStall`] for an example.
    pub fn at_stall(mut self, step: impl AtStall) -> Self {
        self.at_stall.push(Arc::new(step));
        self
    }

    /// Adds a shared sink.
    pub fn shared_sink(mut self, sink: Arc<dyn Sink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// For tests of failure: `gate` is called with the name of every
    /// thread the guard is about to start (`stallwarden-driver`,
    /// `stallwarden-sink-NAME`), and an error from it is taken as that
    /// spawn's own.
    #[doc(hidden)]
    pub fn spawn_gate(mut self, gate: fn(&str) -> io::Result<()>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Builds the guard and starts its threads: the driver on a real
    /// clock, one per isolated sink ([`crate::Delivery::Isolated`]).
    ///
    /// Fails with [`GuardError::Thread`] when one of them cannot start:
    /// a guard without its driver would never take a verdict, and a sink
    /// without its thread would queue events forever (R10.5). Whatever had
    /// started by then is stopped.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, GuardError};
    ///
    /// match Guard::builder().try_build() {
    ///     Ok(guard) => assert!(!guard.is_busy()),
    ///     Err(GuardError::Thread { thread, reason }) => {
    ///         eprintln!("no watchdog: could not start {thread}: {reason}")
    ///     }
    ///     Err(e) => unreachable!("{e}"),
    /// }
    /// ```
    pub fn try_build(self) -> Result<Guard, GuardError> {
        let mut dispatch = Dispatcher::new(self.sinks, self.gate)?;
        dispatch.at_stall = self.at_stall;
        let inner = Inner::start(
            self.clock,
            self.fast_clock,
            self.manual,
            dispatch,
            self.gate,
        )?;
        Ok(Guard {
            owner: Arc::new(Owner { inner }),
        })
    }

    /// Builds the guard and starts its threads, as [`GuardBuilder::try_build`].
    ///
    /// # Panics
    ///
    /// Panics, naming the thread and the system's reason, if a thread the
    /// guard needs cannot start, as [`std::thread::spawn`] does: a guard
    /// that cannot watch is not returned. Use
    /// [`GuardBuilder::try_build`] to handle that instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, RecordingSink};
    ///
    /// let guard = Guard::builder()
    ///     .clock(ManualClock::new())
    ///     .sink(RecordingSink::new())
    ///     .build();
    /// assert!(!guard.is_busy());
    /// ```
    pub fn build(self) -> Guard {
        match self.try_build() {
            Ok(guard) => guard,
            Err(e) => panic!("stallwarden: {e}"),
        }
    }
}

/// Owns one watched task: records through [`Recorder`] (it derefs to one)
/// and settles the task once.
///
/// Dropping it without finishing finishes the task as `abandoned` (R3.9).
///
/// # Examples
///
/// ```
/// use watchdog_core::{Guard, ManualClock, Profile, RecordingSink};
///
/// let rec = RecordingSink::new();
/// let guard = Guard::builder().clock(ManualClock::new()).sink(rec.clone()).build();
/// let task = guard.start("job", Profile::default()).unwrap();
/// task.output(10, 1);
/// drop(task);
/// assert_eq!(rec.types_for("job"), ["started", "finished"]);
/// ```
pub struct TaskHandle {
    pub(super) recorder: Recorder,
    pub(super) guard: Guard,
    pub(super) finished: AtomicBool,
}

impl fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("task", &self.recorder.id)
            .field("finished", &self.finished.load(Ordering::Relaxed))
            .finish()
    }
}

impl Deref for TaskHandle {
    type Target = Recorder;
    fn deref(&self) -> &Recorder {
        &self.recorder
    }
}

impl TaskHandle {
    /// Returns a cloneable recorder for other threads and sources.
    pub fn recorder(&self) -> Recorder {
        self.recorder.clone()
    }

    /// Returns the guard this task belongs to.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }

    /// Settles the task with `outcome`; `exit_code` and `signal` describe a
    /// process's end. `finished` is its last event (R3.8). A second call is
    /// an error and emits nothing.
    pub fn finish(
        &self,
        outcome: Outcome,
        exit_code: Option<i32>,
        signal: Option<i32>,
    ) -> Result<(), GuardError> {
        let r = self
            .recorder
            .slow(|t, now, out| t.finish(now, outcome, exit_code, signal, out));
        self.finished.store(true, Ordering::Relaxed);
        r
    }

    /// Emits `leaked`: processes that still held the command's stdout or
    /// stderr `leak-timeout` after it exited (R8.5). Call before `finish`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile, ProcessName, RecordingSink};
    /// let rec = RecordingSink::new();
    /// let guard = Guard::builder().clock(ManualClock::new()).sink(rec.clone()).build();
    /// let task = guard.start("job", Profile::default()).unwrap();
    /// task.leaked(vec![ProcessName { pid: 7, name: "tee".into() }]).unwrap();
    /// task.finish_completed();
    /// assert_eq!(rec.types_for("job"), ["started", "leaked", "finished"]);
    /// ```
    pub fn leaked(&self, processes: Vec<ProcessName>) -> Result<(), GuardError> {
        self.recorder
            .slow(|t, now, out| t.report_processes(now, EventKind::Leaked { processes }, out))
    }

    /// Emits `leftover`: processes of the command's tree still running after
    /// it ended, and whether they were stopped or kept (R8.6). Call before
    /// `finish`.
    ///
    /// # Examples
    ///
    /// ```
    /// use watchdog_core::{Guard, LeftoverAction, ManualClock, Profile, ProcessName, RecordingSink};
    /// let rec = RecordingSink::new();
    /// let guard = Guard::builder().clock(ManualClock::new()).sink(rec.clone()).build();
    /// let task = guard.start("job", Profile::default()).unwrap();
    /// let daemon = ProcessName { pid: 7, name: "sleep".into() };
    /// task.leftover(LeftoverAction::Killed, vec![daemon]).unwrap();
    /// task.finish_completed();
    /// assert_eq!(rec.types_for("job"), ["started", "leftover", "finished"]);
    /// ```
    pub fn leftover(
        &self,
        action: LeftoverAction,
        processes: Vec<ProcessName>,
    ) -> Result<(), GuardError> {
        self.recorder.slow(|t, now, out| {
            t.report_processes(now, EventKind::Leftover { action, processes }, out)
        })
    }

    /// Emits `restarted`: the runner started the work of this task again
    /// after a stall stopped it (R8.15), the `restart`-th time, after a
    /// backoff of `delay`; `last_stall` is the stall that stopped the run
    /// before. Call right after the new task's start; its snapshot shows
    /// the count and the stall.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use watchdog_core::{Guard, ManualClock, Profile, RecordingSink};
    /// let rec = RecordingSink::new();
    /// let guard = Guard::builder().clock(ManualClock::new()).sink(rec.clone()).build();
    /// let task = guard.start("worker", Profile::default()).unwrap();
    /// task.restarted(2, Duration::from_secs(2), Some("idle budget 5s exceeded".into())).unwrap();
    /// let status = task.status().unwrap();
    /// assert_eq!((status.restarts, status.last_stall.as_deref()), (2, Some("idle budget 5s exceeded")));
    /// task.finish_completed();
    /// assert_eq!(rec.types_for("worker"), ["started", "restarted", "finished"]);
    /// ```
    pub fn restarted(
        &self,
        restart: u32,
        delay: Duration,
        last_stall: Option<String>,
    ) -> Result<(), GuardError> {
        self.recorder
            .slow(|t, now, out| t.restarted(now, restart, delay, last_stall, out))
    }

    /// Settles the task as completed.
    pub fn finish_completed(&self) {
        let _ = self.finish(Outcome::Completed, None, None);
    }

    /// Settles the task as failed.
    pub fn finish_failed(&self) {
        let _ = self.finish(Outcome::Failed, None, None);
    }
}

impl Drop for TaskHandle {
    fn drop(&mut self) {
        if !self.finished.load(Ordering::Relaxed) {
            let _ = self.finish(Outcome::Abandoned, None, None);
        }
    }
}
