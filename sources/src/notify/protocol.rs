//! What the sd_notify datagrams mean (R5.4): the protocol's assignments,
//! parsed and bounded, apart from the socket that receives them.

use std::time::Duration;

use super::{MAX_DATAGRAM, MAX_STATUS};
use crate::refusal::Refusal;

/// One assignment of the notify protocol, as understood by the socket.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stallwarden_sources::notify::{Malformed, Notification};
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

/// Why a datagram, or one assignment in it, was ignored; counted on the
/// task under `notify.` and the reason (R10.6).
///
/// # Examples
///
/// ```
/// use stallwarden_sources::notify::{Malformed, Notification};
/// use stallwarden_sources::Refusal;
///
/// assert_eq!(Notification::parse_datagram(b"\xff\xfe"), Err(Malformed::NotText));
/// assert_eq!(Malformed::NotText.key(), "notify.not_text");
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

impl Refusal for Malformed {
    /// `notify.` and the reason, e.g. `notify.bad_value`, as the task's
    /// status counts it (`refused`, shown by `describe`; R8.7, R10.6).
    fn key(&self) -> &'static str {
        match self {
            Malformed::NotText => "notify.not_text",
            Malformed::Oversize => "notify.oversize",
            Malformed::Empty => "notify.empty",
            Malformed::NoAssignment => "notify.no_assignment",
            Malformed::BadValue => "notify.bad_value",
            Malformed::ControlTruncated => "notify.control_truncated",
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
