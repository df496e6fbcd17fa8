//! Process descriptors (no file of `/proc`: the `pidfd_open`,
//! `pidfd_getfd` and `poll` system calls, Linux 5.3+ and 5.6+): [`Pidfd`]
//! names one process for as long as it is held, whatever pid reuse does,
//! becomes readable when that process ends, and can copy one of its
//! descriptors.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A descriptor for one process: readable once it has ended.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::sys::Pidfd;
///
/// let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
/// let pidfd = Pidfd::open(child.id()).unwrap();
/// assert!(!pidfd.wait(Duration::from_millis(10)).unwrap());
/// child.kill().unwrap();
/// assert!(pidfd.wait(Duration::from_secs(10)).unwrap());
/// child.wait().unwrap();
/// ```
#[derive(Debug)]
pub struct Pidfd(OwnedFd);

impl Pidfd {
    /// Opens a descriptor for process `pid`: `ESRCH` when there is no
    /// such process, `ENOSYS` on a kernel without pidfds.
    pub fn open(pid: u32) -> io::Result<Pidfd> {
        let pid = libc::pid_t::try_from(pid)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
        // SAFETY: pidfd_open(2) takes a pid and flags; the result is owned.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        Ok(Pidfd(unsafe { OwnedFd::from_raw_fd(raw as RawFd) }))
    }

    /// Blocks in `poll` until the process ends (it exited, so it is at
    /// most a zombie: nothing is reaped) or `timeout` passes; returns
    /// whether it ended. A signal that interrupts the wait restarts it;
    /// the timeout counts in whole milliseconds, rounded up.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        // Whole milliseconds, rounded up: never back before the timeout.
        let ms =
            libc::c_int::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX);
        let mut p = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd for the duration of the call.
            let rc = unsafe { libc::poll(&mut p, 1, ms) };
            if rc >= 0 {
                return Ok(rc > 0);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Copies the process's descriptor `fd` into this one
    /// (`pidfd_getfd`, Linux 5.6+, the right to `ptrace` it needed): the
    /// copy shares the open file, so closing it closes nothing of theirs.
    pub fn get_fd(&self, fd: RawFd) -> io::Result<OwnedFd> {
        // SAFETY: pidfd_getfd(2) takes a pidfd, a descriptor number and
        // flags; the result is owned.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_getfd, self.0.as_raw_fd(), fd, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(raw as RawFd) })
    }
}

impl AsFd for Pidfd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_such_process_is_esrch_and_a_copy_reads_our_own_pipe() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // Reaped: the pid names nothing now (reuse this fast is unlikely
        // but would only make it succeed; the assertion allows only ESRCH).
        if let Err(e) = Pidfd::open(pid) {
            assert_eq!(e.raw_os_error(), Some(libc::ESRCH));
        }
        let me = Pidfd::open(std::process::id()).unwrap();
        assert!(!me.wait(Duration::ZERO).unwrap());
        match me.get_fd(0) {
            Ok(copy) => assert!(copy.as_raw_fd() >= 0),
            // A kernel before 5.6, or a sandbox refusing it.
            Err(e) => assert!(e.raw_os_error().is_some()),
        }
    }

    // R8.13: a descriptor copied out of a process (here our own) shares
    // its open file: what is written through the copy comes out of the
    // pipe's other end. A descriptor the process does not have is the
    // kernel's EBADF, never a descriptor.
    #[test]
    fn a_copied_descriptor_shares_the_open_file_and_a_missing_one_is_ebadf() {
        use std::io::{Read, Write};
        let (mut reader, writer) = std::io::pipe().unwrap();
        let me = Pidfd::open(std::process::id()).unwrap();
        let copy = me.get_fd(writer.as_raw_fd()).unwrap();
        assert_ne!(copy.as_raw_fd(), writer.as_raw_fd());
        drop(writer);
        std::fs::File::from(copy)
            .write_all(b"via the copy")
            .unwrap();
        let mut got = String::new();
        reader.read_to_string(&mut got).unwrap();
        assert_eq!(got, "via the copy");
        let missing = me.get_fd(-1).unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::EBADF));
    }
}
