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
}

/// Erases the current terminal line.
const CLEAR_LINE: &[u8] = b"\r\x1b[2K";

impl Console {
    /// Creates a console; `status_line` enables R8.4's live line.
    pub(crate) fn new(status_line: bool) -> Self {
        Console {
            state: Mutex::new(State {
                drawn: false,
                stdout_at_line_start: true,
                stderr_at_line_start: true,
            }),
            status_line,
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
        Ok(())
    }

    /// Writes one line of stallguard's own on stderr, starting a new line
    /// first if the command left stderr mid-line.
    ///
    /// Control characters in it (a process or file name holding an escape
    /// sequence) are shown escaped, never sent raw (see [`printable`]).
    pub(crate) fn line(&self, text: &str) {
        let text = printable(text);
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
        let _ = err.write_all(printable(text).as_bytes());
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

/// Renders `text` safe for a terminal (R8.12): ESC as `\e`, every other
/// control character (C0 but tab, DEL, C1) as `\xNN` or `\u{NN}`, so a
/// process or file name cannot move the cursor, recolour the terminal or
/// fake a line. Used for every line stallguard writes itself (`run`) and
/// for every value `list` and `describe` print.
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\t') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\t' => out.push(c),
            '\x1b' => out.push_str("\\e"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::printable;

    // R8.12: escapes from names never reach the terminal raw.
    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(printable("sleep[12] S"), "sleep[12] S");
        assert_eq!(printable("a\x1b[31mred\x07"), "a\\e[31mred\\x07");
        assert_eq!(printable("two\nlines\r"), "two\\x0alines\\x0d");
        assert_eq!(printable("c1\u{9b}2J\tok"), "c1\\u{9b}2J\tok");
    }
}
