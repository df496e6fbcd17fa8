//! The guard: a registry of tasks, the timer heap, and the deadline driver.
//!
//! Handles record signals into their own cells (see [`crate::cell`]); the
//! scheduler lock is only taken by slow-path operations and by the driver.
//! The driver is a plain OS thread, parked until the earliest due instant:
//! it does not depend on the host's async runtime making progress (R6.3),
//! and it wakes for expiring tasks, not for signals (R9.3). On a virtual
//! clock there is no thread; the test drives time with [`Guard::advance`].

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hashbrown::HashTable;

use crate::builder::{spawn_checked, GuardBuilder, SpawnGate};
use crate::cell::CounterSlot;
use crate::clock::{Clock, ManualClock, MonotonicClock, Nanos};
use crate::dispatch::Dispatcher;
use crate::error::GuardError;
use crate::event::{EventKind, LeftoverAction, Outcome, ProcessName, TaskId};
use crate::loom::heavy_barrier;
use crate::loom::sync::Mutex;
use crate::profile::Profile;
use crate::signal::SignalKind;
use crate::slab::{CellRef, Slab};
use crate::status::{BackgroundTask, LastCall, Stamp, TaskStatus};
use crate::task::{ChildProbe, Life, Out, Task, TaskCtl};
use crate::timers::TimerHeap;

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
    owner: Arc<Owner>,
}

struct Owner {
    inner: Arc<Inner>,
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
                fast_clock: inner.fast_clock.clone(),
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
        {
            let mut s = inner.sched.lock();
            let now = inner.clock.now();
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

#[derive(Default)]
struct Scheduler {
    /// Every live task, by slot.
    slab: Slab,
    /// Slots of live tasks, by the hash of their names: four bytes a task,
    /// where a map keyed by name would hold the name pointer again (R9.3).
    names: HashTable<u32>,
    hasher: RandomState,
    /// One entry per armed task, due instants kept in the cells.
    timers: TimerHeap,
    /// When the driver plans to wake; an earlier due must unpark it.
    planned_wake: Option<Nanos>,
    /// The profile of the last task started, shared with the next task
    /// started with an equal one.
    last_profile: Option<Arc<Profile>>,
}

impl Scheduler {
    /// Returns the slot of the live task named `name`.
    fn find(&self, name: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(name);
        let slab = &self.slab;
        self.names
            .find(hash, |&slot| {
                slab.ctl(slot).is_some_and(|t| &*t.name == name)
            })
            .copied()
    }

    /// Indexes a just inserted task by its name.
    fn add_name(&mut self, slot: u32) {
        let Scheduler {
            slab,
            names,
            hasher,
            ..
        } = self;
        let Some(t) = slab.ctl(slot) else {
            return;
        };
        let hash = hasher.hash_one(&*t.name);
        names.insert_unique(hash, slot, |&s| {
            slab.ctl(s).map_or(0, |t| hasher.hash_one(&*t.name))
        });
    }

    /// Returns a live task, joined with its cell.
    fn task(&mut self, slot: u32) -> Option<Task<'_>> {
        self.slab
            .get_mut(slot)
            .map(|(ctl, cell)| Task { ctl, cell })
    }

    /// Forgets a finished task: its timer, its name and its slow state.
    fn remove(&mut self, slot: u32) {
        self.timers.set(&self.slab, slot, None);
        let Some(t) = self.slab.ctl(slot) else {
            return;
        };
        let hash = self.hasher.hash_one(&*t.name);
        if let Ok(entry) = self.names.find_entry(hash, |&s| s == slot) {
            entry.remove();
        }
        self.slab.remove(slot);
    }
}

pub(crate) struct Inner {
    clock: Arc<dyn Clock>,
    fast_clock: Option<MonotonicClock>,
    manual: Option<ManualClock>,
    sched: Mutex<Scheduler>,
    dispatch: Dispatcher,
    next_id: AtomicU64,
    driver: OnceLock<std::thread::Thread>,
    shutdown: AtomicBool,
}

impl Inner {
    /// Builds the engine and, on a real clock, starts its driver thread;
    /// an error, not a guard that judges nothing, when the thread cannot
    /// start (R10.5).
    pub(crate) fn start(
        clock: Arc<dyn Clock>,
        fast_clock: Option<MonotonicClock>,
        manual: Option<ManualClock>,
        dispatch: Dispatcher,
        gate: Option<SpawnGate>,
    ) -> Result<Guard, GuardError> {
        crate::loom::register_barriers();
        let inner = Arc::new(Inner {
            clock,
            fast_clock,
            manual,
            sched: Mutex::new(Scheduler::default()),
            dispatch,
            next_id: AtomicU64::new(1),
            driver: OnceLock::new(),
            shutdown: AtomicBool::new(false),
        });
        if !inner.clock.is_virtual() {
            const NAME: &str = "stallguard-driver";
            let driver_inner = Arc::clone(&inner);
            let handle = spawn_checked(gate, NAME, || {
                std::thread::Builder::new()
                    .name(NAME.into())
                    .spawn(move || driver_inner.drive())
            })?;
            let _ = inner.driver.set(handle.thread().clone());
        }
        Ok(Guard {
            owner: Arc::new(Owner { inner }),
        })
    }

    fn unpark_driver(&self) {
        if let Some(t) = self.driver.get() {
            t.unpark();
        }
    }

    /// Re-arms one task's timer after its state changed; finished tasks
    /// leave the registry here, so no tick can follow their `finished`.
    fn rearm(&self, s: &mut Scheduler, slot: u32) {
        self.rearm_after(s, slot, Nanos::ZERO);
    }

    /// Like [`Inner::rearm`], but never earlier than `floor`: a timer just
    /// evaluated at `e` re-arms after `e`, so the driver cannot spin even if
    /// a rule forgot to move its own due instant.
    fn rearm_after(&self, s: &mut Scheduler, slot: u32, floor: Nanos) {
        let Some(t) = s.task(slot) else {
            return;
        };
        if t.life == Life::Finished {
            s.remove(slot);
            return;
        }
        let due = t.next_due().map(|d| d.max(floor));
        let armed = Some(s.slab.due(slot).get()).filter(|&d| d != Nanos::MAX);
        if due == armed {
            return;
        }
        s.timers.set(&s.slab, slot, due);
        if let Some(due) = due {
            if s.planned_wake.is_none_or(|w| due < w) {
                s.planned_wake = Some(due);
                self.unpark_driver();
            }
        }
    }

    /// Evaluates every timer due at or before `now`, each at its due
    /// instant, earliest first (ties by slot, so runs are reproducible).
    fn run_due(&self, s: &mut Scheduler, now: Nanos) {
        let mut out = Out::new(&*self.clock);
        let mut raised = Vec::new();
        while let Some((due, slot)) = s.timers.peek(&s.slab) {
            if due > now {
                break;
            }
            let Some(mut t) = s.task(slot) else {
                // Unreachable: removing a task disarms it. Never spin on it.
                s.timers.set(&s.slab, slot, None);
                continue;
            };
            t.evaluate(due, &mut out);
            if std::mem::take(&mut out.raised) {
                raised.push((slot, due));
            }
            // Re-arming moves the entry past `due`, or drops it.
            self.rearm_after(s, slot, Nanos::from_nanos(due.as_nanos() + 1));
        }
        self.absorb_raced(s, raised, &mut out);
        self.dispatch.push(out.items);
    }

    /// The driver's half of the record/stall handshake (see
    /// `TaskCell::record`, R10.5): after a pass raised flags, one heavy
    /// barrier for the whole pass, then every task that raised one looks at
    /// its stamps again, so a renewal that raced the flag is a recovery at
    /// the verdict's instant (R3.3), not one budget later.
    fn absorb_raced(&self, s: &mut Scheduler, raised: Vec<(u32, Nanos)>, out: &mut Out<'_>) {
        if raised.is_empty() {
            return;
        }
        heavy_barrier();
        for (slot, e) in raised {
            if let Some(mut t) = s.task(slot) {
                t.sync(e, out);
            }
            self.rearm_after(s, slot, Nanos::from_nanos(e.as_nanos() + 1));
        }
    }

    /// Runs a slow-path operation on one task at the clock's current reading,
    /// re-arms its timer and delivers what it emitted.
    fn with_task<R>(
        &self,
        slot: u32,
        id: TaskId,
        f: impl FnOnce(&mut Task<'_>, Nanos, &mut Out<'_>) -> R,
    ) -> Option<R> {
        let r = {
            let mut s = self.sched.lock();
            let now = self.clock.now();
            let mut t = s.task(slot).filter(|t| t.id == id)?;
            let mut out = Out::new(&*self.clock);
            t.sync(now, &mut out);
            let r = f(&mut t, now, &mut out);
            // An operation can make a verdict due at once (a tool finish
            // that hands a long silence back to the idle budget): take it
            // now, not back-dated to when it would have been due.
            for _ in 0..4 {
                match t.next_due() {
                    Some(due) if due <= now => t.evaluate(now, &mut out),
                    _ => break,
                }
            }
            if std::mem::take(&mut out.raised) {
                // The driver's half of the handshake, as in `absorb_raced`.
                heavy_barrier();
                t.sync(now, &mut out);
            }
            self.rearm(&mut s, slot);
            self.dispatch.push(out.items);
            r
        };
        self.dispatch.drain();
        Some(r)
    }

    fn drive(self: Arc<Self>) {
        loop {
            if self.shutdown.load(Ordering::SeqCst) {
                return;
            }
            let next = {
                let mut s = self.sched.lock();
                let now = self.clock.now();
                self.run_due(&mut s, now);
                let next = s.timers.peek(&s.slab).map(|(due, _)| due);
                s.planned_wake = next;
                next
            };
            self.dispatch.drain();
            match next {
                // The wait is measured from after the delivery: inline sinks
                // may take a while, and a wait measured from before them
                // would oversleep the next due by as long (R9.3). Waking a
                // little early just loops once more.
                Some(due) => std::thread::park_timeout(due.saturating_since(self.clock.now())),
                None => std::thread::park(),
            }
        }
    }
}

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
    cell: CellRef,
    inner: Arc<Inner>,
    id: TaskId,
    /// A copy of the guard's clock when it is the real one, read without a
    /// virtual call on the record path (R9.1).
    fast_clock: Option<MonotonicClock>,
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
        self.cell.renews(kind)
    }

    /// Records one signal of `kind` now.
    #[inline]
    pub fn signal(&self, kind: SignalKind) {
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

    /// Counts one input that a source refused for `reason`, a static
    /// snake_case name; the status snapshot shows the count per reason
    /// (R4.2), so a runner can see what its stream adapters turned away.
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
    /// task.recorder().refused("empty_delta");
    /// task.recorder().refused("empty_delta");
    /// assert_eq!(task.status().unwrap().refused["empty_delta"], 2);
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
            .unwrap_or_else(|| Err(GuardError::Finished(format!("{}", self.id))))
    }
}

/// Counts one output source of a task with a single writer; see
/// [`Recorder::output_counter`].
pub struct OutputCounter {
    recorder: Recorder,
    slot: Arc<CounterSlot>,
    /// `Send` but not `Sync`: one thread writes at a time, which is what
    /// lets `record` count exactly without a locked instruction.
    _single_writer: std::marker::PhantomData<std::cell::Cell<()>>,
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

    /// Returns the recorder of the task this counter feeds.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
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
    recorder: Recorder,
    guard: Guard,
    finished: AtomicBool,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    // R9.3: the name index and the timer heap hold the live tasks and
    // nothing else, however many have come and gone.
    #[test]
    fn finished_tasks_leave_no_name_or_timer_behind() {
        let guard = Guard::builder().clock(ManualClock::new()).build();
        let inner = &guard.owner.inner;
        for round in 0..3 {
            let tasks: Vec<_> = (0..300)
                .map(|i| {
                    guard
                        .start(format!("t{round}-{i}"), Profile::default())
                        .unwrap()
                })
                .collect();
            {
                let s = inner.sched.lock();
                assert_eq!(
                    (s.names.len(), s.timers.len(), s.slab.len()),
                    (300, 300, 300)
                );
            }
            for (i, t) in tasks.iter().enumerate() {
                if i % 2 == 0 {
                    t.finish_completed();
                }
            }
            {
                let s = inner.sched.lock();
                assert_eq!(
                    (s.names.len(), s.timers.len(), s.slab.len()),
                    (150, 150, 150)
                );
            }
            drop(tasks);
            let s = inner.sched.lock();
            assert_eq!((s.names.len(), s.timers.len(), s.slab.len()), (0, 0, 0));
        }
    }
}
