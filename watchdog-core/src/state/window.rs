//! A task's window of repetition (R5.12): the last [`WINDOW`] line
//! fingerprints (and another of tool-call fingerprints), and what repeats
//! now. One [`Judge`] per task, allocated on first use and shared by its
//! output streams and its tool-call feed ([`SharedJudge`]); the public
//! entries that feed it are in `engine/repeat.rs` ([`crate::repeat`]).
//!
//! Lock order: the scheduler's lock, then a judge's (a stall verdict reads
//! the judge under the scheduler's lock); a judge's lock is never held
//! while taking the scheduler's.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::vocab::clock::Nanos;
use crate::vocab::fingerprint::{fingerprint, raw_hash, shown, RepeatSource, Repeating};
use crate::vocab::status::CallOutcome;

/// Fingerprints kept per task and per kind of thing judged (lines, calls).
pub const WINDOW: usize = 64;

/// The most bytes of one line judged; an endless line is cut here, and its
/// bytes past the cut count as output (a line not yet ended).
pub const MAX_LINE: usize = 4096;

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
        let raw = raw_hash(line) | 1;
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
    pub(crate) fn new() -> Self {
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
    pub(crate) fn line(&mut self, line: &[u8], now: Nanos) -> bool {
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
    pub(crate) fn said(&mut self, key: &[u8], shown_as: &str, now: Nanos) -> bool {
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
    pub(crate) fn line_again(&mut self, line: &[u8], now: Nanos, times: u32) {
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
    pub(crate) fn partial(&mut self, line: &[u8]) -> bool {
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
/// The digest of a call's tool name and input.
pub(crate) fn call_input(name: &str, input: &[u8]) -> u64 {
    let name = raw_hash(name.as_bytes());
    raw_hash(input) ^ name.rotate_left(17)
}

/// The digest of a finished call: its name and input, how it ended, and
/// its result's fingerprint (a clock in a result, as `in 0.12s`, is set
/// aside as in a line).
pub(crate) fn call_result(input: u64, outcome: CallOutcome, result: &[u8]) -> u64 {
    let outcome = outcome as u64;
    fingerprint(result) ^ input.rotate_left(29) ^ outcome.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

pub(crate) type SharedJudge = Arc<Mutex<Judge>>;

pub(crate) fn new_judge() -> SharedJudge {
    Arc::new(Mutex::new(Judge::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Nanos = Nanos::from_nanos(1_000);

    // R5.12: a window holds only what entered it, a fingerprint of 0
    // included: a call whose digest is 0 is new to an empty window (a
    // mutant once read the empty window's zeroed slot as a hit).
    #[test]
    fn a_digest_of_zero_is_new_to_an_empty_window() {
        // Read on these bytes: the digest 0, as any other.
        let input = b"zero:Rd\x00\x81\x0a\x5c\x6a\x11\x30\xdd\x97";
        assert_eq!(call_input("Read", input), 0);
        let mut judge = Judge::new();
        assert!(!judge.call_started(0, T0));
        assert!(judge.call_started(0, T0));
        assert!(!judge.call_finished(0, "Read", T0));
        assert!(judge.call_finished(0, "Read", T0));
    }

    // R5.12: the raw-line cache never takes an empty slot for a line's:
    // a line whose raw hash is 1 still gets its own fingerprint, the one
    // an uncached judgement gives it (a mutant once gave it the empty
    // slot's 0).
    #[test]
    fn a_line_whose_raw_hash_is_one_gets_its_own_fingerprint() {
        let line = b"cache:1\x00\x1b\x80\x6d\x54\x12\x41\x74\xe6";
        assert_eq!(raw_hash(line), 1);
        let mut judge = Judge::new();
        assert!(!judge.line(line, T0));
        assert!(judge.said(line, "cache:1", T0));
    }

    // R5.12: a call's digest tells two tools apart whatever their input,
    // an input whose raw hash is all zeros or all ones included (mutants
    // once folded the name into the input with `&` or `|`).
    #[test]
    fn a_calls_digest_tells_two_tools_apart_whatever_the_input() {
        let zeros = b"input:0\x00\xd1\xe3\x7b\xda\x6c\xf8\xfe\xfa";
        let ones = b"input:F\x00\x42\xba\xa7\x75\x76\x38\xcc\x8b";
        assert_eq!((raw_hash(zeros), raw_hash(ones)), (0, u64::MAX));
        for input in [&zeros[..], &ones[..], b"src/main.rs"] {
            assert_ne!(call_input("Read", input), call_input("Write", input));
        }
        assert_ne!(call_input("Read", b"a.rs"), call_input("Read", b"b.rs"));
    }

    // R5.12: a finished call's digest changes with any bit of its input's
    // digest, with its outcome and with its result (mutants once folded
    // them together with `&` or `|`).
    #[test]
    fn a_finished_calls_digest_changes_with_its_input_its_outcome_and_its_result() {
        let outcomes = [
            CallOutcome::Success,
            CallOutcome::Error,
            CallOutcome::Cancelled,
        ];
        let input = call_input("Bash(cargo test)", br#"{"command":"cargo test"}"#);
        for outcome in outcomes {
            let digest = call_result(input, outcome, b"3 passed");
            for bit in 0..64 {
                let other = call_result(input ^ (1 << bit), outcome, b"3 passed");
                assert_ne!(digest, other, "{outcome:?}, input bit {bit}");
            }
            assert_ne!(digest, call_result(input, outcome, b"4 passed"));
        }
        let digests = outcomes.map(|o| call_result(input, o, b"3 passed"));
        assert_ne!(digests[0], digests[1]);
        assert_ne!(digests[1], digests[2]);
        assert_ne!(digests[0], digests[2]);
    }
}
