//! The control socket's client (R6.5): one connection per request, one
//! [`Request`] line out, one JSON line back, with a timeout on each; the
//! protocol is described in [`stallwarden::control`].

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use serde_json::Value;
use stallwarden::control::{Request, DEFAULT_IO_TIMEOUT};

/// The longest response line read.
const MAX_RESPONSE: u64 = 64 * 1024 * 1024;

/// An error talking to a control socket; every message names the socket's
/// path.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// An I/O operation on the socket failed.
    #[error("control socket {}: {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        /// What was being done (`connect`, `read the response`, ...).
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The server did not take the request or answer it in time (R8.16):
    /// a read or write timeout, which the OS reports as EAGAIN.
    #[error("control socket {}: timed out after {} waiting to {action}: the server does not answer", path.display(), humantime::format_duration(*after))]
    TimedOut {
        path: PathBuf,
        /// What was being done (`read the response`, ...).
        action: &'static str,
        after: std::time::Duration,
    },
    /// The server's answer was not the protocol's.
    #[error("control socket {}: bad response: {detail}", path.display())]
    Protocol { path: PathBuf, detail: String },
    /// The server answered with an error.
    #[error("control socket {}: {message}", path.display())]
    Server { path: PathBuf, message: String },
}

fn io_err(path: &Path, action: &'static str) -> impl FnOnce(std::io::Error) -> ClientError {
    let path = path.to_owned();
    move |source| match source.kind() {
        // A socket timeout reads as "Resource temporarily unavailable".
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ClientError::TimedOut {
            path,
            action,
            after: DEFAULT_IO_TIMEOUT,
        },
        _ => ClientError::Io {
            path,
            action,
            source,
        },
    }
}

/// Returns the snapshots of every live task (R4.2) as JSON values.
pub(crate) fn list(path: &Path) -> Result<Vec<Value>, ClientError> {
    let mut reply = request(path, &Request::List {})?;
    match reply.get_mut("tasks").map(Value::take) {
        Some(Value::Array(tasks)) => Ok(tasks),
        _ => Err(ClientError::Protocol {
            path: path.to_owned(),
            detail: "a list response without a \"tasks\" array".into(),
        }),
    }
}

/// Returns the snapshot of the live task named `name` as a JSON value.
pub(crate) fn describe(path: &Path, name: &str) -> Result<Value, ClientError> {
    let describe = Request::Describe {
        task: name.to_owned(),
    };
    let mut reply = request(path, &describe)?;
    match reply.get_mut("task").map(Value::take) {
        Some(task @ Value::Object(_)) => Ok(task),
        _ => Err(ClientError::Protocol {
            path: path.to_owned(),
            detail: "a describe response without a \"task\" object".into(),
        }),
    }
}

/// Sends one request and returns the parsed `ok` response; an `ok: false`
/// response becomes [`ClientError::Server`].
fn request(path: &Path, request: &Request) -> Result<Value, ClientError> {
    let protocol = |detail: String| ClientError::Protocol {
        path: path.to_owned(),
        detail,
    };
    let mut line = serde_json::to_vec(request)
        .map_err(|e| protocol(format!("cannot encode the request: {e}")))?;
    line.push(b'\n');
    let mut stream = UnixStream::connect(path).map_err(io_err(path, "connect"))?;
    let timeout = Some(DEFAULT_IO_TIMEOUT);
    stream
        .set_read_timeout(timeout)
        .and_then(|()| stream.set_write_timeout(timeout))
        .map_err(io_err(path, "set timeouts"))?;
    stream
        .write_all(&line)
        .map_err(io_err(path, "send the request"))?;
    let mut reply = Vec::new();
    BufReader::new((&mut stream).take(MAX_RESPONSE))
        .read_until(b'\n', &mut reply)
        .map_err(io_err(path, "read the response"))?;
    if !reply.ends_with(b"\n") {
        return Err(protocol(format!(
            "the response ended after {} bytes without a newline",
            reply.len()
        )));
    }
    let value: Value =
        serde_json::from_slice(&reply).map_err(|e| protocol(format!("not JSON: {e}")))?;
    match value.get("ok") {
        Some(Value::Bool(true)) => Ok(value),
        Some(Value::Bool(false)) => Err(ClientError::Server {
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
