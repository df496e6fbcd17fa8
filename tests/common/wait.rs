//! Bounded waits on real processes that never sleep blindly: between two
//! looks at a condition the test waits on the watched process's pidfd
//! (`poll` with a timeout), so the wait ends the moment that process does,
//! and every wait has a bound, past which the test fails instead of
//! hanging the suite.

use std::time::{Duration, Instant};

use watchdog_core::sys::wait_exit;

/// Whether process `pid` exits within `bound` (true if it is gone
/// already). Works for any process, not only the caller's children.
pub fn exits_within(pid: u32, bound: Duration) -> bool {
    wait_exit(pid, bound)
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
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        let left = bound.saturating_sub(start.elapsed());
        if left.is_zero() {
            return None;
        }
        if wait_exit(pid, every.min(left)) {
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
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        let left = bound.saturating_sub(start.elapsed());
        if left.is_zero() {
            return None;
        }
        wait_exit(child.id(), left);
    }
}
