//! Repetition is not progress (R5.12): the one judgement every door uses.
//!
//! A task's [`Repeats`] keeps a window of the last [`WINDOW`] line
//! fingerprints (and another of tool-call fingerprints) and what repeats
//! now, for the stall event and snapshots. Each output stream cuts its own
//! lines ([`LineJudge`]: at `\n` and `\r`, an endless line cut at
//! [`MAX_LINE`] bytes) and asks the window about each ended line: one seen
//! in the window is a `repeat`, a new one is `output` and enters the
//! window. What a fingerprint sets aside lives in [`fingerprint()`].
//!
//! Memory: the task's judge is allocated on first use, outside the task's
//! 128-byte cell (R9.3): three windows of 64 entries (20 bytes each: lines,
//! finished calls, started calls), a cache of 64 raw-line hashes (16 bytes
//! each), and the line shown, at most [`MAX_SHOWN`] characters: under
//! 6 KiB per judged task, fixed. Each
//! stream's [`LineJudge`] holds at most [`MAX_LINE`] bytes of a line not
//! yet ended.
//!
//! Lock order: the scheduler's lock, then a judge's (a stall verdict reads
//! the judge under the scheduler's lock); a judge's lock is never held
//! while taking the scheduler's.
//!
//! This module is the public face of the judgement: [`Repeats`] and
//! [`LineJudge`] here (they read the task's clock and last renewal), the
//! window they consult in `state/window.rs`, the fingerprint and the
//! report's words ([`Repeating`]) in `vocab/fingerprint.rs`.

use std::fmt;
use std::sync::Arc;

pub use crate::state::window::{MAX_LINE, WINDOW};
pub use crate::vocab::fingerprint::{fingerprint, RepeatSource, Repeating, MAX_SHOWN};

use crate::engine::driver::Inner;
use crate::engine::slab::CellRef;
use crate::state::window::SharedJudge;
use crate::vocab::clock::Nanos;
use crate::vocab::event::TaskId;
use crate::vocab::signal::SignalKind;

/// Lines of one read still judged after its first new line (see
/// [`LineJudge::feed`]).
const LEARN_AFTER_NEW: usize = 16;

/// A task's judge of repetition (R5.12), shared by its output streams and
/// its tool-call feed; cheap to clone.
///
/// # Examples
///
/// ```
/// use watchdog_core::{Guard, ManualClock, Profile, SignalKind};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("wait", Profile::default()).unwrap();
/// let mut lines = task.recorder().repeats().lines();
/// assert_eq!(lines.feed(b"[12:00:01] waiting for db\n").kind, SignalKind::Output);
/// assert_eq!(lines.feed(b"[12:00:02] waiting for db\n").kind, SignalKind::Repeat);
/// assert_eq!(lines.feed(b"rows done: 10\n").kind, SignalKind::Output);
/// ```
#[derive(Clone)]
pub struct Repeats {
    judge: SharedJudge,
    /// The task's cell, for its last renewal; held as its recorder holds
    /// it, with the engine, so a judge outlives neither.
    cell: CellRef,
    inner: Arc<Inner>,
    id: TaskId,
}

impl fmt::Debug for Repeats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Repeats")
            .field("task", &self.id)
            .field("judge", &*self.judge.lock())
            .finish()
    }
}

impl Repeats {
    pub(crate) fn new(judge: SharedJudge, cell: CellRef, inner: Arc<Inner>, id: TaskId) -> Self {
        Repeats {
            judge,
            cell,
            inner,
            id,
        }
    }

    /// The guard's clock now, as the task's [`Recorder`](crate::Recorder)
    /// reads it.
    fn now(&self) -> Nanos {
        self.inner.clock.now()
    }

    /// Returns a line judge for one output stream of the task.
    pub fn lines(&self) -> LineJudge {
        LineJudge {
            repeats: self.clone(),
            partial: Vec::with_capacity(MAX_LINE),
            cut: false,
            after_cr: false,
        }
    }

    /// Judges one whole line (one a source has cut itself, as an agent
    /// stream's plain line): [`SignalKind::Repeat`] when it repeats one in
    /// the window, else [`SignalKind::Output`]. The caller records it.
    ///
    /// ```
    /// use watchdog_core::{Guard, ManualClock, Profile, SignalKind};
    ///
    /// let guard = Guard::builder().clock(ManualClock::new()).build();
    /// let task = guard.start("agent", Profile::default()).unwrap();
    /// let repeats = task.recorder().repeats();
    /// assert_eq!(repeats.line(b"Let me check the config again."), SignalKind::Output);
    /// assert_eq!(repeats.line(b"Let me check the config again."), SignalKind::Repeat);
    /// ```
    pub fn line(&self, line: &[u8]) -> SignalKind {
        self.said(line, None)
    }

    /// Judges what a source says, by `key` (the words that make it what it
    /// is, ids and clocks left out), shown to a user as `shown` when it
    /// repeats (else as the key).
    pub fn said(&self, key: &[u8], shown: Option<&str>) -> SignalKind {
        let now = self.now();
        let key = &key[..key.len().min(MAX_LINE)];
        let repeat = match shown {
            None => self.judge.lock().line(key, now),
            Some(s) => self.judge.lock().said(key, s, now),
        };
        if repeat {
            SignalKind::Repeat
        } else {
            SignalKind::Output
        }
    }

    /// Returns what repeats now, if anything repeated since the task's
    /// last renewal.
    pub fn repeating(&self) -> Option<Repeating> {
        let now = self.now();
        self.judge.lock().repeating(self.cell.last_renewal(), now)
    }
}

/// What one read of output was: the kind to record and its newlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// [`SignalKind::Output`] or [`SignalKind::Repeat`].
    pub kind: SignalKind,
    /// Newlines (`\n`) in the read, for the task's line count.
    pub newlines: u64,
}

/// Cuts one output stream into lines and judges each (R5.12).
///
/// A read is `output` when it ends a line the window has not seen, or
/// ends no line and the line it continues is not one in the window
/// (pytest's dots, a line written in pieces); it is `repeat` when every
/// line it ends repeats one in the window, or it ends none and the line so
/// far is one in the window (a spinner's frame before its `\r`). A `\r\n`
/// ends one line. Once a read is known to be output, at most 16 more of its
/// lines are judged (so the window learns a loop's body); the rest are
/// only counted.
pub struct LineJudge {
    repeats: Repeats,
    /// The line not yet ended, at most [`MAX_LINE`] bytes.
    partial: Vec<u8>,
    /// The line not yet ended passed [`MAX_LINE`]: cut.
    cut: bool,
    /// The last byte was a `\r`: a `\n` now ends nothing new.
    after_cr: bool,
}

impl fmt::Debug for LineJudge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LineJudge")
            .field("pending", &self.partial.len())
            .field("cut", &self.cut)
            .finish()
    }
}

impl LineJudge {
    /// Judges one read of the stream; the bytes are not kept beyond the
    /// line not yet ended.
    pub fn feed(&mut self, data: &[u8]) -> Verdict {
        let mut newlines = 0u64;
        let mut ended = false;
        let mut any_new = false;
        // Lines still judged after the first new one, so the window learns
        // a loop's body in a read or two; past them the read's verdict is
        // known and the rest is only counted (a flood of new lines costs
        // a few fingerprints per read, not one per line).
        let mut learn = LEARN_AFTER_NEW;
        let mut start = 0;
        let now = self.repeats.now();
        let mut judge = None;
        // The last line this read ended whole, when it is in the window.
        let mut prev: Option<&[u8]> = None;
        while let Some(off) = memchr::memchr2(b'\n', b'\r', &data[start..]) {
            if any_new {
                if learn == 0 {
                    break;
                }
                learn -= 1;
            }
            let pos = start + off;
            let is_nl = data[pos] == b'\n';
            newlines += u64::from(is_nl);
            let piece = &data[start..pos];
            start = pos + 1;
            let crlf = is_nl && self.after_cr && piece.is_empty() && self.partial.is_empty();
            self.after_cr = !is_nl;
            if crlf {
                continue;
            }
            ended = true;
            let judge = judge.get_or_insert_with(|| self.repeats.judge.lock());
            let new = if self.partial.is_empty() && !self.cut {
                let line = &piece[..piece.len().min(MAX_LINE)];
                let new = if prev == Some(line) {
                    judge.line_again(line, now, 1);
                    false
                } else {
                    prev = Some(line);
                    !judge.line(line, now)
                };
                // The same line again and again, byte for byte: counted
                // as repeats at the speed of a comparison.
                if is_nl && line.len() == piece.len() {
                    let period = piece.len() + 1;
                    let run = common_prefix(&data[start..], &data[start - period..]) / period;
                    if run > 0 {
                        judge.line_again(line, now, run as u32);
                        newlines += run as u64;
                        start += run * period;
                    }
                }
                new
            } else {
                prev = None;
                push_bounded(&mut self.partial, &mut self.cut, piece);
                let new = !judge.line(&self.partial, now);
                self.partial.clear();
                self.cut = false;
                new
            };
            any_new |= new;
        }
        if any_new && start < data.len() {
            // The rest of a read already known to be output: counted, and
            // its last line end found, never judged.
            let rest = &data[start..];
            newlines += memchr::memchr_iter(b'\n', rest).count() as u64;
            if let Some(last) = memchr::memrchr2(b'\n', b'\r', rest) {
                self.partial.clear();
                self.cut = false;
                self.after_cr = rest[last] == b'\r';
                start += last + 1;
            }
        }
        let rest = &data[start..];
        if !rest.is_empty() {
            self.after_cr = false;
            push_bounded(&mut self.partial, &mut self.cut, rest);
        }
        let repeat = if ended {
            !any_new
        } else if rest.is_empty() || self.cut {
            false
        } else {
            judge
                .get_or_insert_with(|| self.repeats.judge.lock())
                .partial(&self.partial)
        };
        Verdict {
            kind: if repeat {
                SignalKind::Repeat
            } else {
                SignalKind::Output
            },
            newlines,
        }
    }

    /// Returns the task's judge this stream feeds.
    pub fn repeats(&self) -> &Repeats {
        &self.repeats
    }
}

/// How long `a` and `b` agree from their first byte.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

fn push_bounded(partial: &mut Vec<u8>, cut: &mut bool, bytes: &[u8]) {
    let room = MAX_LINE - partial.len();
    if bytes.len() > room {
        *cut = true;
    }
    partial.extend_from_slice(&bytes[..bytes.len().min(room)]);
}
