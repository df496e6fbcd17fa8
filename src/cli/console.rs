//! Everything `run` writes to the terminal goes through one [`Console`]: the
//! command's output (byte for byte), stallwarden's own lines, and the live
//! status line (R8.4), so the three never interleave mid-line.
//!
//! The status line is drawn only when stderr is a terminal, and only while
//! the last byte written to stdout and to stderr ended a line (or nothing was
//! written yet): a command that printed half a line keeps its line. It is
//! erased before any other write, so it never ends up inside the command's
//! output.
//!
//! Typeahead (R8.11): what the user types while the command is busy is
//! echoed by the terminal at the cursor, which stallwarden cannot see. So
//! the line is never drawn, redrawn or erased by clearing the cursor's
//! row: it is inserted at the start of the row (insert mode), pushing
//! anything typed there to the right, and the cursor goes back to where it
//! was, past it; it is erased by deleting exactly its own characters from
//! the start of the row, so the typed text slides back to column 0 and the
//! cursor stays right after it. The command's next output then follows the
//! typed text, as it would without stallwarden. What this cannot follow is
//! the cursor leaving the row (a typed Enter): the run loop checks the
//! terminal's input queue and then forgets the line instead of touching it
//! ([`Console::forget_status`]).

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
    /// The width of the status line on screen, if one is drawn.
    drawn: Option<usize>,
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
    /// Our stdout, stderr was closed when stallwarden started (R8.16).
    closed: [bool; 2],
}

/// Whether descriptor `fd` was closed when stallwarden started (`>&-`).
///
/// Rust's runtime opens `/dev/null` read-write on a standard descriptor it
/// finds closed, so that nothing else takes its number; a shell's
/// redirection to `/dev/null` opens it write-only. So `/dev/null` open
/// read-write on stdout or stderr is taken for closed: writes to it are
/// lost, and the run must not exit 0 as if they were written (R8.10).
fn closed_at_start(fd: libc::c_int) -> bool {
    // SAFETY: fstat fills a stat we own; fcntl reads flags; `fd` is one of
    // ours (open or not).
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 || st.st_mode & libc::S_IFMT != libc::S_IFCHR {
            return false;
        }
        let null = libc::makedev(1, 3);
        let flags = libc::fcntl(fd, libc::F_GETFL);
        st.st_rdev == null && flags >= 0 && flags & libc::O_ACCMODE == libc::O_RDWR
    }
}

/// Erases the current terminal line.
/// Saves the cursor (DECSC) and goes to the start of its row.
const SAVE_AND_HOME: &[u8] = b"\x1b7\r";
/// Insert mode on and off (IRM).
const INSERT: &[u8] = b"\x1b[4h";
const REPLACE: &[u8] = b"\x1b[4l";
/// Restores the saved cursor (DECRC).
const RESTORE: &[u8] = b"\x1b8";

impl Console {
    /// Creates a console; `status_line` enables R8.4's live line; `shared`
    /// says our stdout and stderr are the same open file (R8.11).
    pub(crate) fn new(status_line: bool, shared: bool) -> Self {
        Console {
            state: Mutex::new(State {
                drawn: None,
                stdout_at_line_start: true,
                stderr_at_line_start: true,
            }),
            status_line,
            shared,
            closed: [
                closed_at_start(libc::STDOUT_FILENO),
                closed_at_start(libc::STDERR_FILENO),
            ],
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
        // R8.16: output to a stream closed at our start (`>&-`) is lost, as
        // the command's own write would fail without stallwarden.
        if self.closed[usize::from(stream == Stream::Stderr)] {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
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

    /// Writes one line of stallwarden's own on stderr, starting a new line
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
        let _ = Self::erase(&mut s);
        let mut err = io::stderr().lock();
        // Inserted before whatever the row holds (typeahead), then the
        // cursor goes back past it: where it was, plus the line's width.
        // Never wider than the row: a wrapped line cannot be deleted whole.
        // R8.12: shown escaped, as every line of stallwarden's own.
        let text = printable(text);
        let text: String = match columns() {
            Some(c) => text.chars().take(c.saturating_sub(1)).collect(),
            None => text.into_owned(),
        };
        let width = text.chars().count();
        let mut draw = Vec::with_capacity(text.len() + 24);
        draw.extend_from_slice(SAVE_AND_HOME);
        draw.extend_from_slice(INSERT);
        draw.extend_from_slice(text.as_bytes());
        draw.extend_from_slice(REPLACE);
        draw.extend_from_slice(RESTORE);
        if width > 0 {
            draw.extend_from_slice(format!("\x1b[{width}C").as_bytes());
        }
        let _ = err.write_all(&draw);
        let _ = err.flush();
        s.drawn = Some(width);
    }

    /// Leaves a drawn status line as it is and stops tracking it: the
    /// cursor may have left its row (R8.11), where erasing it could erase
    /// what was typed.
    pub(crate) fn forget_status(&self) {
        self.lock().drawn = None;
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
        if let Some(width) = s.drawn.take() {
            // Deletes the line's own characters at the start of the row;
            // the cursor goes back by as many, staying after what was typed.
            let mut err = io::stderr().lock();
            err.write_all(SAVE_AND_HOME)?;
            if width > 0 {
                write!(err, "\x1b[{width}P")?;
            }
            err.write_all(RESTORE)?;
            if width > 0 {
                write!(err, "\x1b[{width}D")?;
            }
            err.flush()?;
        }
        Ok(())
    }
}

/// The width of the terminal on stderr, if it says.
fn columns() -> Option<usize> {
    // SAFETY: `w` is a valid place for TIOCGWINSZ to write.
    let w = unsafe {
        let mut w: libc::winsize = std::mem::zeroed();
        (libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut w) == 0).then_some(w)
    }?;
    (w.ws_col > 0).then_some(usize::from(w.ws_col))
}

/// Renders `text` safe for a terminal (R8.12): ESC as `\e`, every other
/// control character (C0 but tab, DEL, C1) as `\xNN` or `\u{NN}`, so a
/// process or file name cannot move the cursor, recolour the terminal or
/// fake a line. Used for every line stallwarden writes itself (`run`) and
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
