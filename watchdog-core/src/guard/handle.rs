//! The [`TaskHandle`]: owns one task and settles it exactly once (R3.8),
//! as `abandoned` when dropped unsettled (R3.9).

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::GuardError;
use crate::event::{EventKind, LeftoverAction, Outcome, ProcessName};

use super::{Guard, Recorder};

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
