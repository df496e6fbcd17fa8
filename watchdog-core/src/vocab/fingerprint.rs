//! A line's fingerprint (R5.12): a hash of what the line says, with what
//! only a clock, a spinner frame or a retry counter changes set aside.
//!
//! The line is cut into words at ASCII whitespace (and `key=value` at its
//! `=`). A word is left out of the hash when it is
//! - a time, a date or a duration: `20:55:13`, `2026-12-07T20:55:13Z`,
//!   `12/07/2026`, `1.2s`, `350ms`, or a number before a unit word
//!   (`10 seconds`);
//! - a spinner frame or bare punctuation: `|`, `/`, `-`, `\`, `...`, a
//!   braille frame, anything with no letter or digit; trailing dots are
//!   dropped from every word (`Loading...` is `Loading`);
//! - a retry counter: a number beside `attempt`, `retry`, `try` and their
//!   forms (`attempt 3`, `attempt #3/10`, `3 of 10`, `retries=4`,
//!   `3 attempts`);
//! - the value of a `key=value` word whose key names a time (`ts=…`,
//!   `elapsed=…`).
//!
//! Everything else is kept as it is, digits included: a percent, a byte or
//! row count, `3/5`, a test's name, a result. So `progress 3/5` and
//! `progress 4/5` differ, and `[12:00:01] waiting for db (attempt 3)` and
//! `[12:00:02] waiting for db (attempt 4)` do not.
//!
//! No allocation: the words are found and hashed in one pass over the
//! line, holding the word before (for a number before a unit or a retry
//! word) and a count of words still to set aside after a retry word.
//!
//! Also here, the words a repeat is reported in: [`Repeating`] (what
//! repeats, said in a stall event, a status snapshot and the stall line),
//! [`RepeatSource`], and the line as shown to a user ([`MAX_SHOWN`]). They
//! sit with the fingerprint, below events and snapshots, which carry them;
//! the window that finds repeats is `state/window.rs`, the public face
//! ([`crate::repeat`]) `engine/repeat.rs`.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

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
    #[serde(rename = "over_ms", with = "crate::vocab::duration::ms")]
    pub over: Duration,
}

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

/// Words after a retry word that may still be its counter (`attempt` `#3`
/// `of` `10`).
const AFTER_RETRY: u8 = 3;

/// The fingerprint of `line`: equal for lines that differ only in times,
/// spinner frames and retry counters (see the module's rules).
///
/// # Examples
///
/// ```
/// use watchdog_core::repeat::fingerprint;
///
/// let a = fingerprint(b"[12:00:01] waiting for db (attempt 3)");
/// let b = fingerprint(b"[12:00:02] waiting for db (attempt 4)");
/// assert_eq!(a, b);
/// assert_ne!(fingerprint(b"progress 3/5"), fingerprint(b"progress 4/5"));
/// ```
pub fn fingerprint(line: &[u8]) -> u64 {
    let mut h = Hasher::new();
    let mut prev: Option<Word<'_>> = None;
    // Words after a retry word still to look at as its counter.
    let mut retry_left = 0u8;
    for raw in line.split(|b| b.is_ascii_whitespace()) {
        if raw.is_empty() {
            continue;
        }
        for (i, part) in split_key_value(raw).into_iter().enumerate() {
            let Some(part) = part else { continue };
            let word = Word::new(part);
            let value_of_time_key = i == 1 && prev.is_some_and(|p| p.is_time_word());
            if word.is_retry_word() {
                // `3 attempts`: the number held back was its counter.
                h.drop_held();
                h.word(word.core);
                retry_left = AFTER_RETRY;
            } else if word.core.is_empty() || !word.has_alnum() {
                // A spinner frame or punctuation: as if it were not there.
                continue;
            } else if value_of_time_key || word.is_time() {
                h.flush_held();
                retry_left = 0;
            } else if retry_left > 0 && (word.is_numberish() || word.is_of()) {
                retry_left -= 1;
            } else if word.is_unit_word() && prev.is_some_and(|p| p.is_number()) {
                // `10 seconds`: the number held back was a duration's.
                h.drop_held();
                h.word(word.core);
                retry_left = 0;
            } else if word.is_number() {
                // Held until the next word says whether it was a count, a
                // duration's number or a retry counter.
                h.hold(word.core);
                retry_left = 0;
            } else {
                h.flush_held();
                h.word(word.core);
                retry_left = 0;
            }
            prev = Some(word);
        }
    }
    h.flush_held();
    h.finish()
}

/// `key=value` as its two halves, and `=value` (a key spaced from its
/// sign, `time =12:00:01`) as an empty key and its value; any other word
/// as itself.
fn split_key_value(raw: &[u8]) -> [Option<&[u8]>; 2] {
    match raw.iter().position(|&b| b == b'=') {
        Some(i) => [Some(&raw[..i]), Some(&raw[i + 1..])],
        None => [Some(raw), None],
    }
}

/// One word with its surrounding punctuation taken off.
#[derive(Clone, Copy)]
struct Word<'a> {
    core: &'a [u8],
}

impl<'a> Word<'a> {
    fn new(raw: &'a [u8]) -> Self {
        let lead = |b: &u8| matches!(b, b'[' | b'(' | b'{' | b'<' | b'"' | b'\'' | b'#' | b'`');
        let trail = |b: &u8| {
            matches!(
                b,
                b']' | b')' | b'}' | b'>' | b'"' | b'\'' | b',' | b';' | b':' | b'.' | b'!' | b'`'
            )
        };
        let start = raw.iter().position(|b| !lead(b)).unwrap_or(raw.len());
        let raw = &raw[start..];
        let end = raw.iter().rposition(|b| !trail(b)).map_or(0, |i| i + 1);
        Word { core: &raw[..end] }
    }

    /// Has a letter or a digit: anything else is a spinner frame, a rule
    /// or bare punctuation. Non-ASCII letters count; braille, box and
    /// geometric shapes do not.
    fn has_alnum(&self) -> bool {
        if self.core.iter().any(u8::is_ascii_alphanumeric) {
            return true;
        }
        if self.core.is_ascii() {
            return false;
        }
        String::from_utf8_lossy(self.core)
            .chars()
            .any(char::is_alphanumeric)
    }

    fn is_number(&self) -> bool {
        let c = self.core;
        !c.is_empty() && c[0].is_ascii_digit() && c.iter().all(|b| b.is_ascii_digit() || *b == b'.')
    }

    /// A number, `3/10`, `3rd`, `#3`: what a retry counter looks like.
    fn is_numberish(&self) -> bool {
        let c = self.core;
        !c.is_empty()
            && c[0].is_ascii_digit()
            && c.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'/')
            && c.iter().filter(|b| b.is_ascii_alphabetic()).count() <= 2
    }

    fn is_of(&self) -> bool {
        self.core.eq_ignore_ascii_case(b"of") || self.core == b"/"
    }

    fn is_retry_word(&self) -> bool {
        // Most words are none of these: a length and first-letter check
        // spares the comparisons (a retry log reads every line word by
        // word).
        if !(3..=9).contains(&self.core.len()) || !matches!(self.core[0] | 0x20, b'a' | b'r' | b't')
        {
            return false;
        }
        const WORDS: [&[u8]; 9] = [
            b"attempt",
            b"attempts",
            b"retry",
            b"retries",
            b"retrying",
            b"try",
            b"tries",
            b"trying",
            b"reconnect",
        ];
        WORDS.iter().any(|w| self.core.eq_ignore_ascii_case(w))
    }

    fn is_time_word(&self) -> bool {
        if !(2..=9).contains(&self.core.len()) {
            return false;
        }
        const WORDS: [&[u8]; 9] = [
            b"ts",
            b"time",
            b"timestamp",
            b"elapsed",
            b"duration",
            b"took",
            b"date",
            b"uptime",
            b"eta",
        ];
        WORDS.iter().any(|w| self.core.eq_ignore_ascii_case(w))
    }

    fn is_unit_word(&self) -> bool {
        if self.core.len() > 7 {
            return false;
        }
        const WORDS: [&[u8]; 16] = [
            b"ns", b"us", b"ms", b"s", b"sec", b"secs", b"second", b"seconds", b"m", b"min",
            b"mins", b"minute", b"minutes", b"h", b"hour", b"hours",
        ];
        WORDS.iter().any(|w| self.core.eq_ignore_ascii_case(w))
    }

    /// A time, a date, a date-time or a duration.
    fn is_time(&self) -> bool {
        let c = self.core;
        if c.is_empty() || !(c[0].is_ascii_digit() || c[0] == b'+' || c[0] == b'-') {
            return false;
        }
        is_clock(c) || is_date(c) || is_duration(c)
    }
}

/// `20:55`, `20:55:13`, `20:55:13.123`, `20:55:13,123Z`, `+00:00`: digit
/// groups joined by `:` (every group after the first of two digits), an
/// optional fraction and zone.
fn is_clock(c: &[u8]) -> bool {
    let c = c.strip_prefix(b"+").or(c.strip_prefix(b"-")).unwrap_or(c);
    let c = c.strip_suffix(b"Z").unwrap_or(c);
    // Drop a fraction: `.123` or `,123`.
    let c = match c.iter().position(|&b| b == b'.' || b == b',') {
        Some(i) if c[i + 1..].iter().all(u8::is_ascii_digit) => &c[..i],
        Some(_) => return false,
        None => c,
    };
    let mut groups = c.split(|&b| b == b':');
    let Some(first) = groups.next() else {
        return false;
    };
    if first.is_empty() || first.len() > 3 || !first.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let mut n = 1;
    for g in groups {
        if g.len() != 2 || !g.iter().all(u8::is_ascii_digit) {
            return false;
        }
        n += 1;
    }
    n >= 2
}

/// `2026-12-07`, `2026-12-07T20:55:13Z`, `2026/12/07`, `12/07/2026`.
fn is_date(c: &[u8]) -> bool {
    let (date, rest) = match c.iter().position(|&b| b == b'T') {
        Some(i) => (&c[..i], Some(&c[i + 1..])),
        None => (c, None),
    };
    let sep = if date.contains(&b'-') { b'-' } else { b'/' };
    let mut lens = [0usize; 3];
    let mut n = 0;
    for g in date.split(|&b| b == sep) {
        if n == 3 || g.is_empty() || g.len() > 4 || !g.iter().all(u8::is_ascii_digit) {
            return false;
        }
        lens[n] = g.len();
        n += 1;
    }
    let shaped = n == 3 && (lens[0] == 4 || lens[2] == 4);
    match rest {
        None => shaped,
        Some(time) => shaped && (time.is_empty() || is_clock(strip_zone(time))),
    }
}

/// A time's zone: `+01:00` or `-0500` after the seconds.
fn strip_zone(t: &[u8]) -> &[u8] {
    match t.iter().skip(1).position(|&b| b == b'+' || b == b'-') {
        Some(i) => &t[..i + 1],
        None => t,
    }
}

/// `1.2s`, `350ms`, `2m30s`, `1h`, `12.5sec`: numbers each followed by a
/// unit, nothing else.
fn is_duration(c: &[u8]) -> bool {
    let mut rest = c;
    let mut parts = 0;
    while !rest.is_empty() {
        let digits = rest
            .iter()
            .position(|b| !(b.is_ascii_digit() || *b == b'.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let unit = rest
            .iter()
            .position(|b| !b.is_ascii_alphabetic() && *b != 0xc2 && *b != 0xb5)
            .unwrap_or(rest.len());
        let u = &rest[..unit];
        let known = [
            &b"ns"[..],
            b"us",
            "\u{b5}s".as_bytes(),
            b"ms",
            b"s",
            b"sec",
            b"secs",
            b"m",
            b"min",
            b"mins",
            b"h",
            b"hr",
            b"hrs",
        ];
        if !known.iter().any(|k| u.eq_ignore_ascii_case(k)) {
            return false;
        }
        rest = &rest[unit..];
        parts += 1;
    }
    parts > 0
}

/// FxHash-style mixing of words, one machine word at a time, with a number
/// held back until the next word says what it was.
struct Hasher {
    h: u64,
    held: Option<(u64, usize)>,
}

const K: u64 = 0x517c_c1b7_2722_0a95;

impl Hasher {
    fn new() -> Self {
        Hasher { h: 0, held: None }
    }

    fn mix(h: u64, v: u64) -> u64 {
        (h.rotate_left(5) ^ v).wrapping_mul(K)
    }

    fn hash_bytes(mut h: u64, bytes: &[u8]) -> u64 {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            h = Self::mix(h, u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let mut tail = [0u8; 8];
        let r = chunks.remainder();
        tail[..r.len()].copy_from_slice(r);
        Self::mix(h, u64::from_le_bytes(tail) ^ (bytes.len() as u64) << 56)
    }

    fn word(&mut self, w: &[u8]) {
        self.h = Self::hash_bytes(self.h, w);
    }

    fn hold(&mut self, w: &[u8]) {
        self.flush_held();
        self.held = Some((Self::hash_bytes(0, w), w.len()));
    }

    fn flush_held(&mut self) {
        if let Some((v, _)) = self.held.take() {
            self.h = Self::mix(self.h, v);
        }
    }

    fn drop_held(&mut self) {
        self.held = None;
    }

    fn finish(&self) -> u64 {
        // A murmur3 finaliser, so near lines spread over the whole word.
        let mut x = self.h ^ 0x9e37_79b9_7f4a_7c15;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
}

/// A fast hash of a line's raw bytes, for the cache that spares lines seen
/// byte for byte the word-by-word pass.
pub(crate) fn raw_hash(line: &[u8]) -> u64 {
    let h = Hasher::hash_bytes(0x2545_f491_4f6c_dd1d, line);
    Hasher { h, held: None }.finish()
}

/// Shown to a user: control characters replaced (tabs and line ends by a
/// space, others by `?`, as a call's name is), cut to [`MAX_SHOWN`]
/// characters with `…`.
pub(crate) fn shown(s: &str) -> String {
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
