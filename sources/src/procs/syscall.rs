//! What a thread's blocking call says (R8.13): the parser of
//! `/proc/PID/syscall` and the classification of its calls are the core's
//! ([`watchdog_core::sys`], R10.7), re-exported here where they always
//! were; what is kept here is policy: how much a call says about why a
//! process is silent, and what makes text from the kernel safe for a
//! terminal.

pub use watchdog_core::sys::{classify, epoll_targets, Blocked, Wait};

/// Replaces control characters (an escape sequence in a file name) by
/// their escaped form, so nothing from `/proc` drives a terminal.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::procs::blocked::sanitize;
/// assert_eq!(sanitize("a\x1b[2Jb\n"), "a\\u{1b}[2Jb\\n");
/// ```
pub fn sanitize(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// How much a blocking call says about why a process is silent: a thread
/// in I/O says more than one asleep, which says more than one in a lock.
pub(crate) fn weight(b: &Blocked) -> u8 {
    match b {
        Blocked::Running => 0,
        Blocked::In { nr, .. } if *nr == libc::SYS_futex => 1,
        Blocked::In { nr, .. }
            if *nr == libc::SYS_nanosleep || *nr == libc::SYS_clock_nanosleep =>
        {
            2
        }
        Blocked::In { .. } => 3,
    }
}
