//! Waiting for another process to end, blocked on its pidfd rather than
//! polling `/proc` on a timer.

use std::time::Duration;

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
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return true;
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0) };
    if fd < 0 {
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            return true;
        }
        // No pidfd here: wait the timeout out on no descriptor at all.
        // SAFETY: poll with no descriptors only waits.
        unsafe { libc::poll(std::ptr::null_mut(), 0, ms) };
        return false;
    }
    let fd = fd as libc::c_int;
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ended = loop {
        // SAFETY: one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut p, 1, ms) };
        if rc >= 0 {
            break rc > 0;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break false;
        }
    };
    // SAFETY: `fd` is ours, opened above and closed once.
    unsafe { libc::close(fd) };
    ended
}
