//! The control server: its limits, the thread that serves a guard, and one
//! connection's request and response (see the module docs of
//! [`crate::control`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use watchdog_core::Guard;

use super::socket_file::{bind_private, check_existing, remove_if_ours};
use super::{answer, io_err, ControlError, Response};
use super::{DEFAULT_IO_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_REQUEST};

/// Limits for a [`ControlServer`]; see the module docs.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden::control::ControlServer;
/// use stallwarden::Guard;
///
/// let dir = tempfile::tempdir().unwrap();
/// let server = ControlServer::builder()
///     .max_connections(16)
///     .io_timeout(Duration::from_secs(1))
///     .bind(dir.path().join("ctl.sock"), Guard::default())
///     .unwrap();
/// assert!(server.path().exists());
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct ControlServerBuilder {
    max_request: usize,
    max_connections: usize,
    io_timeout: Duration,
}

impl Default for ControlServerBuilder {
    fn default() -> Self {
        ControlServerBuilder {
            max_request: DEFAULT_MAX_REQUEST,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            io_timeout: DEFAULT_IO_TIMEOUT,
        }
    }
}

impl ControlServerBuilder {
    /// Sets the longest request line read, newline included (at least 64).
    pub fn max_request_bytes(mut self, n: usize) -> Self {
        self.max_request = n.max(64);
        self
    }

    /// Sets how many connections are held at once (at least 1).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Sets the timeout for reading a request and for writing a response.
    pub fn io_timeout(mut self, d: Duration) -> Self {
        self.io_timeout = d;
        self
    }

    /// Creates the socket at `path` (mode 0600) and starts serving `guard`.
    ///
    /// An existing path is taken over only when it is a socket owned by this
    /// user that nobody listens on (a stale socket from a crashed run); a
    /// symlink, a regular file, a directory, another user's socket or a live
    /// socket is refused with the reason.
    pub fn bind(self, path: impl AsRef<Path>, guard: Guard) -> Result<ControlServer, ControlError> {
        let path = path.as_ref().to_owned();
        check_existing(&path)?;
        let (listener, identity) = bind_private(&path)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io_err(&path, "start the server runtime"))?;
        let listener = {
            let _entered = runtime.enter();
            listener
                .set_nonblocking(true)
                .and_then(|()| UnixListener::from_std(listener))
        };
        let listener = match listener {
            Ok(l) => l,
            Err(e) => {
                remove_if_ours(&path, identity);
                return Err(io_err(&path, "register the listener")(e));
            }
        };
        let stop = CancellationToken::new();
        let served = Served {
            guard,
            limits: self,
            stop: stop.clone(),
        };
        let thread_path = path.clone();
        let thread = std::thread::Builder::new()
            .name("stallwarden-control".into())
            .spawn(move || runtime.block_on(served.accept_loop(listener, &thread_path)));
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                remove_if_ours(&path, identity);
                return Err(io_err(&path, "start the server thread")(e));
            }
        };
        tracing::info!(path = %path.display(), "control socket listening");
        Ok(ControlServer {
            path,
            identity,
            stop,
            thread: Some(thread),
        })
    }
}

/// A running control server; dropping it stops serving and removes the
/// socket file (if it is still the one it created).
///
/// # Examples
///
/// ```
/// use stallwarden::control::ControlServer;
/// use stallwarden::{Guard, Profile};
///
/// let guard = Guard::default();
/// let _task = guard.start("build", Profile::default()).unwrap();
/// let dir = tempfile::tempdir().unwrap();
/// let server = ControlServer::bind(dir.path().join("ctl.sock"), guard.clone()).unwrap();
/// assert!(server.path().exists());
/// drop(server);
/// assert!(!dir.path().join("ctl.sock").exists());
/// ```
pub struct ControlServer {
    path: PathBuf,
    identity: (u64, u64),
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl fmt::Debug for ControlServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlServer")
            .field("path", &self.path)
            .field("stopped", &self.stop.is_cancelled())
            .finish()
    }
}

impl ControlServer {
    /// Creates the socket at `path` with default limits and serves `guard`.
    pub fn bind(path: impl AsRef<Path>, guard: Guard) -> Result<ControlServer, ControlError> {
        Self::builder().bind(path, guard)
    }

    /// Starts building a server with custom limits.
    pub fn builder() -> ControlServerBuilder {
        ControlServerBuilder::default()
    }

    /// Returns the socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            // The loop returns at once on cancel and dropping the runtime
            // drops every connection; nothing in it blocks.
            let _ = thread.join();
        }
        remove_if_ours(&self.path, self.identity);
    }
}

/// What the server thread owns.
struct Served {
    guard: Guard,
    limits: ControlServerBuilder,
    stop: CancellationToken,
}

impl Served {
    async fn accept_loop(self, listener: UnixListener, path: &Path) {
        let served = Arc::new(self);
        // Live connections by accept order, each with a token that evicts it.
        let live: Arc<Mutex<BTreeMap<u64, CancellationToken>>> = Arc::default();
        let mut next_id = 0u64;
        let mut accept_errors = 0u64;
        loop {
            let accepted = tokio::select! {
                () = served.stop.cancelled() => return,
                r = listener.accept() => r,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, most likely: back off rather
                    // than spin, and say so now and then.
                    accept_errors += 1;
                    if accept_errors.is_power_of_two() {
                        tracing::warn!(path = %path.display(), error = %e, count = accept_errors, "control socket accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            let evict = served.stop.child_token();
            {
                let mut live = live.lock();
                while live.len() >= served.limits.max_connections {
                    if let Some((_, oldest)) = live.pop_first() {
                        oldest.cancel();
                    }
                }
                live.insert(next_id, evict.clone());
            }
            let id = next_id;
            next_id += 1;
            let served = Arc::clone(&served);
            let live = Arc::clone(&live);
            tokio::spawn(async move {
                served.connection(stream, &evict).await;
                live.lock().remove(&id);
            });
        }
    }

    async fn connection(&self, stream: UnixStream, evict: &CancellationToken) {
        let evicted = || Response::error("evicted: too many connections").to_line();
        let timeout = self.limits.io_timeout;
        let (reader, mut writer) = stream.into_split();
        let max = self.limits.max_request;
        let mut line = Vec::new();
        let read = async {
            let mut limited = tokio::io::BufReader::new(reader.take(max as u64 + 1));
            limited.read_until(b'\n', &mut line).await
        };
        let response = tokio::select! {
            () = evict.cancelled() => {
                let _ = writer.try_write(&evicted());
                return;
            }
            r = tokio::time::timeout(timeout, read) => match r {
                Err(_) => Response::error(format!(
                    "request timed out after {} ms without a complete line", timeout.as_millis()
                )),
                Ok(Err(_)) => return, // the client went away
                // Reading stops at max + 1 bytes: more than max is too long.
                // A last line cut by EOF rather than a newline is accepted.
                Ok(Ok(_)) if line.len() > max => {
                    Response::error(format!("request larger than {max} bytes"))
                }
                Ok(Ok(_)) => answer(&self.guard, &line),
            },
        };
        let bytes = response.to_line();
        tokio::select! {
            () = evict.cancelled() => {}
            _ = tokio::time::timeout(timeout, writer.write_all(&bytes)) => {}
        }
        let _ = writer.shutdown().await;
    }
}
