//! Whether the user may be typing on the terminal the command holds (R8.4
//! with R8.1): the live status line is drawn on the cursor's line, so
//! while the command waits for the user, a redraw would land in the middle
//! of what they type.
//!
//! The terminal's own state cannot tell (a half-typed line is in the line
//! discipline's buffer, which `TIOCINQ` does not count before its newline),
//! so this looks at the readers instead, as `ps` and `fuser` do: each
//! process of the terminal's foreground group is asked, through
//! `/proc/PID/syscall`, what it is blocked in. A `read` of the terminal, or
//! a wait (`epoll`, `select`, `poll`) that may include it, means the
//! command is waiting for input. A process that cannot be inspected counts
//! as waiting: the line is a convenience, an interleaved prompt is a defect.

use std::os::unix::fs::{FileTypeExt, MetadataExt};

// The one parser of `/proc/PID/syscall` (R8.13) is the core's `sys` (R10.7).
use stallwarden::sys::{self, classify, epoll_targets, Blocked, Wait};

/// `/dev/tty`, the alias of every process's controlling terminal
/// (character device 5, 0), which `getpass` and `ssh` open to prompt.
const DEV_TTY: u64 = 5 << 8;

/// Whether the terminal on `fd` holds typed input no one has read yet
/// (TIOCINQ): in canonical mode a whole line (the user pressed Enter, so
/// the cursor left the status line's row), in raw mode any key. The live
/// status line then stays as it is (R8.11).
pub(crate) fn input_queued(fd: libc::c_int) -> bool {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCINQ writes one int to a valid pointer.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCINQ, &mut n) };
    rc == 0 && n > 0
}

/// Whether process `pid`'s descriptor `fd` is the terminal `tty` (its
/// device number) or `/dev/tty`.
pub(crate) fn is_terminal(pid: u32, fd: u64, tty: u64) -> bool {
    sys::fd_metadata(sys::proc_root(), pid, fd)
        .is_ok_and(|m| m.file_type().is_char_device() && (m.rdev() == tty || m.rdev() == DEV_TTY))
}

/// The descriptors process `pid` has open, in no order.
fn open_fds(pid: u32) -> Vec<u64> {
    sys::open_fds(sys::proc_root(), pid)
}

/// What one thread waits on, as far as its descriptors go (R8.13).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Waits {
    /// Blocked until one of these descriptors of its process is ready: a
    /// `read` of one, the targets of an `epoll`, the open descriptors a
    /// `select` or `poll` may name.
    On(Vec<u64>),
    /// On a CPU (or blocked outside a system call).
    Running,
    /// Blocked in a call that waits on no descriptor (a lock, a sleep, a
    /// child), or gone.
    Nothing,
    /// Its state could not be read (permissions, a kernel without
    /// `/proc/PID/syscall`).
    Unknown,
}

/// The threads of process `pid` whose `syscall` files are read: each of
/// its threads; none when it is gone; its own file alone (`None`) when its
/// threads cannot be listed.
fn threads(pid: u32) -> Vec<Option<u32>> {
    match sys::thread_ids(sys::proc_root(), pid) {
        Ok(tids) => tids.into_iter().map(Some).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(_) => vec![None],
    }
}

/// What each thread of process `pid` waits on (none when it is gone).
pub(crate) fn thread_waits(pid: u32) -> Vec<Waits> {
    threads(pid)
        .into_iter()
        .map(|tid| thread_wait(pid, tid))
        .collect()
}

/// Whether process `pid` is blocked waiting for input that may come from
/// the terminal `tty` (its device number), in any of its threads (a
/// runtime may read stdin on a worker thread while the main one parks). A
/// process that is gone is not; one whose state cannot be read is taken
/// to be.
pub(crate) fn waits_on_terminal(pid: u32, tty: u64) -> bool {
    thread_waits(pid).iter().any(|w| match w {
        Waits::On(fds) => fds.iter().any(|&fd| is_terminal(pid, fd, tty)),
        Waits::Running | Waits::Nothing => false,
        Waits::Unknown => true,
    })
}

/// What thread `tid` of process `pid` (its own file when `None`) waits
/// on.
fn thread_wait(pid: u32, tid: Option<u32>) -> Waits {
    let blocked = match sys::thread_syscall(sys::proc_root(), pid, tid) {
        Ok(Some(blocked)) => blocked,
        Ok(None) => return Waits::Unknown,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Waits::Nothing,
        Err(_) => return Waits::Unknown,
    };
    let Blocked::In { nr, args } = blocked else {
        return Waits::Running;
    };
    // Descriptors are the process's, shared by its threads.
    match classify(nr, &args) {
        Wait::Reads(fd) => Waits::On(vec![fd]),
        Wait::Epoll(epfd) => sys::fdinfo(sys::proc_root(), pid, epfd)
            .map_or(Waits::Unknown, |info| Waits::On(epoll_targets(&info))),
        Wait::Below(nfds) => Waits::On(open_fds(pid).into_iter().filter(|&fd| fd < nfds).collect()),
        Wait::Any => Waits::On(open_fds(pid)),
        Wait::Other => Waits::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    // A real process blocked reading a pipe waits, but not on a terminal;
    // a process that is gone waits on nothing.
    #[test]
    fn a_reader_of_a_pipe_is_not_waiting_on_the_terminal() {
        use std::process::{Command, Stdio};
        let mut cat = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = cat.id();
        let pipe = fs::metadata(format!("/proc/{pid}/fd/0")).unwrap().rdev();
        // Whatever the pipe's device number, a tty of that number does not
        // make a pipe a terminal.
        let start = std::time::Instant::now();
        loop {
            let text = fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
            if let Some(Blocked::In { nr, args }) = Blocked::parse(&text) {
                if classify(nr, &args) == Wait::Reads(0) {
                    break;
                }
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "cat never blocked in read: {text:?}"
            );
            // A real process is being waited on.
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!waits_on_terminal(pid, pipe));
        cat.kill().unwrap();
        cat.wait().unwrap();
        assert!(
            !waits_on_terminal(pid, pipe),
            "a gone process waits on nothing"
        );
    }
}
