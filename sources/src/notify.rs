//! The sd_notify heartbeat socket (R5.4).
//!
//! A Unix datagram socket that speaks systemd's notify protocol, so programs
//! that already call `sd_notify(3)` or `systemd-notify` report to one task's
//! [`Recorder`] unchanged. It is served on its own std thread, not on the
//! host's async runtime, so heartbeats still land when that runtime is
//! blocked (R6.3). What the datagrams mean lives in [`Notification`]; what the
//! socket counted lives in [`NotifyStats`].

use std::fmt;
use std::io;
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};
use parking_lot::{Condvar, Mutex};
use watchdog_core::Recorder;

/// The largest datagram accepted, in bytes: systemd's own limit (`PIPE_BUF`).
pub const MAX_DATAGRAM: usize = 4096;

/// The longest `STATUS=` text kept as the task's last step, in bytes.
pub const MAX_STATUS: usize = 256;

/// The reason given to the task when a client sends `WATCHDOG=trigger`.
pub const TRIGGER_REASON: &str = "WATCHDOG=trigger";

/// Linux refuses to pass more than this many descriptors in one message
/// (`SCM_MAX_FD`), so a control buffer this large is never truncated and
/// every descriptor a client sends reaches us, to be closed.
const SCM_MAX_FD: usize = 253;

/// One assignment of the notify protocol, as understood by the socket.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallguard_sources::notify::{Malformed, Notification};
///
/// let parsed = Notification::parse_datagram(b"WATCHDOG=1\nEXTEND_TIMEOUT_USEC=oops\n").unwrap();
/// assert_eq!(parsed, [Ok(Notification::Heartbeat), Err(Malformed::BadValue)]);
/// assert_eq!(
///     Notification::parse_line("EXTEND_TIMEOUT_USEC=1500000"),
///     Ok(Notification::Extend(Duration::from_millis(1500)))
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notification {
    /// `WATCHDOG=1`: a heartbeat (R2.5, R5.4).
    Heartbeat,
    /// `WATCHDOG=trigger`: the task reports its own fault (R2.10).
    Trigger,
    /// `EXTEND_TIMEOUT_USEC=N`: extend the deadline by N µs from now (R2.9).
    Extend(Duration),
    /// `STATUS=text`: the task's last step.
    Status(String),
    /// `READY=1`: startup is over (R2.3).
    Ready,
    /// `BARRIER=1`: the client waits until its passed descriptor is closed.
    Barrier,
    /// Any other well-formed key (`MAINPID`, `RELOADING`, …): ignored.
    Other(String),
}

/// Why a datagram, or one assignment in it, was ignored.
///
/// # Examples
///
/// ```
/// use stallguard_sources::notify::{Malformed, Notification};
///
/// assert_eq!(Notification::parse_datagram(b"\xff\xfe"), Err(Malformed::NotText));
/// assert_eq!(Malformed::NotText.to_string(), "datagram is not UTF-8 text");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Malformed {
    /// The datagram is not UTF-8, or holds a NUL byte.
    #[error("datagram is not UTF-8 text")]
    NotText,
    /// The datagram is longer than [`MAX_DATAGRAM`].
    #[error("datagram is longer than 4096 bytes")]
    Oversize,
    /// The datagram holds no assignment at all.
    #[error("datagram is empty")]
    Empty,
    /// A line has no `=`, or nothing before it.
    #[error("line is not a KEY=VALUE assignment")]
    NoAssignment,
    /// A known key with a value it cannot take (`WATCHDOG=2`, a bad number).
    #[error("value is not valid for its key")]
    BadValue,
    /// The kernel truncated the passed descriptors (cannot happen on Linux,
    /// see `SCM_MAX_FD`); counted so it would not go unnoticed.
    #[error("passed file descriptors were truncated")]
    ControlTruncated,
}

impl Malformed {
    /// Returns the reason as the task's status counts it (`refused`, shown
    /// by `describe`): `notify_` and the reason in snake case (R8.7).
    ///
    /// # Examples
    ///
    /// ```
    /// use stallguard_sources::notify::Malformed;
    /// assert_eq!(Malformed::BadValue.status_key(), "notify_bad_value");
    /// ```
    pub const fn status_key(self) -> &'static str {
        match self {
            Malformed::NotText => "notify_not_text",
            Malformed::Oversize => "notify_oversize",
            Malformed::Empty => "notify_empty",
            Malformed::NoAssignment => "notify_no_assignment",
            Malformed::BadValue => "notify_bad_value",
            Malformed::ControlTruncated => "notify_control_truncated",
        }
    }
}

impl Notification {
    /// Parses one datagram into its assignments, one result per non-empty
    /// line; a datagram that is not text or holds nothing is refused whole.
    pub fn parse_datagram(
        datagram: &[u8],
    ) -> Result<Vec<Result<Notification, Malformed>>, Malformed> {
        if datagram.len() > MAX_DATAGRAM {
            return Err(Malformed::Oversize);
        }
        let text = std::str::from_utf8(datagram).map_err(|_| Malformed::NotText)?;
        if text.contains('\0') {
            return Err(Malformed::NotText);
        }
        let parsed: Vec<_> = text
            .split('\n')
            .filter(|line| !line.is_empty())
            .map(Notification::parse_line)
            .collect();
        if parsed.is_empty() {
            return Err(Malformed::Empty);
        }
        Ok(parsed)
    }

    /// Parses one `KEY=VALUE` line.
    pub fn parse_line(line: &str) -> Result<Notification, Malformed> {
        let Some((key, value)) = line.split_once('=') else {
            return Err(Malformed::NoAssignment);
        };
        match (key, value) {
            ("", _) => Err(Malformed::NoAssignment),
            ("WATCHDOG", "1") => Ok(Notification::Heartbeat),
            ("WATCHDOG", "trigger") => Ok(Notification::Trigger),
            ("READY", "1") => Ok(Notification::Ready),
            ("BARRIER", "1") => Ok(Notification::Barrier),
            ("WATCHDOG" | "READY" | "BARRIER", _) => Err(Malformed::BadValue),
            ("EXTEND_TIMEOUT_USEC", n) => n
                .parse::<u64>()
                .map(|us| Notification::Extend(Duration::from_micros(us)))
                .map_err(|_| Malformed::BadValue),
            ("STATUS", text) => Ok(Notification::Status(bounded_status(text))),
            (other, _) => Ok(Notification::Other(other.to_owned())),
        }
    }
}

/// Cuts a status to [`MAX_STATUS`] bytes on a character boundary and blanks
/// control characters: it ends up in a one-line stderr message (R8.1), where
/// a client's escape sequences have no business.
fn bounded_status(text: &str) -> String {
    let mut end = text.len().min(MAX_STATUS);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end]
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Malformed input seen by a socket, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MalformedCounts {
    /// Datagrams that were not UTF-8 text.
    pub not_text: u64,
    /// Datagrams longer than [`MAX_DATAGRAM`].
    pub oversize: u64,
    /// Datagrams with no assignment.
    pub empty: u64,
    /// Lines that were not `KEY=VALUE`.
    pub no_assignment: u64,
    /// Known keys with values they cannot take.
    pub bad_value: u64,
    /// Datagrams whose passed descriptors were truncated.
    pub control_truncated: u64,
}

impl MalformedCounts {
    /// Returns the number of malformed datagrams and lines, all reasons.
    pub fn total(&self) -> u64 {
        self.not_text
            + self.oversize
            + self.empty
            + self.no_assignment
            + self.bad_value
            + self.control_truncated
    }

    fn count(&mut self, reason: Malformed) {
        let slot = match reason {
            Malformed::NotText => &mut self.not_text,
            Malformed::Oversize => &mut self.oversize,
            Malformed::Empty => &mut self.empty,
            Malformed::NoAssignment => &mut self.no_assignment,
            Malformed::BadValue => &mut self.bad_value,
            Malformed::ControlTruncated => &mut self.control_truncated,
        };
        *slot += 1;
    }
}

/// What a [`NotifySocket`] has received so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotifyStats {
    /// Datagrams received, malformed ones included.
    pub datagrams: u64,
    /// `WATCHDOG=1` heartbeats recorded.
    pub heartbeats: u64,
    /// `WATCHDOG=trigger` faults passed to the task.
    pub triggers: u64,
    /// `EXTEND_TIMEOUT_USEC=` extensions the task accepted.
    pub extensions: u64,
    /// Extensions the task refused (past `max-deadline`, or no deadline).
    pub extensions_refused: u64,
    /// `STATUS=` texts recorded.
    pub statuses: u64,
    /// `READY=1` notifications.
    pub readies: u64,
    /// `BARRIER=1` notifications.
    pub barriers: u64,
    /// Passed file descriptors closed (every one received is closed).
    pub fds_closed: u64,
    /// Well-formed assignments with a key the socket does not use.
    pub ignored: u64,
    /// Malformed datagrams and lines, by reason.
    pub malformed: MalformedCounts,
}

/// Why a notify socket could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotifyError {
    /// Binding the socket at `path` failed (exists already, path too long,
    /// no such directory, …).
    #[error("cannot bind notify socket at {}: {source}", path.display())]
    Bind {
        /// Where.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Restricting the socket file to its owner failed.
    #[error("cannot make notify socket {} owner-only: {source}", path.display())]
    Permissions {
        /// Where.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Creating the private directory for the socket failed.
    #[error("cannot create a private directory for the notify socket under {}: {source}", parent.display())]
    TempDir {
        /// The parent directory tried.
        parent: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Starting the serving thread failed.
    #[error("cannot start the notify socket thread: {0}")]
    Thread(io::Error),
}

/// State shared between the socket's owner and its serving thread.
struct Shared {
    stats: Mutex<NotifyStats>,
    changed: Condvar,
}

/// An sd_notify datagram socket feeding one task's [`Recorder`] (R5.4).
///
/// Set `NOTIFY_SOCKET` to [`NotifySocket::path`] in a child's environment and
/// its `sd_notify` calls become the task's heartbeats, faults, extensions,
/// status and readiness. Every file descriptor a client passes is closed at
/// once, after the datagram's assignments were applied, so a client waiting
/// on `BARRIER=1` is released and knows its earlier datagrams were seen.
/// Malformed datagrams are counted and ignored. Dropping the socket stops its
/// thread and removes the socket file (and the directory it made, if any).
///
/// # Examples
///
/// ```
/// use std::os::unix::net::UnixDatagram;
/// use std::time::Duration;
/// use stallguard_sources::notify::NotifySocket;
/// use watchdog_core::{Guard, ManualClock, Profile, SignalKind};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("daemon", Profile::default()).unwrap();
/// let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
///
/// let client = UnixDatagram::unbound().unwrap();
/// client.send_to(b"STATUS=warming up\nWATCHDOG=1\n", socket.path()).unwrap();
/// assert!(socket.wait_for_datagrams(1, Duration::from_secs(10)));
///
/// assert_eq!(socket.heartbeats(), 1);
/// assert!(task.last_signal(SignalKind::Heartbeat).is_some());
/// assert_eq!(task.status().unwrap().last_step.as_deref(), Some("warming up"));
/// ```
pub struct NotifySocket {
    path: PathBuf,
    /// A directory this socket created for itself, removed on drop.
    own_dir: Option<PathBuf>,
    shared: Arc<Shared>,
    /// Writing one byte here wakes the serving thread to stop.
    wake: UnixDatagram,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for NotifySocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotifySocket")
            .field("path", &self.path)
            .field("stats", &*self.shared.stats.lock())
            .finish()
    }
}

impl NotifySocket {
    /// Binds a socket at `path` (which must not exist), restricts it to its
    /// owner, and serves `recorder` on a dedicated thread.
    ///
    /// The file is made owner-only right after binding; bind inside a
    /// directory only the owner can enter (as [`NotifySocket::bind_temp`]
    /// does) to leave no window at all.
    pub fn bind(path: impl AsRef<Path>, recorder: Recorder) -> Result<NotifySocket, NotifyError> {
        NotifySocket::bind_inner(path.as_ref().to_path_buf(), None, recorder)
    }

    /// Binds a socket named `notify.sock` in a fresh owner-only directory
    /// under the system's temporary directory, and serves `recorder`.
    pub fn bind_temp(recorder: Recorder) -> Result<NotifySocket, NotifyError> {
        NotifySocket::bind_in(std::env::temp_dir(), recorder)
    }

    /// Binds a socket named `notify.sock` in a fresh owner-only directory
    /// under `parent`, and serves `recorder`. Keep `parent` short: a socket
    /// path is limited to about 100 bytes.
    pub fn bind_in(
        parent: impl AsRef<Path>,
        recorder: Recorder,
    ) -> Result<NotifySocket, NotifyError> {
        let dir = private_dir(parent.as_ref())?;
        NotifySocket::bind_inner(dir.join("notify.sock"), Some(dir), recorder)
    }

    /// Binds a socket at `path` (which must not exist) without serving it
    /// yet: datagrams wait in the kernel's queue until
    /// [`PendingNotifySocket::attach`].
    ///
    /// A runner binds first, hands the path to the child it spawns, and
    /// attaches the task's recorder once the task exists (its `started`
    /// event needs the child's pid), so nothing the child sends in its
    /// first instants is lost.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::UnixDatagram;
    /// use std::time::Duration;
    /// use stallguard_sources::notify::NotifySocket;
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let pending = NotifySocket::prepare(dir.path().join("n.sock")).unwrap();
    /// // The child starts and speaks before the task exists.
    /// UnixDatagram::unbound().unwrap().send_to(b"WATCHDOG=1", pending.path()).unwrap();
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("svc", Profile::default()).unwrap();
    /// let socket = pending.attach(task.recorder()).unwrap();
    /// assert!(socket.wait_for_datagrams(1, Duration::from_secs(10)));
    /// assert_eq!(socket.heartbeats(), 1);
    /// ```
    pub fn prepare(path: impl AsRef<Path>) -> Result<PendingNotifySocket, NotifyError> {
        let path = path.as_ref().to_path_buf();
        let socket = bind_private(&path, None)?;
        Ok(PendingNotifySocket {
            path,
            socket: Some(socket),
        })
    }

    fn bind_inner(
        path: PathBuf,
        own_dir: Option<PathBuf>,
        recorder: Recorder,
    ) -> Result<NotifySocket, NotifyError> {
        let socket = bind_private(&path, own_dir.as_deref())?;
        NotifySocket::serve_bound(socket, path, own_dir, recorder)
    }

    fn serve_bound(
        socket: UnixDatagram,
        path: PathBuf,
        own_dir: Option<PathBuf>,
        recorder: Recorder,
    ) -> Result<NotifySocket, NotifyError> {
        let cleanup_dir = |e| {
            if let Some(dir) = &own_dir {
                let _ = std::fs::remove_dir(dir);
            }
            e
        };
        let fail = |source: io::Error| {
            let _ = std::fs::remove_file(&path);
            cleanup_dir(NotifyError::Thread(source))
        };
        let (wake, woken) = UnixDatagram::pair().map_err(fail)?;
        let shared = Arc::new(Shared {
            stats: Mutex::new(NotifyStats::default()),
            changed: Condvar::new(),
        });
        let served = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("stallguard-notify".into())
            .spawn(move || serve(&socket, &woken, &served, &recorder))
            .map_err(fail)?;
        Ok(NotifySocket {
            path,
            own_dir,
            shared,
            wake,
            thread: Some(thread),
        })
    }

    /// Returns the socket's path: the value for a child's `NOTIFY_SOCKET`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns a snapshot of what the socket has received.
    pub fn stats(&self) -> NotifyStats {
        *self.shared.stats.lock()
    }

    /// Returns the number of datagrams received, malformed ones included.
    pub fn datagrams(&self) -> u64 {
        self.stats().datagrams
    }

    /// Returns the number of `WATCHDOG=1` heartbeats recorded.
    pub fn heartbeats(&self) -> u64 {
        self.stats().heartbeats
    }

    /// Returns the number of malformed datagrams and lines ignored, all
    /// reasons together; [`NotifySocket::stats`] has them by reason.
    pub fn malformed(&self) -> u64 {
        self.stats().malformed.total()
    }

    /// Blocks until at least `n` datagrams have been handled, or `timeout`
    /// passes; returns whether they were. For tests and for runners that
    /// must not race a client.
    pub fn wait_for_datagrams(&self, n: u64, timeout: Duration) -> bool {
        let deadline = watchdog_core::instant_after(timeout);
        let mut stats = self.shared.stats.lock();
        while stats.datagrams < n {
            if self
                .shared
                .changed
                .wait_until(&mut stats, deadline)
                .timed_out()
            {
                return stats.datagrams >= n;
            }
        }
        true
    }
}

impl Drop for NotifySocket {
    fn drop(&mut self) {
        // The pair is private and holds at most this byte, so the send
        // cannot block; if it failed the thread would still be parked, so
        // detach it rather than hang the owner.
        let woke = self.wake.send(&[1]).is_ok();
        if let Some(thread) = self.thread.take() {
            if woke {
                let _ = thread.join();
            }
        }
        let _ = std::fs::remove_file(&self.path);
        if let Some(dir) = &self.own_dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Makes a fresh directory only its owner can enter.
fn private_dir(parent: &Path) -> Result<PathBuf, NotifyError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for _ in 0..16 {
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("sg-{}-{seq}-{nanos:x}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(source) => {
                return Err(NotifyError::TempDir {
                    parent: parent.to_path_buf(),
                    source,
                })
            }
        }
    }
    Err(NotifyError::TempDir {
        parent: parent.to_path_buf(),
        source: last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)),
    })
}

/// The serving loop: wait for a datagram or the stop byte, never spinning.
/// Binds `path` and makes it owner-only; on failure removes what it made.
fn bind_private(path: &Path, own_dir: Option<&Path>) -> Result<UnixDatagram, NotifyError> {
    let cleanup_dir = |e| {
        if let Some(dir) = own_dir {
            let _ = std::fs::remove_dir(dir);
        }
        e
    };
    let socket = UnixDatagram::bind(path).map_err(|source| {
        cleanup_dir(NotifyError::Bind {
            path: path.to_path_buf(),
            source,
        })
    })?;
    if let Err(source) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
        let _ = std::fs::remove_file(path);
        return Err(cleanup_dir(NotifyError::Permissions {
            path: path.to_path_buf(),
            source,
        }));
    }
    Ok(socket)
}

/// A bound notify socket not yet serving a task (see
/// [`NotifySocket::prepare`]); dropping it removes the socket file.
#[derive(Debug)]
pub struct PendingNotifySocket {
    path: PathBuf,
    socket: Option<UnixDatagram>,
}

impl PendingNotifySocket {
    /// Returns the socket's path: the value for a child's `NOTIFY_SOCKET`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts serving `recorder`, first draining what queued meanwhile.
    pub fn attach(mut self, recorder: Recorder) -> Result<NotifySocket, NotifyError> {
        let socket = self.socket.take().expect("socket present until attached");
        NotifySocket::serve_bound(socket, std::mem::take(&mut self.path), None, recorder)
    }
}

impl Drop for PendingNotifySocket {
    fn drop(&mut self) {
        if self.socket.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn serve(socket: &UnixDatagram, woken: &UnixDatagram, shared: &Shared, recorder: &Recorder) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut cmsg = nix::cmsg_space!([RawFd; SCM_MAX_FD], libc::ucred);
    loop {
        let mut fds = [
            libc::pollfd {
                fd: socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: woken.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the whole call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            tracing::error!(error = %err, "notify socket: poll failed, no longer serving");
            return;
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents != 0 {
            receive_one(socket, &mut buf, &mut cmsg, shared, recorder);
        }
    }
}

/// Receives and handles one datagram, closing every descriptor it carried.
fn receive_one(
    socket: &UnixDatagram,
    buf: &mut [u8],
    cmsg: &mut [u8],
    shared: &Shared,
    recorder: &Recorder,
) {
    let (bytes, flags, passed) = {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = match recvmsg::<UnixAddr>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut *cmsg),
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => msg,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => return,
            Err(e) => {
                tracing::warn!(error = %e, "notify socket: receive failed");
                return;
            }
        };
        let mut passed = Vec::new();
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(fds) = c {
                    // SAFETY: the kernel just installed these descriptors in
                    // this process for us alone; owning them closes them.
                    passed.extend(
                        fds.into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    );
                }
            }
        }
        (msg.bytes, msg.flags, passed)
    };

    let mut tally = NotifyStats {
        datagrams: 1,
        ..NotifyStats::default()
    };
    if flags.contains(MsgFlags::MSG_CTRUNC) {
        refuse(recorder, &mut tally, Malformed::ControlTruncated);
        tracing::error!("notify socket: passed descriptors were truncated");
    }
    let parsed = if flags.contains(MsgFlags::MSG_TRUNC) {
        Err(Malformed::Oversize)
    } else {
        Notification::parse_datagram(&buf[..bytes])
    };
    match parsed {
        Ok(lines) => {
            for line in lines {
                match line {
                    Ok(n) => apply(n, recorder, &mut tally),
                    Err(reason) => {
                        tracing::debug!(%reason, "notify socket: malformed assignment ignored");
                        refuse(recorder, &mut tally, reason);
                    }
                }
            }
        }
        Err(reason) => {
            tracing::debug!(%reason, bytes, "notify socket: malformed datagram ignored");
            refuse(recorder, &mut tally, reason);
        }
    }
    // Closed only now, after the assignments took effect: a client released
    // from its barrier may rely on everything it sent before being seen.
    tally.fds_closed = passed.len() as u64;
    drop(passed);

    let mut stats = shared.stats.lock();
    merge(&mut stats, &tally);
    drop(stats);
    shared.changed.notify_all();
}

/// Counts a malformed datagram or line in the socket's stats and on the
/// task, where `describe` shows it (R8.7).
fn refuse(recorder: &Recorder, tally: &mut NotifyStats, reason: Malformed) {
    tally.malformed.count(reason);
    recorder.refused(reason.status_key());
}

fn apply(n: Notification, recorder: &Recorder, tally: &mut NotifyStats) {
    match n {
        Notification::Heartbeat => {
            recorder.heartbeat();
            tally.heartbeats += 1;
        }
        Notification::Trigger => {
            tally.triggers += 1;
            if let Err(e) = recorder.trigger(TRIGGER_REASON) {
                tracing::debug!(error = %e, "notify socket: WATCHDOG=trigger not taken");
            }
        }
        Notification::Extend(by) => match recorder.extend(by) {
            Ok(_) => tally.extensions += 1,
            Err(e) => {
                tally.extensions_refused += 1;
                tracing::warn!(error = %e, "notify socket: EXTEND_TIMEOUT_USEC refused");
            }
        },
        Notification::Status(text) => {
            if !text.is_empty() {
                recorder.set_step(text);
            }
            tally.statuses += 1;
        }
        Notification::Ready => {
            recorder.ready();
            tally.readies += 1;
        }
        Notification::Barrier => tally.barriers += 1,
        Notification::Other(_) => tally.ignored += 1,
    }
}

fn merge(into: &mut NotifyStats, from: &NotifyStats) {
    into.datagrams += from.datagrams;
    into.heartbeats += from.heartbeats;
    into.triggers += from.triggers;
    into.extensions += from.extensions;
    into.extensions_refused += from.extensions_refused;
    into.statuses += from.statuses;
    into.readies += from.readies;
    into.barriers += from.barriers;
    into.fds_closed += from.fds_closed;
    into.ignored += from.ignored;
    let (m, f) = (&mut into.malformed, &from.malformed);
    m.not_text += f.not_text;
    m.oversize += f.oversize;
    m.empty += f.empty;
    m.no_assignment += f.no_assignment;
    m.bad_value += f.bad_value;
    m.control_truncated += f.control_truncated;
}
