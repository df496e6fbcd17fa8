//! A sink that signals the watched process group (R3.5, R6.4, R10.3):
//! SIGTERM (then SIGCONT, R8.9) on cancel, SIGKILL on kill, then a bounded confirmation that the
//! group is gone, or a "cleanup unconfirmed" report naming what is left.
//!
//! Reaping is not done here: the runner owns the `Child` and waits on it.
//! [`reap`] is a helper for runners that have no `Child` of their own.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgid, getpgrp, getpid, Pid};
use parking_lot::{Condvar, Mutex};
use watchdog_core::sys::{wait_exit, ProcStat};
use watchdog_core::{Action, ActionKind, Delivery, Sink, SinkError, TaskId};

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
    /// leader, stallguard's own group).
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
/// use stallguard_sinks::process::{GroupSignal, KillOutcome, KillReport};
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
/// Safety rules: pid 0, pid 1, pids past `i32::MAX` and stallguard's own
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
/// use stallguard_sinks::process::{GroupSignal, KillOutcome, ProcessSink};
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
            .name("stallguard-kill-confirm".into())
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

/// Checks that `pid` names a process group that may be signalled: `Ok(None)`
/// when the group is already gone, `Err` with a refusal when it must not be
/// touched.
fn target(pid: u32) -> Result<Option<Pid>, KillOutcome> {
    let refuse = |reason: String| Err(KillOutcome::Refused { reason });
    if pid < 2 {
        return refuse(format!("pid {pid} is never signalled"));
    }
    let Ok(raw) = i32::try_from(pid) else {
        return refuse(format!("pid {pid} is out of range"));
    };
    let pgid = Pid::from_raw(raw);
    if pgid == getpgrp() || pgid == getpid() {
        return refuse(format!(
            "process group {pid} is stallguard's own; spawn the command with process_group(0)"
        ));
    }
    match getpgid(Some(pgid)) {
        Ok(g) if g == pgid => Ok(Some(pgid)),
        Ok(g) => refuse(format!(
            "pid {pid} is not a process group leader (its group is {g}): \
             it was not spawned in its own group, or its number was reused"
        )),
        // The leader is gone (reaped); its group id cannot be reused while
        // members remain, so a group that still answers is still ours.
        Err(Errno::ESRCH) => match killpg(pgid, None) {
            Ok(()) => Ok(Some(pgid)),
            Err(Errno::ESRCH) => Ok(None),
            Err(e) => Err(KillOutcome::Failed {
                error: e.desc().to_owned(),
            }),
        },
        Err(e) => Err(KillOutcome::Failed {
            error: e.desc().to_owned(),
        }),
    }
}

/// Waits until no live member of process group `pgid` is left, or `bound`
/// passes: `Confirmed` with the time it took, else `Unconfirmed` with the
/// pids still running. Blocks on a live member's pidfd between looks at
/// `/proc` (at least one look every 50 ms).
///
/// # Examples
///
/// ```
/// use std::os::unix::process::CommandExt;
/// use std::time::Duration;
/// use stallguard_sinks::process::{wait_group_gone, KillOutcome};
///
/// let mut child = std::process::Command::new("true").process_group(0).spawn().unwrap();
/// let pgid = child.id();
/// child.wait().unwrap();
/// let gone = wait_group_gone(pgid, Duration::from_secs(5));
/// assert!(matches!(gone, KillOutcome::Confirmed { .. }));
/// ```
pub fn wait_group_gone(pgid: u32, bound: Duration) -> KillOutcome {
    confirm_gone(Pid::from_raw(pgid as i32), bound)
}

/// Waits until no live member of `pgid` is left or `bound` passes.
fn confirm_gone(pgid: Pid, bound: Duration) -> KillOutcome {
    let start = Instant::now();
    loop {
        let gone = match killpg(pgid, None) {
            Err(Errno::ESRCH) => true,
            // Zombies still answer on some kernels: dead, merely unreaped.
            _ => group_members(pgid.as_raw() as u32).is_ok_and(|m| m.is_empty()),
        };
        if gone {
            return KillOutcome::Confirmed {
                after: start.elapsed(),
            };
        }
        if start.elapsed() >= bound {
            return KillOutcome::Unconfirmed {
                left: group_members(pgid.as_raw() as u32).unwrap_or_default(),
            };
        }
        // Block on a live member's end; look again at least every 50 ms,
        // for members that join meanwhile or die as zombies unreaped.
        let left = bound.saturating_sub(start.elapsed());
        match group_members(pgid.as_raw() as u32)
            .ok()
            .and_then(|m| m.first().copied())
        {
            Some(member) => {
                wait_exit(member, left.min(Duration::from_millis(50)));
            }
            // No member could be read (`/proc` refused us) though the group
            // answers: a real group with nothing to block on, so a short
            // pause before the next look.
            None => std::thread::sleep(left.min(Duration::from_millis(5))),
        }
    }
}

/// Returns the pids of the live (not zombie) processes in group `pgid`, by
/// reading `/proc/*/stat`.
///
/// # Examples
///
/// ```
/// use stallguard_sinks::process::group_members;
/// let me = std::process::id();
/// let my_group = nix::unistd::getpgrp().as_raw() as u32;
/// assert!(group_members(my_group).unwrap().contains(&me));
/// ```
pub fn group_members(pgid: u32) -> std::io::Result<Vec<u32>> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process can exit between read_dir and the read: skip it.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The core's one stat parser (R10.6); a line it refuses is skipped.
        if let Ok(s) = ProcStat::parse(stat.as_bytes()) {
            if s.pgrp == pgid && !s.is_dead() {
                pids.push(pid);
            }
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

/// How a reaped child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaped {
    /// It exited with this code.
    Exited(i32),
    /// It died of this signal number.
    Signalled(i32),
}

/// Reaps child `pid` if it has exited, waiting up to `within` for it; returns
/// `Ok(None)` while it still runs.
///
/// For runners that spawned the process without keeping a `Child` (a runner
/// that holds a `Child` must wait on it instead: whichever reaps first wins
/// and the other gets `ECHILD`). Errors name the pid.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallguard_sinks::process::{reap, Reaped};
///
/// let child = std::process::Command::new("true").spawn().unwrap();
/// let pid = child.id();
/// std::mem::forget(child); // a runner without a Child of its own
/// assert_eq!(reap(pid, Duration::from_secs(10)).unwrap(), Some(Reaped::Exited(0)));
/// assert!(reap(pid, Duration::ZERO).is_err()); // already reaped
/// ```
pub fn reap(pid: u32, within: Duration) -> std::io::Result<Option<Reaped>> {
    let fail = |e: Errno| {
        std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!("cannot reap pid {pid}: {}", e.desc()),
        )
    };
    let raw = i32::try_from(pid)
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| fail(Errno::EINVAL))?;
    let start = Instant::now();
    loop {
        match waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(Some(Reaped::Exited(code))),
            Ok(WaitStatus::Signaled(_, sig, _)) => return Ok(Some(Reaped::Signalled(sig as i32))),
            Ok(_) => {} // still running, or stopped/continued: not an end
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(fail(e)),
        }
        if start.elapsed() >= within {
            return Ok(None);
        }
        wait_exit(pid, within.saturating_sub(start.elapsed()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_member_with_a_hostile_name_is_found() {
        // R10.6, R6.4: group_members reads /proc through the core's one stat
        // parser, so a command named to look like the end of its name and
        // more fields (`a) b (c`) is still its group's member.
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("a) b (c");
        std::fs::copy("/bin/sleep", &exe).unwrap();
        let mut child = std::process::Command::new(&exe)
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        // Bounded: until its exec, the child still bears our own name.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap() != "a) b (c\n" {
            assert!(Instant::now() < deadline, "the child never exec'd");
            std::thread::yield_now();
        }
        assert_eq!(group_members(pid).unwrap(), [pid]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(group_members(pid).unwrap(), Vec::<u32>::new());
    }

    fn refusal(pid: u32) -> Option<String> {
        match target(pid) {
            Err(KillOutcome::Refused { reason }) => Some(reason),
            _ => None,
        }
    }

    // R8.6: 0 and 1 are refused for what they are (0 is "my own group" to
    // kill(2), 1 is init), before any look at the process table; 2 and up
    // are looked at (`target` only checks, with signal 0 at most).
    #[test]
    fn refuses_pid_zero_one_and_own_group() {
        for pid in [0, 1] {
            assert_eq!(
                refusal(pid).as_deref(),
                Some(format!("pid {pid} is never signalled").as_str())
            );
        }
        assert!(
            !refusal(2).is_some_and(|r| r.contains("never signalled")),
            "{:?}",
            refusal(2)
        );
        assert!(matches!(target(u32::MAX), Err(KillOutcome::Refused { .. })));
        let own = getpgrp().as_raw() as u32;
        assert!(matches!(target(own), Err(KillOutcome::Refused { .. })));
    }
}
