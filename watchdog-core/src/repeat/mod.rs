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

mod fingerprint;

pub use fingerprint::fingerprint;

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;

use crate::clock::Nanos;
use crate::guard::Recorder;
use crate::signal::SignalKind;

/// Fingerprints kept per task and per kind of thing judged (lines, calls).
pub const WINDOW: usize = 64;

/// The most bytes of one line judged; an endless line is cut here, and its
/// bytes past the cut count as output (a line not yet ended).
pub const MAX_LINE: usize = 4096;

/// Lines of one read still judged after its first new line (see
/// [`LineJudge::feed`]).
const LEARN_AFTER_NEW: usize = 16;

/// The most characters of a repeated line or call shown to a user.
pub const MAX_SHOWN: usize = 120;

/// What kind of thing repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RepeatSource {
    /// A line of output.
    Output,
    /// A finished tool call: its name, input and result.
    ToolCall,
}

/// What repeats, said in a stall event, a status snapshot and the stall
/// line (R5.12).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use watchdog_core::repeat::{RepeatSource, Repeating};
///
/// let r = Repeating {
///     source: RepeatSource::Output,
///     shown: "waiting for db...".into(),
///     count: 9,
///     over: Duration::from_secs(10),
/// };
/// let json = serde_json::to_value(&r).unwrap();
/// assert_eq!(json["source"], "output");
/// assert_eq!(json["count"], 9);
/// assert_eq!(json["over_ms"], 10_000);
/// assert_eq!(r.to_string(), "the output repeats \"waiting for db...\" 9 times in 10s");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Repeating {
    /// A line of output or a tool call.
    pub source: RepeatSource,
    /// The line or the call as shown to a user: control characters
    /// replaced, cut to [`MAX_SHOWN`] characters with `…`.
    pub shown: String,
    /// How many times it was seen while in the window, the first included.
    pub count: u64,
    /// From its first sighting to the moment of the report.
    #[serde(rename = "over_ms", with = "crate::event::ms")]
    pub over: Duration,
}

use std::time::Duration;

impl fmt::Display for Repeating {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let over = humantime::format_duration(Duration::from_secs(self.over.as_secs()));
        match self.source {
            RepeatSource::Output => write!(
                f,
                "the output repeats \"{}\" {} times in {over}",
                self.shown, self.count
            ),
            RepeatSource::ToolCall => write!(
                f,
                "{} returned the same result {} times in {over}",
                self.shown, self.count
            ),
        }
    }
}

/// A fixed ring of fingerprints, each with how often it was seen and when
/// first.
struct Window {
    fps: [u64; WINDOW],
    seen: [u32; WINDOW],
    first: [u64; WINDOW],
    len: usize,
    /// Where the next new fingerprint goes (the oldest, once full).
    next: usize,
    /// The last hit: a flood of one line looks here first.
    last_hit: usize,
    /// Where the last fingerprint judged is, hit or new.
    last: usize,
}

impl Window {
    fn new() -> Self {
        Window {
            fps: [0; WINDOW],
            seen: [0; WINDOW],
            first: [0; WINDOW],
            len: 0,
            next: 0,
            last_hit: 0,
            last: 0,
        }
    }

    fn find(&self, fp: u64) -> Option<usize> {
        if self.len > 0 && self.fps[self.last_hit] == fp {
            return Some(self.last_hit);
        }
        self.fps[..self.len].iter().position(|&f| f == fp)
    }

    /// Some(index) when `fp` is in the window (its count raised); else it
    /// enters, the oldest leaving when full, and None.
    fn judge(&mut self, fp: u64, now: Nanos) -> Option<usize> {
        if let Some(i) = self.find(fp) {
            self.seen[i] = self.seen[i].saturating_add(1);
            self.last_hit = i;
            self.last = i;
            return Some(i);
        }
        let i = self.next;
        self.last = i;
        self.fps[i] = fp;
        self.seen[i] = 1;
        self.first[i] = now.as_nanos();
        self.next = (i + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
        None
    }
}

/// What repeated last: kept to say it at a stall.
struct Report {
    source: RepeatSource,
    fp: u64,
    shown: String,
    count: u64,
    first: Nanos,
    last: Nanos,
}

/// A small direct-mapped cache from a line's raw hash to its fingerprint,
/// so a line seen byte for byte is not read word by word again.
struct RawCache {
    slots: [(u64, u64); 64],
}

impl RawCache {
    fn fingerprint(&mut self, line: &[u8]) -> u64 {
        let raw = fingerprint::raw_hash(line) | 1;
        let slot = &mut self.slots[(raw >> 58) as usize];
        if slot.0 == raw {
            return slot.1;
        }
        let fp = fingerprint(line);
        *slot = (raw, fp);
        fp
    }
}

/// The judge a task's sources share.
pub(crate) struct Judge {
    lines: Window,
    /// Digests of a finished call's name, input and result.
    calls: Window,
    /// Digests of a started call's name and input.
    call_inputs: Window,
    cache: RawCache,
    report: Option<Report>,
}

impl Judge {
    fn new() -> Self {
        Judge {
            lines: Window::new(),
            calls: Window::new(),
            call_inputs: Window::new(),
            cache: RawCache {
                slots: [(0, 0); 64],
            },
            report: None,
        }
    }

    /// One ended line: true when it repeats one in the window.
    fn line(&mut self, line: &[u8], now: Nanos) -> bool {
        let fp = self.cache.fingerprint(line);
        match self.lines.judge(fp, now) {
            None => false,
            Some(i) => {
                let (seen, first) = (self.lines.seen[i], self.lines.first[i]);
                self.note(RepeatSource::Output, fp, seen, first, now, || {
                    shown(&String::from_utf8_lossy(line))
                });
                true
            }
        }
    }

    /// As [`Judge::line`], shown as `shown`.
    fn said(&mut self, key: &[u8], shown_as: &str, now: Nanos) -> bool {
        let fp = fingerprint(key);
        match self.lines.judge(fp, now) {
            None => false,
            Some(i) => {
                let (seen, first) = (self.lines.seen[i], self.lines.first[i]);
                self.note(RepeatSource::Output, fp, seen, first, now, || {
                    shown(shown_as)
                });
                true
            }
        }
    }

    /// A line byte for byte the one judged just before it: a repeat of the
    /// fingerprint judged last, without reading it again (a flood of one
    /// line costs a comparison per line).
    fn line_again(&mut self, line: &[u8], now: Nanos, times: u32) {
        let i = self.lines.last;
        self.lines.seen[i] = self.lines.seen[i].saturating_add(times);
        self.lines.last_hit = i;
        let (fp, seen, first) = (self.lines.fps[i], self.lines.seen[i], self.lines.first[i]);
        self.note(RepeatSource::Output, fp, seen, first, now, || {
            shown(&String::from_utf8_lossy(line))
        });
    }

    /// A call started: true when its name and input repeat a call in the
    /// window (a retry of a known call renews nothing until its result
    /// says something new).
    pub(crate) fn call_started(&mut self, input: u64, now: Nanos) -> bool {
        self.call_inputs.judge(input, now).is_some()
    }

    /// A call finished: true when its name, input and result repeat one in
    /// the window.
    pub(crate) fn call_finished(&mut self, digest: u64, name: &str, now: Nanos) -> bool {
        match self.calls.judge(digest, now) {
            None => false,
            Some(i) => {
                let (seen, first) = (self.calls.seen[i], self.calls.first[i]);
                self.note(RepeatSource::ToolCall, digest, seen, first, now, || {
                    shown(name)
                });
                true
            }
        }
    }

    /// A line not yet ended: true when what it holds so far is a line in
    /// the window (a spinner's frame written before its `\r`).
    fn partial(&mut self, line: &[u8]) -> bool {
        let fp = self.cache.fingerprint(line);
        self.lines.find(fp).is_some()
    }

    fn note(
        &mut self,
        source: RepeatSource,
        fp: u64,
        seen: u32,
        first: u64,
        now: Nanos,
        shown: impl FnOnce() -> String,
    ) {
        match &mut self.report {
            Some(r) if r.fp == fp && r.source == source => {
                r.count = u64::from(seen);
                r.last = now;
            }
            _ => {
                self.report = Some(Report {
                    source,
                    fp,
                    shown: shown(),
                    count: u64::from(seen),
                    first: Nanos::from_nanos(first),
                    last: now,
                });
            }
        }
    }

    /// What repeats, if something repeated at or after `since`.
    pub(crate) fn repeating(&self, since: Nanos, now: Nanos) -> Option<Repeating> {
        let r = self.report.as_ref().filter(|r| r.last >= since)?;
        Some(Repeating {
            source: r.source,
            shown: r.shown.clone(),
            count: r.count,
            over: now.saturating_since(r.first),
        })
    }
}

impl fmt::Debug for Judge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Judge")
            .field("lines", &self.lines.len)
            .field("calls", &self.calls.len)
            .field("repeating", &self.report.as_ref().map(|r| &r.shown))
            .finish()
    }
}

/// Shown to a user: control characters replaced (tabs and line ends by a
/// space, others by `?`, as a call's name is), cut to [`MAX_SHOWN`]
/// characters with `…`.
fn shown(s: &str) -> String {
    let s = s.trim();
    let mut out = String::with_capacity(s.len().min(MAX_SHOWN * 4));
    for (i, c) in s.chars().enumerate() {
        if i == MAX_SHOWN {
            out.push('…');
            break;
        }
        out.push(match c {
            '\n' | '\r' | '\t' => ' ',
            c if c.is_control() => '?',
            c => c,
        });
    }
    out
}

/// The digest of a call's tool name and input.
pub(crate) fn call_input(name: &str, input: &[u8]) -> u64 {
    let name = fingerprint::raw_hash(name.as_bytes());
    fingerprint::raw_hash(input) ^ name.rotate_left(17)
}

/// The digest of a finished call: its name and input, how it ended, and
/// its result's fingerprint (a clock in a result, as `in 0.12s`, is set
/// aside as in a line).
pub(crate) fn call_result(input: u64, outcome: crate::CallOutcome, result: &[u8]) -> u64 {
    let outcome = outcome as u64;
    fingerprint(result) ^ input.rotate_left(29) ^ outcome.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

pub(crate) type SharedJudge = Arc<Mutex<Judge>>;

pub(crate) fn new_judge() -> SharedJudge {
    Arc::new(Mutex::new(Judge::new()))
}

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
    recorder: Recorder,
}

impl fmt::Debug for Repeats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Repeats")
            .field("task", &self.recorder.id())
            .field("judge", &*self.judge.lock())
            .finish()
    }
}

impl Repeats {
    pub(crate) fn new(judge: SharedJudge, recorder: Recorder) -> Self {
        Repeats { judge, recorder }
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
        let now = self.recorder.now();
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
        let now = self.recorder.now();
        self.judge
            .lock()
            .repeating(self.recorder.last_renewal(), now)
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
        let now = self.repeats.recorder.now();
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
