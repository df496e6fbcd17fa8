//! `--pty` (R8.11): the command's stdout and stderr are the slave side of a
//! pseudo-terminal, so `isatty(1)` is true and runtimes that buffer a pipe
//! (Python, C stdio) flush per line, as on a terminal. The master side is
//! read by the pumps as a pipe would be: counted as output, copied byte for
//! byte. When the last holder of the slave closes it, the master's read
//! fails with EIO: the pump takes that as the end of the output.
//!
//! - Output post-processing is off (`OPOST`): no `\r` added before `\n`,
//!   no tab expansion; the bytes are the command's. Echo is off too:
//!   nothing is ever typed into this terminal.
//! - The window size is stallwarden's terminal's (stdout, stderr or stdin,
//!   the first that is one), copied at the start and again whenever it
//!   changes (SIGWINCH, and a look on the run loop's tick, since the
//!   command's group gets the terminal's SIGWINCH itself while it holds
//!   the terminal): the new size is set on the pty and SIGWINCH is sent to
//!   the command's group. Without a terminal the size is 0x0, which
//!   programs read as "unknown".
//! - The pty is NOT the command's controlling terminal. Making it one needs
//!   a new session (`setsid`), which would take the command out of
//!   stallwarden's session: the terminal hand-over and Ctrl-Z (R8.1, R2.8)
//!   work on the user's terminal and need the command's group in
//!   stallwarden's session. So stdin stays the user's terminal (or whatever
//!   it was), `/dev/tty` stays the user's terminal, and job-control signals
//!   come from there as without `--pty`. The slave is opened with
//!   `O_NOCTTY`, so neither stallwarden nor the command acquires it.

use std::fs::File;
use std::io;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};

/// Marks a leak key (src/cli/leaks.rs) as a pty slave's device number, to
/// tell it from a pipe's inode.
pub(crate) const PTY_KEY: u64 = 1 << 63;

/// One pseudo-terminal: the master kept by stallwarden, the slave handed
/// to the command once.
pub(crate) struct Pty {
    /// Shared by the pump's reader, which closes it when done (so the
    /// command's next write fails, R8.10), and the window-size updates.
    master: Master,
    slave: Option<OwnedFd>,
    rdev: u64,
}

impl Pty {
    /// Opens a pty with output post-processing and echo off, sized as
    /// stallwarden's terminal if it has one.
    pub(crate) fn open() -> io::Result<Pty> {
        let size = our_size();
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: the pointers are to live locals; a null name, termios and
        // (when there is no terminal) window size are allowed.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                size.as_ref()
                    .map_or(std::ptr::null(), |w| w as *const libc::winsize),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: openpty returned two fresh descriptors that we now own.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        for fd in [&master, &slave] {
            // The command gets the slave through dup2 (which clears the
            // flag on its copy); nothing else it starts may inherit either.
            // SAFETY: plain fcntl on descriptors we own.
            if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: `t` is a valid place for tcgetattr to write.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(slave.as_raw_fd(), &mut t) != 0 {
                return Err(io::Error::last_os_error());
            }
            t.c_oflag &= !libc::OPOST;
            t.c_lflag &= !(libc::ECHO | libc::ECHONL);
            if libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let rdev = File::from(slave.try_clone()?).metadata()?.rdev();
        Ok(Pty {
            master: Arc::new(Mutex::new(Some(master))),
            slave: Some(slave),
            rdev,
        })
    }

    /// The slave side, for the command (once: stallwarden must not keep it
    /// open, or the master never sees the end).
    pub(crate) fn take_slave(&mut self) -> io::Result<OwnedFd> {
        self.slave
            .take()
            .ok_or_else(|| io::Error::other("the pty's slave was already handed out"))
    }

    /// The reader of the master side, for a pump; dropping it closes the
    /// master: the command's writes then fail (EIO; a pty has no SIGPIPE).
    pub(crate) fn reader(&self) -> MasterReader {
        let fd = lock(&self.master).as_ref().map_or(-1, AsRawFd::as_raw_fd);
        MasterReader {
            master: Arc::clone(&self.master),
            fd,
        }
    }

    /// The key by which the leak check finds holders of the slave.
    pub(crate) fn leak_key(&self) -> u64 {
        self.rdev | PTY_KEY
    }

    /// Sets the window size.
    fn resize(&self, size: &libc::winsize) {
        if let Some(fd) = lock(&self.master).as_ref() {
            // SAFETY: TIOCSWINSZ reads a winsize from a valid pointer.
            unsafe {
                libc::ioctl(
                    fd.as_raw_fd(),
                    libc::TIOCSWINSZ,
                    size as *const libc::winsize,
                );
            }
        }
    }
}

type Master = Arc<Mutex<Option<OwnedFd>>>;

fn lock(m: &Master) -> std::sync::MutexGuard<'_, Option<OwnedFd>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads the master side of a [`Pty`]; closes it when dropped. Only this
/// reader closes the descriptor, so its reads never see it closed.
pub(crate) struct MasterReader {
    master: Master,
    fd: libc::c_int,
}

impl Read for MasterReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `fd` stays open until this reader is dropped; `buf` is
        // valid for `buf.len()` bytes.
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }
}

impl std::os::fd::AsRawFd for MasterReader {
    fn as_raw_fd(&self) -> libc::c_int {
        self.fd
    }
}

impl Drop for MasterReader {
    fn drop(&mut self) {
        lock(&self.master).take();
    }
}

/// Follows stallwarden's terminal's size onto the ptys.
#[derive(Debug, Default)]
pub(crate) struct Sizes {
    last: Option<(u16, u16)>,
}

impl Sizes {
    /// Starts from the size the ptys were opened with.
    pub(crate) fn new() -> Sizes {
        Sizes {
            last: our_size().map(|w| (w.ws_row, w.ws_col)),
        }
    }

    /// If stallwarden's terminal changed size since the last look, sets the
    /// new size on `ptys` and sends SIGWINCH to the command's group `pgid`.
    pub(crate) fn follow(&mut self, ptys: &[&Pty], pgid: u32) {
        let Some(size) = our_size() else { return };
        let now = Some((size.ws_row, size.ws_col));
        if ptys.is_empty() || now == self.last {
            return;
        }
        self.last = now;
        for p in ptys {
            p.resize(&size);
        }
        if let Ok(pgid) = libc::pid_t::try_from(pgid) {
            // SAFETY: killpg has no memory preconditions.
            unsafe {
                libc::killpg(pgid, libc::SIGWINCH);
            }
        }
    }
}

/// The window size of stallwarden's terminal: stdout's, stderr's or
/// stdin's, the first that is a terminal.
fn our_size() -> Option<libc::winsize> {
    [libc::STDOUT_FILENO, libc::STDERR_FILENO, libc::STDIN_FILENO]
        .into_iter()
        .find_map(|fd| {
            // SAFETY: `w` is a valid place for TIOCGWINSZ to write.
            unsafe {
                let mut w: libc::winsize = std::mem::zeroed();
                (libc::ioctl(fd, libc::TIOCGWINSZ, &mut w) == 0).then_some(w)
            }
        })
}
