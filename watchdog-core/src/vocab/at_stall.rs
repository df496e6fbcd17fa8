//! Work done at a stall verdict before the stop (R8.14): a runner's
//! [`AtStall`](crate::AtStall) step takes each suspect's stack or runs the user's own command
//! while the `stalled` event waits to leave the outbox, and what it found
//! goes into that event. The cancel of the same verdict is emitted after
//! the `stalled` event, so no sink (the process sink's SIGTERM included)
//! sees it before the work is done.

use std::fmt;

use serde::Serialize;

/// Something taken at a stall: one suspect's stack, or the output of the
/// user's `on-stall` command (R8.14).
///
/// # Examples
///
/// ```
/// use watchdog_core::StallNote;
/// let note = StallNote::new("py-spy", Some(4242), "ok")
///     .frame("recv_forever (server.py:12)")
///     .output("Thread 4242 (idle): \"MainThread\"\n    recv_forever (server.py:12)\n");
/// assert_eq!(note.to_string(), "py-spy pid 4242: ok: recv_forever (server.py:12)");
/// let json = serde_json::to_value(&note).unwrap();
/// assert_eq!(json["source"], "py-spy");
/// assert_eq!(json["frames"][0], "recv_forever (server.py:12)");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StallNote {
    /// What produced it: `py-spy`, `eu-stack`, `gdb`, `on-stall`.
    pub source: String,
    /// The process it is about; absent for the `on-stall` command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// How it went, in a word or a short line: `ok`, `exit 3`, `timed out
    /// after 5s`, `not installed`, `refused (ptrace)`.
    pub status: String,
    /// The frames that matter, innermost first (the program's own code:
    /// function, file and line); empty when none were found.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
    /// The whole output, bounded (see `truncated`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// True when the output was cut at its bound.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl StallNote {
    /// A note from `source` about `pid` that went as `status`.
    pub fn new(source: impl Into<String>, pid: Option<u32>, status: impl Into<String>) -> Self {
        StallNote {
            source: source.into(),
            pid,
            status: status.into(),
            ..StallNote::default()
        }
    }

    /// Adds a frame that matters (innermost first).
    #[must_use]
    pub fn frame(mut self, frame: impl Into<String>) -> Self {
        self.frames.push(frame.into());
        self
    }

    /// Sets the whole output.
    #[must_use]
    pub fn output(mut self, output: impl Into<String>) -> Self {
        self.output = output.into();
        self
    }

    /// Marks the output as cut at its bound.
    #[must_use]
    pub fn truncated(mut self, truncated: bool) -> Self {
        self.truncated = truncated;
        self
    }
}

impl fmt::Display for StallNote {
    /// One line: source, pid, status and the innermost frame that matters.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let Some(pid) = self.pid {
            write!(f, " pid {pid}")?;
        }
        write!(f, ": {}", self.status)?;
        if let Some(frame) = self.frames.first() {
            write!(f, ": {frame}")?;
        }
        Ok(())
    }
}

/// What an [`AtStall`](crate::AtStall) took at one stall: stacks, the `on-stall` command's
/// run. Both go into the `stalled` event.
///
/// # Examples
///
/// ```
/// use watchdog_core::{StallNote, StallReport};
/// let mut report = StallReport::default();
/// assert!(report.is_empty());
/// report.stacks.push(StallNote::new("eu-stack", Some(7), "not installed"));
/// assert!(!report.is_empty());
/// ```
///
/// A task's snapshot keeps the report of its latest stall
/// ([`crate::TaskStatus::stall_report`]), so `describe` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StallReport {
    /// One note per suspect whose stack was taken (or could not be).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<StallNote>,
    /// The `on-stall` command's run, if one was configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_stall: Option<Box<StallNote>>,
}

/// Where the report of a task's latest stall is kept for its snapshot.
pub(crate) type ReportSlot = std::sync::Arc<parking_lot::Mutex<Option<StallReport>>>;

impl StallReport {
    /// Returns true when nothing was taken.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty() && self.on_stall.is_none()
    }
}
