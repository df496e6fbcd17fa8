//! A sink that signals the watched process group (R3.5, R6.4, R10.3):
//! SIGTERM (then SIGCONT, R8.9) on cancel, SIGKILL on kill, then a bounded confirmation that the
//! group is gone, or a "cleanup unconfirmed" report naming what is left.
//!
//! Reaping is not done here: the runner owns the `Child` and waits on it.
//! [`reap`] is a helper for runners that have no `Child` of their own.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use parking_lot::{Condvar, Mutex};
use watchdog_core::{Action, ActionKind, Delivery, Sink, SinkError, TaskId};

mod group;

use group::{confirm_gone, target};
pub use group::{group_members, reap, wait_group_gone, Reaped};

/// How long a kill waits for the group to disappear by default.
pub const DEFAULT_CONFIRM_WITHIN: Duration = Duration::from_secs(2);

/// The signal a [`KillReport`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupSignal {
    /// The polite stop sent on a cancel action.
    Term,
    /// The forced stop sent on a kill action, after the grace period.
    Kill,
}

impl GroupSignal {
    /// Returns the signal's conventional name, `SIGTERM` or `SIGKILL`.
    pub const fn as_str(self) -> &'static str {
        match self {
            GroupSignal::Term => "SIGTERM",
            GroupSignal::Kill => "SIGKILL",
        }
    }

    fn nix(self) -> Signal {
        match self {
            GroupSignal::Term => Signal::SIGTERM,
            GroupSignal::Kill => Signal::SIGKILL,
        }
    }
}

impl fmt::Display for GroupSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What came of one signal sent to a process group.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KillOutcome {
    /// SIGTERM reached the group; the kill action follows if it lingers.
    Sent,
    /// The group had already exited: nothing was signalled.
    AlreadyGone,
    /// SIGKILL was sent and no live member was left within the bound.
    Confirmed {
        /// How long after the SIGKILL the group was seen gone.
        after: Duration,
    },
    /// SIGKILL was sent but live members were still there at the bound.
    Unconfirmed {
        /// The pids still in the group, as far as `/proc` shows them.
        left: Vec<u32>,
    },
    /// The target was refused before any signal (pid 0 or 1, not a group
    /// leader, stallwarden's own group).
    Refused {
        /// Why, for people.
        reason: String,
    },
    /// The signal could not be sent (permission denied, say).
    Failed {
        /// The OS error.
        error: String,
    },
}

/// One signal the sink sent (or refused to send) and what came of it.
///
/// # Examples
///
/// ```
/// use stallwarden_sinks::process::{GroupSignal, KillOutcome, KillReport};
/// use watchdog_core::TaskId;
///
/// let r = KillReport {
///     task: TaskId::from_raw(1),
///     name: "build".into(),
///     pgid: 4242,
///     signal: GroupSignal::Kill,
///     outcome: KillOutcome::Unconfirmed { left: vec![4243, 4244] },
/// };
/// assert!(r.is_unconfirmed());
/// assert_eq!(
///     r.to_string(),
///     "task build: SIGKILL to process group 4242: cleanup unconfirmed, still running: 4243, 4244"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KillReport {
    /// The task's id.
    pub task: TaskId,
    /// The task's name.
    pub name: Arc<str>,
    /// The process group (its leader's pid).
    pub pgid: u32,
    /// The signal.
    pub signal: GroupSignal,
    /// What came of it.
    pub outcome: KillOutcome,
}

impl KillReport {
    /// Returns true when a kill could not confirm that the group is gone.
    pub fn is_unconfirmed(&self) -> bool {
        matches!(self.outcome, KillOutcome::Unconfirmed { .. })
    }
}

impl fmt::Display for KillReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "task {}: {} to process group {}: ",
            self.name, self.signal, self.pgid
        )?;
        match &self.outcome {
            KillOutcome::Sent => f.write_str("sent"),
            KillOutcome::AlreadyGone => f.write_str("group already gone"),
            KillOutcome::Confirmed { after } => {
                write!(f, "group gone after {} ms", after.as_millis())
            }
            KillOutcome::Unconfirmed { left } if left.is_empty() => {
                f.write_str("cleanup unconfirmed, the group still answers")
            }
            KillOutcome::Unconfirmed { left } => {
                f.write_str("cleanup unconfirmed, still running: ")?;
                for (i, pid) in left.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{pid}")?;
                }
                Ok(())
            }
            KillOutcome::Refused { reason } => write!(f, "refused: {reason}"),
            KillOutcome::Failed { error } => write!(f, "failed: {error}"),
        }
    }
}

/// A sink that sends SIGTERM to a task's process group on cancel and SIGKILL
/// on kill, then confirms the group is gone within a bound (R6.4).
///
/// The task's pid (from [`Guard::start_process`](watchdog_core::Guard::start_process))
/// must be the leader of its own process group: spawn the command with
/// `process_group(0)`. Every outcome is traced and kept as a [`KillReport`]
/// that [`ProcessSink::reports`] returns, so a CLI can print "cleanup
/// unconfirmed". Clones share the reports.
///
/// Safety rules: pid 0, pid 1, pids past `i32::MAX` and stallwarden's own
/// group are never signalled; a live pid that is not the leader of its group
/// is refused (its number was reused, or the command was not spawned in a
/// group of its own). When the leader was already reaped the group is
/// signalled only while it still has members, because Linux does not hand
/// out a pid that is still some group's id. The residual race: if the whole
/// group exits and its id is reused by a new group leader between the check
/// and `killpg`, that new group is signalled. It needs the pid space to wrap
/// around inside a few microseconds and a task whose runner had not yet
/// reported the finish; the core never dispatches an action after a task's
/// `finished` (R3.8), which closes the window for well-behaved runners.
///
/// Reaping is the runner's job (it owns the `Child`); [`reap`] helps
/// runners that have none.
///
/// # Examples
///
/// ```
/// use std::os::unix::process::CommandExt;
/// use std::time::Duration;
/// use stallwarden_sinks::process::{GroupSignal, KillOutcome, ProcessSink};
/// use watchdog_core::{Guard, ManualClock, Outcome, Profile};
///
/// let mut child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
/// let procs = ProcessSink::new();
/// let guard = Guard::builder().clock(ManualClock::new()).sink(procs.clone()).build();
/// let profile = Profile::default().idle(Duration::from_secs(1)).heartbeat_interval(None);
/// let task = guard.start_process("sleep", profile, child.id()).unwrap();
/// guard.advance(Duration::from_secs(1)); // stalled, then cancel: SIGTERM to the group
/// let term = procs.wait_for(|r| r.signal == GroupSignal::Term, Duration::from_secs(10)).unwrap();
/// assert_eq!(term.outcome, KillOutcome::Sent);
/// let status = child.wait().unwrap(); // reaping is the runner's job
/// task.finish(Outcome::Cancelled, status.code(), Some(15)).unwrap();
/// ```
#[derive(Clone)]
pub struct ProcessSink {
    shared: Arc<Shared>,
}

struct Shared {
    confirm_within: Duration,
    reports: Mutex<Vec<KillReport>>,
    arrived: Condvar,
}

impl fmt::Debug for ProcessSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessSink")
            .field("confirm_within", &self.shared.confirm_within)
            .field("reports", &self.shared.reports.lock().len())
            .finish()
    }
}

impl Default for ProcessSink {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessSink {
    /// Creates a sink that confirms kills within [`DEFAULT_CONFIRM_WITHIN`].
    pub fn new() -> Self {
        Self::with_confirm_within(DEFAULT_CONFIRM_WITHIN)
    }

    /// Creates a sink that waits up to `bound` for a killed group to go.
    pub fn with_confirm_within(bound: Duration) -> Self {
        ProcessSink {
            shared: Arc::new(Shared {
                confirm_within: bound,
                reports: Mutex::new(Vec::new()),
                arrived: Condvar::new(),
            }),
        }
    }

    /// Returns every report so far, in the order they were settled.
    pub fn reports(&self) -> Vec<KillReport> {
        self.shared.reports.lock().clone()
    }

    /// Blocks until a report matching `pred` exists or `timeout` passes, and
    /// returns the first match.
    ///
    /// Kill confirmations settle on a thread of their own, so this is how a
    /// caller waits for one.
    pub fn wait_for(
        &self,
        pred: impl Fn(&KillReport) -> bool,
        timeout: Duration,
    ) -> Option<KillReport> {
        let deadline = watchdog_core::instant_after(timeout);
        let mut reports = self.shared.reports.lock();
        loop {
            if let Some(r) = reports.iter().find(|r| pred(r)) {
                return Some(r.clone());
            }
            if self
                .shared
                .arrived
                .wait_until(&mut reports, deadline)
                .timed_out()
            {
                return reports.iter().find(|r| pred(r)).cloned();
            }
        }
    }

    fn settle(&self, report: KillReport) {
        match &report.outcome {
            KillOutcome::Unconfirmed { left } => tracing::error!(
                task = %report.name, pgid = report.pgid, signal = report.signal.as_str(),
                left = ?left, "cleanup unconfirmed"
            ),
            KillOutcome::Refused { reason } => tracing::warn!(
                task = %report.name, pgid = report.pgid, signal = report.signal.as_str(),
                reason = %reason, "signal refused"
            ),
            KillOutcome::Failed { error } => tracing::error!(
                task = %report.name, pgid = report.pgid, signal = report.signal.as_str(),
                error = %error, "signal failed"
            ),
            _ => tracing::info!(
                task = %report.name, pgid = report.pgid, signal = report.signal.as_str(),
                outcome = %report, "process group signalled"
            ),
        }
        self.shared.reports.lock().push(report);
        self.shared.arrived.notify_all();
    }

    fn signal(&self, action: &Action, pid: u32, signal: GroupSignal) {
        let report = |outcome| KillReport {
            task: action.task,
            name: Arc::clone(&action.name),
            pgid: pid,
            signal,
            outcome,
        };
        let pgid = match target(pid) {
            Ok(Some(pgid)) => pgid,
            Ok(None) => return self.settle(report(KillOutcome::AlreadyGone)),
            Err(outcome) => return self.settle(report(outcome)),
        };
        match killpg(pgid, signal.nix()) {
            Ok(()) => {}
            Err(Errno::ESRCH) => return self.settle(report(KillOutcome::AlreadyGone)),
            Err(e) => {
                return self.settle(report(KillOutcome::Failed {
                    error: e.desc().to_owned(),
                }))
            }
        }
        if signal == GroupSignal::Term {
            // A stopped group (SIGSTOP, Ctrl-Z) would hold SIGTERM pending
            // until the SIGKILL after the whole grace period: continue it,
            // so its handler runs now, as GNU `timeout` does (R8.9).
            let _ = killpg(pgid, Signal::SIGCONT);
            return self.settle(report(KillOutcome::Sent));
        }
        // The confirmation polls for up to `confirm_within`: on a thread of
        // its own, so another task's cancel through this sink is not delayed.
        let sink = self.clone();
        let base = report(KillOutcome::Sent);
        let confirm = move || {
            let outcome = confirm_gone(pgid, sink.shared.confirm_within);
            sink.settle(KillReport { outcome, ..base });
        };
        let spawned = std::thread::Builder::new()
            .name("stallwarden-kill-confirm".into())
            .spawn(confirm);
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no thread for kill confirmation; confirming inline");
            let outcome = confirm_gone(pgid, self.shared.confirm_within);
            self.settle(report(outcome));
        }
    }
}

impl Sink for ProcessSink {
    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        let Some(pid) = action.pid else {
            return Ok(()); // not a process task: the token sink handles it
        };
        let signal = match action.kind {
            ActionKind::Cancel { .. } => GroupSignal::Term,
            ActionKind::Kill => GroupSignal::Kill,
            _ => return Ok(()),
        };
        self.signal(action, pid, signal);
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        Delivery::Isolated
    }

    fn name(&self) -> &str {
        "process"
    }
}
