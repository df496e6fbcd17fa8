//! The process group a [`ProcessSink`](super::ProcessSink) signals: whether
//! it may be signalled, when it is gone, who is in it, and reaping for
//! runners without a `Child` of their own.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgid, getpgrp, getpid, Pid};
use watchdog_core::sys::{proc_root, scan, wait_exit};

use super::KillOutcome;

/// Checks that `pid` names a process group that may be signalled: `Ok(None)`
/// when the group is already gone, `Err` with a refusal when it must not be
/// touched.
pub(super) fn target(pid: u32) -> Result<Option<Pid>, KillOutcome> {
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
            "process group {pid} is stallwarden's own; spawn the command with process_group(0)"
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
/// use stallwarden_sinks::process::{wait_group_gone, KillOutcome};
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
pub(super) fn confirm_gone(pgid: Pid, bound: Duration) -> KillOutcome {
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
/// use stallwarden_sinks::process::group_members;
/// let me = std::process::id();
/// let my_group = nix::unistd::getpgrp().as_raw() as u32;
/// assert!(group_members(my_group).unwrap().contains(&me));
/// ```
pub fn group_members(pgid: u32) -> std::io::Result<Vec<u32>> {
    // The core's one stat scan (R10.6, R10.7): processes that exit while
    // it reads, and lines it refuses, are left out.
    let mut pids: Vec<u32> = scan(proc_root())?
        .into_iter()
        .filter(|s| s.pgrp == pgid && !s.is_dead())
        .map(|s| s.pid)
        .collect();
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
/// use stallwarden_sinks::process::{reap, Reaped};
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
