//! The guard: a registry of tasks, the timer heap, and the deadline driver.
//!
//! Handles record signals into their own cells (see [`crate::cell`]); the
//! scheduler lock is only taken by slow-path operations and by the driver.
//! The driver is a plain OS thread, parked until the earliest due instant:
//! it does not depend on the host's async runtime making progress (R6.3),
//! and it wakes for expiring tasks, not for signals (R9.3). On a virtual
//! clock there is no thread; the test drives time with [`Guard::advance`].
//!
//! The room is split by idea: this file is the [`Guard`]'s API;
//! `scheduler.rs` the registry (slab, name index, timer heap),
//! `driver.rs` the engine state shared by every handle, the timer passes
//! and the driver thread; `recorder.rs` the [`Recorder`] (the record path,
//! R9.1), `counter.rs` the single-writer [`OutputCounter`], `handle.rs`
//! the [`TaskHandle`] (a task's lifecycle, R3.8, R3.9).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::builder::GuardBuilder;
use crate::clock::Nanos;
use crate::error::GuardError;
use crate::event::TaskId;
use crate::profile::Profile;
use crate::status::TaskStatus;
use crate::task::{Out, TaskCtl};

mod counter;
mod driver;
mod handle;
mod recorder;
mod scheduler;
#[cfg(test)]
mod tests;

pub use counter::OutputCounter;
pub(crate) use driver::Inner;
pub use handle::TaskHandle;
pub use recorder::Recorder;
use scheduler::Scheduler;

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
        let repeat_renews = profile.renewed_by.contains(crate::SignalKind::Repeat);
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
