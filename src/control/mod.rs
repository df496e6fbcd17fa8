//! The control socket (R6.5): list and describe task snapshots (R4.2) as JSON
//! over a Unix domain socket only its owner can use. It reads the guard and
//! never acts, so it lives here, beside the guard, rather than among the
//! sinks; the `stallwarden list` and `describe` commands are its client.
//!
//! # Protocol
//!
//! One request per connection: the client sends one line of JSON,
//! `{"op":"list"}` or `{"op":"describe","task":"NAME"}` (a [`Request`]), and
//! reads one line back, `{"ok":true,"tasks":[...]}`, `{"ok":true,"task":{...}}`
//! or `{"ok":false,"error":"..."}`; then the server closes the connection.
//! One request per connection keeps a connection's life short and bounded,
//! which is what the limits below rely on.
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
//!
//! Layout: this file holds the wire protocol and the errors; `server.rs` the
//! server and its limits; `socket_file.rs` how the socket file is created
//! owner-only, taken over when stale and removed.
//!
//! # Examples
//!
//! ```
//! use std::io::{BufRead, BufReader, Write};
//! use std::os::unix::net::UnixStream;
//! use stallwarden::control::{ControlServer, Request};
//! use stallwarden::{Guard, Profile};
//!
//! let guard = Guard::default();
//! let _task = guard.start("build", Profile::default()).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let server = ControlServer::bind(dir.path().join("ctl.sock"), guard.clone()).unwrap();
//!
//! let mut stream = UnixStream::connect(server.path()).unwrap();
//! writeln!(stream, "{}", serde_json::to_string(&Request::List {}).unwrap()).unwrap();
//! let mut reply = String::new();
//! BufReader::new(stream).read_line(&mut reply).unwrap();
//! let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
//! assert_eq!(reply["ok"], true);
//! assert_eq!(reply["tasks"][0]["name"], "build");
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use watchdog_core::{Guard, TaskStatus};

mod server;
mod socket_file;

pub use server::{ControlServer, ControlServerBuilder};

/// The longest request line the server reads, newline included.
pub const DEFAULT_MAX_REQUEST: usize = 64 * 1024;
/// The most connections the server holds at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 128;
/// How long the server waits for a request, and for a response to be taken.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(5);

/// An error binding or serving a control socket; every message names the
/// socket's path.
///
/// # Examples
///
/// ```
/// use stallwarden::control::{ControlError, ControlServer};
/// use stallwarden::Guard;
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("ctl.sock");
/// std::fs::write(&path, "precious").unwrap();
/// let err = ControlServer::bind(&path, Guard::default()).unwrap_err();
/// assert!(matches!(err, ControlError::Refused { .. }));
/// assert!(err.to_string().contains("ctl.sock: refusing to use it"));
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
        /// What was being done (`bind`, `set mode 0600`, ...).
        action: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
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

/// A request line of the protocol: what a client asks (see the module docs).
///
/// The server reads it and the `stallwarden` command's client writes it, so
/// both sides share this one definition of the wire format.
///
/// # Examples
///
/// ```
/// use stallwarden::control::Request;
///
/// assert_eq!(serde_json::to_string(&Request::List {}).unwrap(), r#"{"op":"list"}"#);
/// let describe = Request::Describe { task: "build".into() };
/// assert_eq!(serde_json::to_string(&describe).unwrap(), r#"{"op":"describe","task":"build"}"#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// `{"op":"list"}`: every live task's snapshot.
    // A struct variant, not a unit one: serde ignores unknown fields beside
    // the tag of a unit variant even with `deny_unknown_fields`.
    List {},
    /// `{"op":"describe","task":"NAME"}`: the live task named `task`.
    Describe {
        /// The task's name.
        task: String,
    },
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
