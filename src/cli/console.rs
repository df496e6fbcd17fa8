//! Everything `run` writes to the terminal goes through one [`Console`]: the
//! command's output (byte for byte), stallguard's own lines, and the live
//! status line (R8.4), so the three never interleave mid-line.
//!
//! The status line is drawn only when stderr is a terminal, and only while
//! the last byte written to stdout and to stderr ended a line (or nothing was
//! written yet): a command that printed half a line keeps its line. It is
//! erased (`\r` + clear-line) before any other write, so it never ends up
//! inside the command's output.

use std::io::{self, Write};

use std::sync::{Mutex, MutexGuard};

/// Which of our output streams a write goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

#[derive(Debug)]
struct State {
    /// A status line is on screen and must be erased before other output.
    drawn: bool,
    stdout_at_line_start: bool,
    stderr_at_line_start: bool,
}

/// Serializes writes to stdout and stderr and owns the status line.
#[derive(Debug)]
pub(crate) struct Console {
    state: Mutex<State>,
    status_line: bool,
    /// Our stdout and stderr are one open file (R8.11): a write to either
    /// leaves both where it ended.
    shared: bool,
}

/// Erases the current terminal line.
const CLEAR_LINE: &[u8] = b"\r\x1b[2K";

impl Console {
    /// Creates a console; `status_line` enables R8.4's live line; `shared`
    /// says our stdout and stderr are the same open file (R8.11).
    pub(crate) fn new(status_line: bool, shared: bool) -> Self {
        Console {
            state: Mutex::new(State {
                drawn: false,
                stdout_at_line_start: true,
                stderr_at_line_start: true,
            }),
            status_line,
            shared,
        }
    }

    /// Returns whether the live status line is enabled.
    pub(crate) fn has_status_line(&self) -> bool {
        self.status_line
    }

    /// Writes a chunk of the command's output, unchanged, and flushes it.
    ///
    /// Errors (our own stdout closed, say) are returned so the caller can
    /// keep draining the command without writing.
    pub(crate) fn command_output(&self, stream: Stream, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let mut s = self.lock();
        Self::erase(&mut s)?;
        match stream {
            Stream::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()?;
                s.stdout_at_line_start = bytes.ends_with(b"\n");
            }
            Stream::Stderr => {
                let mut err = io::stderr().lock();
                err.write_all(bytes)?;
                err.flush()?;
                s.stderr_at_line_start = bytes.ends_with(b"\n");
            }
        }
        if self.shared {
            let ended = bytes.ends_with(b"\n");
            s.stdout_at_line_start = ended;
            s.stderr_at_line_start = ended;
        }
        Ok(())
    }

    /// Writes one line of stallguard's own on stderr, starting a new line
    /// first if the command left stderr mid-line.
    pub(crate) fn line(&self, text: &str) {
        let mut s = self.lock();
        let _ = Self::erase(&mut s);
        let mut err = io::stderr().lock();
        let lead = if s.stderr_at_line_start { "" } else { "\n" };
        let _ = writeln!(err, "{lead}{text}");
        let _ = err.flush();
        s.stderr_at_line_start = true;
    }

    /// Redraws the status line, if enabled and both streams are at the
    /// start of a line.
    pub(crate) fn status(&self, text: &str) {
        if !self.status_line {
            return;
        }
        let mut s = self.lock();
        if !(s.stdout_at_line_start && s.stderr_at_line_start) {
            return;
        }
        let mut err = io::stderr().lock();
        let _ = err.write_all(CLEAR_LINE);
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
        s.drawn = true;
    }

    /// Erases the status line for good (before exiting).
    pub(crate) fn clear_status(&self) {
        let mut s = self.lock();
        let _ = Self::erase(&mut s);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while writing leaves the flags usable: recover them.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn erase(s: &mut State) -> io::Result<()> {
        if s.drawn {
            s.drawn = false;
            let mut err = io::stderr().lock();
            err.write_all(CLEAR_LINE)?;
            err.flush()?;
        }
        Ok(())
    }
}
