//! The control socket (R6.5): list and describe task snapshots (R4.2) as JSON
//! over a Unix domain socket only its owner can use, and the client functions
//! the CLI reads it with. It is not a sink: it reads the guard, never acts.
//!
//! # Protocol
//!
//! One request per connection: the client sends one line of JSON,
//! `{"op":"list"}` or `{"op":"describe","task":"NAME"}`, and reads one line
//! back, `{"ok":true,"tasks":[...]}`, `{"ok":true,"task":{...}}` or
//! `{"ok":false,"error":"..."}`; then the server closes the connection. One
//! request per connection keeps a connection's life short and bounded, which
//! is what the limits below rely on.
//!
//! # Limits
//!
//! The server runs on a thread of its own with its own single-threaded tokio
//! runtime, so it neither needs nor disturbs the host's runtime. A request
//! longer than [`DEFAULT_MAX_REQUEST`] bytes gets an error response; reading
//! the request and writing the response each have a timeout; at most
//! [`DEFAULT_MAX_CONNECTIONS`] connections are held, and when a new one
//! arrives at the cap the *oldest* is told "evicted" and closed. Evicting the
//! oldest (rather than refusing the newest) means clients that open
//! connections and never finish a request cannot lock out a well-behaved
//! client, which sends its request as soon as it connects. Snapshots are
//! owned values taken before anything is written, so no guard lock is held
//! while a socket is written.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use watchdog_core::{Guard, TaskStatus};

/// The longest request line the server reads, newline included.
pub const DEFAULT_MAX_REQUEST: usize = 64 * 1024;
/// The most connections the server holds at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 128;
/// How long the server waits for a request, and for a response to be taken.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest response line a client reads.
pub const MAX_RESPONSE: usize = 64 * 1024 * 1024;

/// An error binding or talking to a control socket; every message names the
/// socket's path.
///
/// # Examples
///
/// ```
/// use stallguard_sinks::control::client;
/// let err = client::list("/nonexistent/stallguard.sock").unwrap_err();
/// assert!(err.to_string().contains("/nonexistent/stallguard.sock"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The path exists and is not something the server may take over.
    #[error("control socket {}: refusing to use it: {why}", path.display())]
    Refused {
        /// The socket path.
        path: PathBuf,
        /// Why it was refused.
        why: String,
    },
    /// An I/O operation on the socket failed.
    #[error("control socket {}: {action}: {source}", path.display())]
    Io {
        /// The socket path.
        path: PathBuf,
        /// What was being done (`connect`, `bind`, `read response`, ...).
        action: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The server's answer was not the protocol's.
    #[error("control socket {}: bad response: {detail}", path.display())]
    Protocol {
        /// The socket path.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// The server answered with an error.
    #[error("control socket {}: {message}", path.display())]
    Server {
        /// The socket path.
        path: PathBuf,
        /// The server's message.
        message: String,
    },
}

fn io_err(path: &Path, action: &'static str) -> impl FnOnce(std::io::Error) -> ControlError {
    let path = path.to_owned();
    move |source| ControlError::Io {
        path,
        action,
        source,
    }
}

/// A request line.
#[derive(Debug, Deserialize, Serialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum Request {
    // A struct variant, not a unit one: serde ignores unknown fields beside
    // the tag of a unit variant even with `deny_unknown_fields`.
    List {},
    Describe { task: String },
}

/// A response line; `tasks` and `task` hold owned snapshots.
#[derive(Serialize)]
#[serde(untagged)]
enum Response {
    List { ok: bool, tasks: Vec<TaskStatus> },
    Describe { ok: bool, task: Box<TaskStatus> },
    Error { ok: bool, error: String },
}

impl Response {
    fn error(message: impl Into<String>) -> Self {
        Response::Error {
            ok: false,
            error: message.into(),
        }
    }

    fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_else(|e| {
            format!(r#"{{"ok":false,"error":"cannot encode the response: {e}"}}"#).into_bytes()
        });
        line.push(b'\n');
        line
    }
}

/// Answers one request line from fresh snapshots.
fn answer(guard: &Guard, line: &[u8]) -> Response {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Response::error(
            r#"empty request; send {"op":"list"} or {"op":"describe","task":"NAME"}"#,
        );
    }
    match serde_json::from_slice::<Request>(line) {
        Ok(Request::List {}) => Response::List {
            ok: true,
            tasks: guard.statuses(),
        },
        Ok(Request::Describe { task }) => match guard.status(&task) {
            Some(status) => Response::Describe {
                ok: true,
                task: Box::new(status),
            },
            None => Response::error(format!("no live task named {task:?}")),
        },
        Err(e) => Response::error(format!(
            r#"bad request: {e}; send {{"op":"list"}} or {{"op":"describe","task":"NAME"}}"#
        )),
    }
}

/// Limits for a [`ControlServer`]; see the module docs.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallguard_sinks::control::ControlServer;
/// use watchdog_core::Guard;
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
            .name("stallguard-control".into())
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
/// use stallguard_sinks::control::{client, ControlServer};
/// use watchdog_core::{Guard, Profile};
///
/// let guard = Guard::default();
/// let _task = guard.start("build", Profile::default()).unwrap();
/// let dir = tempfile::tempdir().unwrap();
/// let server = ControlServer::bind(dir.path().join("ctl.sock"), guard.clone()).unwrap();
///
/// let tasks = client::list(server.path()).unwrap();
/// assert_eq!(tasks[0]["name"], "build");
/// let build = client::describe(server.path(), "build").unwrap();
/// assert_eq!(build["state"], "working");
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

/// Refuses a path the server must not take over; removes a stale socket.
fn check_existing(path: &Path) -> Result<(), ControlError> {
    let refuse = |why: String| ControlError::Refused {
        path: path.to_owned(),
        why,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(path, "inspect the path")(e)),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err(refuse(
            "it is a symbolic link, which is never followed".into(),
        ));
    }
    if !kind.is_socket() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_file() {
            "a regular file"
        } else {
            "not a socket"
        };
        return Err(refuse(format!(
            "it exists and is {what}, which is never replaced"
        )));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(refuse(format!(
            "the socket is owned by uid {}, not by this user (uid {me})",
            meta.uid()
        )));
    }
    match StdUnixStream::connect(path) {
        Ok(_) => Err(refuse("a server is already listening on it".into())),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "replacing a stale control socket");
            std::fs::remove_file(path).map_err(io_err(path, "remove the stale socket"))
        }
        Err(e) => Err(refuse(format!("cannot tell whether it is in use: {e}"))),
    }
}

static PRIVATE_DIRS: AtomicU64 = AtomicU64::new(0);

/// Binds inside a fresh 0700 directory next to `path`, sets 0600, and moves
/// the socket into place without replacing anything: the socket is never
/// reachable by others with a wider mode, whatever the umask.
fn bind_private(
    path: &Path,
) -> Result<(std::os::unix::net::UnixListener, (u64, u64)), ControlError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let private = loop {
        let n = PRIVATE_DIRS.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!(".sgctl.{}.{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err(path, "create a private directory beside it")(e)),
        }
    };
    let staged = private.join("s");
    let result = (|| {
        let listener =
            std::os::unix::net::UnixListener::bind(&staged).map_err(io_err(path, "bind"))?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err(path, "set mode 0600"))?;
        let meta =
            std::fs::symlink_metadata(&staged).map_err(io_err(path, "inspect the new socket"))?;
        let here = nix::fcntl::AT_FDCWD;
        nix::fcntl::renameat2(
            here,
            &staged,
            here,
            path,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(|e| match e {
            nix::errno::Errno::EEXIST => ControlError::Refused {
                path: path.to_owned(),
                why: "something else was created at the path while binding".into(),
            },
            e => io_err(path, "move the socket into place")(e.into()),
        })?;
        Ok((listener, (meta.dev(), meta.ino())))
    })();
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&private);
    result
}

fn remove_if_ours(path: &Path, identity: (u64, u64)) {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if (meta.dev(), meta.ino()) == identity {
            let _ = std::fs::remove_file(path);
        }
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

/// Client functions for reading a control socket (the CLI's `status`
/// subcommand); each makes one connection with a 5 s timeout.
pub mod client {
    use super::*;

    /// Returns the snapshots of every live task (R4.2) as JSON values.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let tasks = stallguard_sinks::control::client::list("/run/user/1000/stallguard.sock")?;
    /// for t in tasks {
    ///     println!("{} {}", t["name"], t["state"]);
    /// }
    /// # Ok::<(), stallguard_sinks::control::ControlError>(())
    /// ```
    pub fn list(path: impl AsRef<Path>) -> Result<Vec<serde_json::Value>, ControlError> {
        let path = path.as_ref();
        let mut reply = request(path, r#"{"op":"list"}"#)?;
        match reply.get_mut("tasks").map(serde_json::Value::take) {
            Some(serde_json::Value::Array(tasks)) => Ok(tasks),
            _ => Err(ControlError::Protocol {
                path: path.to_owned(),
                detail: "a list response without a \"tasks\" array".into(),
            }),
        }
    }

    /// Returns the snapshot of the live task named `name` as a JSON value.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// let t = stallguard_sinks::control::client::describe("/run/user/1000/stallguard.sock", "build")?;
    /// println!("{}", t["last_step"]);
    /// # Ok::<(), stallguard_sinks::control::ControlError>(())
    /// ```
    pub fn describe(path: impl AsRef<Path>, name: &str) -> Result<serde_json::Value, ControlError> {
        let path = path.as_ref();
        let line = serde_json::to_string(&Request::Describe {
            task: name.to_owned(),
        })
        .map_err(|e| ControlError::Protocol {
            path: path.to_owned(),
            detail: format!("cannot encode the request: {e}"),
        })?;
        let mut reply = request(path, &line)?;
        match reply.get_mut("task").map(serde_json::Value::take) {
            Some(task @ serde_json::Value::Object(_)) => Ok(task),
            _ => Err(ControlError::Protocol {
                path: path.to_owned(),
                detail: "a describe response without a \"task\" object".into(),
            }),
        }
    }

    /// Sends one raw request line and returns the parsed `ok` response; an
    /// `ok: false` response becomes [`ControlError::Server`].
    pub fn request(path: &Path, line: &str) -> Result<serde_json::Value, ControlError> {
        let mut stream = StdUnixStream::connect(path).map_err(io_err(path, "connect"))?;
        let timeout = Some(DEFAULT_IO_TIMEOUT);
        stream
            .set_read_timeout(timeout)
            .and_then(|()| stream.set_write_timeout(timeout))
            .map_err(io_err(path, "set timeouts"))?;
        stream
            .write_all(line.as_bytes())
            .and_then(|()| stream.write_all(b"\n"))
            .map_err(io_err(path, "send the request"))?;
        let mut reply = Vec::new();
        BufReader::new(std::io::Read::take(&mut stream, MAX_RESPONSE as u64))
            .read_until(b'\n', &mut reply)
            .map_err(io_err(path, "read the response"))?;
        let protocol = |detail: String| ControlError::Protocol {
            path: path.to_owned(),
            detail,
        };
        if !reply.ends_with(b"\n") {
            return Err(protocol(format!(
                "the response ended after {} bytes without a newline",
                reply.len()
            )));
        }
        let value: serde_json::Value =
            serde_json::from_slice(&reply).map_err(|e| protocol(format!("not JSON: {e}")))?;
        match value.get("ok") {
            Some(serde_json::Value::Bool(true)) => Ok(value),
            Some(serde_json::Value::Bool(false)) => Err(ControlError::Server {
                path: path.to_owned(),
                message: value
                    .get("error")
                    .and_then(|e| e.as_str())
                    .unwrap_or("error without a message")
                    .to_owned(),
            }),
            _ => Err(protocol("no boolean \"ok\" field".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_unknown_ops_are_refused() {
        assert!(matches!(
            serde_json::from_str::<Request>(r#"{"op":"list"}"#),
            Ok(Request::List {})
        ));
        assert!(matches!(
            serde_json::from_str::<Request>(r#"{"op":"describe","task":"a"}"#),
            Ok(Request::Describe { task }) if task == "a"
        ));
        assert!(serde_json::from_str::<Request>(r#"{"op":"kill"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"op":"list","x":1}"#).is_err());
    }
}
