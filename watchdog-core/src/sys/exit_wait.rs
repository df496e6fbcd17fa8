//! Waiting for another process to end, blocked on its pidfd rather than
//! polling `/proc` on a timer.

use std::time::Duration;

use super::pidfd::Pidfd;

/// Waits until process `pid` ends (exits, so it is at most a zombie) or
/// `timeout` passes; returns true if it has ended, or if there is no such
/// process.
///
/// It blocks in `poll` on a pidfd (Linux 5.3+), so it returns the moment
/// the process ends; works for any process the caller may signal, not only
/// its children, and reaps nothing. Where no pidfd can be had (an older
/// kernel, a process of another user), it waits the timeout out and
/// returns false: the caller looks again, as it would have on a timer.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::sys::wait_exit;
///
/// let mut child = std::process::Command::new("true").spawn().unwrap();
/// assert!(wait_exit(child.id(), Duration::from_secs(10)));
/// child.wait().unwrap();
///
/// let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
/// assert!(!wait_exit(sleeper.id(), Duration::from_millis(10)));
/// sleeper.kill().unwrap();
/// sleeper.wait().unwrap();
/// ```
pub fn wait_exit(pid: u32, timeout: Duration) -> bool {
    if libc::pid_t::try_from(pid).is_err() {
        return true;
    }
    match Pidfd::open(pid) {
        Ok(fd) => fd.wait(timeout).unwrap_or(false),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => true,
        Err(_) => {
            // No pidfd here: wait the timeout out on no descriptor at all.
            let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
            // SAFETY: poll with no descriptors only waits.
            unsafe { libc::poll(std::ptr::null_mut(), 0, ms) };
            false
        }
    }
}
