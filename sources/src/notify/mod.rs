//! The sd_notify heartbeat socket (R5.4).
//!
//! A Unix datagram socket that speaks systemd's notify protocol, so programs
//! that already call `sd_notify(3)` or `systemd-notify` report to one task's
//! [`Recorder`] unchanged. It is served on its own std thread, not on the
//! host's async runtime, so heartbeats still land when that runtime is
//! blocked (R6.3). What the datagrams mean lives in [`Notification`]; what the
//! socket counted lives in [`NotifyStats`].

mod protocol;
mod serve;

use std::fmt;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use watchdog_core::Recorder;

pub use protocol::{Malformed, Notification};
use serve::serve;

/// The largest datagram accepted, in bytes: systemd's own limit (`PIPE_BUF`).
pub const MAX_DATAGRAM: usize = 4096;

/// The longest `STATUS=` text kept as the task's last step, in bytes.
pub const MAX_STATUS: usize = 256;

/// The reason given to the task when a client sends `WATCHDOG=trigger`.
pub const TRIGGER_REASON: &str = "WATCHDOG=trigger";

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
    /// Creating the private directory for the socket failed, or what was
    /// made is not a 0700 directory of this user.
    #[error("notify socket: {0}")]
    TempDir(#[source] watchdog_core::sys::PrivateDirError),
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
/// Malformed datagrams are counted on the task (`notify.` keys, R10.6) and
/// ignored. Dropping the socket stops its thread and removes the socket
/// file (and the directory it made, if any).
///
/// # Examples
///
/// ```
/// use std::os::unix::net::UnixDatagram;
/// use std::time::Duration;
/// use stallwarden_sources::notify::NotifySocket;
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
    /// The task served, for the refusals it counted.
    recorder: Recorder,
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
    /// use stallwarden_sources::notify::NotifySocket;
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
        let serving = recorder.clone();
        let thread = std::thread::Builder::new()
            .name("stallwarden-notify".into())
            .spawn(move || serve(&socket, &woken, &served, &serving))
            .map_err(fail)?;
        Ok(NotifySocket {
            path,
            recorder,
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

    /// Returns the number of malformed datagrams and lines the task
    /// counted, all reasons together (R10.6: the task's `notify.` keys,
    /// which [`NotifySocket::malformed_by_reason`] gives by reason; 0 once
    /// the task finished). Each is counted before its datagram is in
    /// [`NotifySocket::stats`], so after [`NotifySocket::wait_for_datagrams`]
    /// it is there.
    pub fn malformed(&self) -> u64 {
        self.malformed_by_reason().values().sum()
    }

    /// Returns the task's `notify.` refusals by key (R10.6): what every
    /// notify socket of the task turned away, by reason; empty once the
    /// task finished.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::net::UnixDatagram;
    /// use std::time::Duration;
    /// use stallwarden_sources::notify::NotifySocket;
    /// use watchdog_core::{Guard, ManualClock, Profile};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("daemon", Profile::default()).unwrap();
    /// let socket = NotifySocket::bind_temp(task.recorder()).unwrap();
    /// UnixDatagram::unbound().unwrap().send_to(b"WATCHDOG=2", socket.path()).unwrap();
    /// assert!(socket.wait_for_datagrams(1, Duration::from_secs(10)));
    /// assert_eq!(socket.malformed_by_reason()["notify.bad_value"], 1);
    /// assert_eq!(task.status().unwrap().refused["notify.bad_value"], 1);
    /// ```
    pub fn malformed_by_reason(&self) -> std::collections::BTreeMap<&'static str, u64> {
        crate::refusal::refusals(&self.recorder, "notify")
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

/// Makes a fresh directory only its owner can enter, with the core's one
/// helper (R10.6): created 0700, checked a directory of this user.
fn private_dir(parent: &Path) -> Result<PathBuf, NotifyError> {
    watchdog_core::sys::private_dir(parent, "sg-").map_err(NotifyError::TempDir)
}

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
