//! Bounded waits on real processes that never sleep blindly: between two
//! looks at a condition the test waits on the watched process's pidfd
//! (`poll` with a timeout), so the wait ends the moment that process does,
//! and every wait has a bound, past which the test fails instead of
//! hanging the suite.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// A pidfd: a descriptor that becomes readable when its process exits.
pub struct PidFd(OwnedFd);

impl PidFd {
    /// Opens a pidfd for `pid`; `None` when there is no such process (it
    /// exited and was reaped).
    pub fn open(pid: u32) -> Option<PidFd> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            assert_eq!(
                err.raw_os_error(),
                Some(libc::ESRCH),
                "pidfd_open({pid}): {err}"
            );
            return None;
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        Some(PidFd(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// Whether the process exits within `timeout` (true at once if it
    /// already has).
    pub fn exited_within(&self, timeout: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        loop {
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut p, 1, ms) };
            if rc >= 0 {
                return rc > 0;
            }
            let err = std::io::Error::last_os_error();
            assert_eq!(err.raw_os_error(), Some(libc::EINTR), "poll: {err}");
        }
    }
}

/// Whether process `pid` exits within `bound` (true if it is gone
/// already). Works for any process, not only the caller's children.
pub fn exits_within(pid: u32, bound: Duration) -> bool {
    PidFd::open(pid).is_none_or(|fd| fd.exited_within(bound))
}

/// Looks at `check` until it gives a value, within `bound`, waiting at
/// most `every` between looks on process `pid` (the one that makes the
/// condition come true, or that would end if it never will). Returns
/// `None` when the bound passes, or when `pid` has ended and one last look
/// still finds nothing.
pub fn until<T>(
    pid: u32,
    bound: Duration,
    every: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let watched = PidFd::open(pid);
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        let left = bound.saturating_sub(start.elapsed());
        if left.is_zero() {
            return None;
        }
        let ended = watched
            .as_ref()
            .is_none_or(|fd| fd.exited_within(every.min(left)));
        if ended {
            return check();
        }
    }
}

/// Waits for `child` to exit within `bound`, on its pidfd; `None` when the
/// bound passes first (the child is left running for the caller to kill).
pub fn child_within(
    child: &mut std::process::Child,
    bound: Duration,
) -> Option<std::process::ExitStatus> {
    let watched = PidFd::open(child.id());
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        let left = bound.saturating_sub(start.elapsed());
        if left.is_zero() {
            return None;
        }
        if let Some(fd) = &watched {
            fd.exited_within(left);
        }
    }
}
