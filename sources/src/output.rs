//! Output counting readers (R5.1, R5.12).
//!
//! [`CountingReader`] (blocking) and [`AsyncCountingReader`] (tokio) wrap a
//! reader, pass every byte through unchanged, and record each read with data
//! with its byte and newline counts: as an `output` signal, or as a
//! `repeat` when the lines it ends only repeat ones in the task's recent
//! window (the core's [`watchdog_core::repeat::LineJudge`]). Memory is
//! O(1) whatever the line length or encoding: nothing is buffered but the
//! line not yet ended (at most [`watchdog_core::repeat::MAX_LINE`] bytes)
//! and an optional bounded [`Tail`] for snapshots and monitors. Writing the bytes anywhere
//! (a terminal, a file) is the caller's business and does not live here.
//!
//! There is no rejection type in this module: a reader wrapper has no input
//! to refuse, and I/O errors pass through untouched.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, ReadBuf};
use watchdog_core::repeat::LineJudge;
use watchdog_core::{OutputCounter, Recorder, SignalKind};

/// The default size of an output tail: 64 KiB (R5.1).
pub const DEFAULT_TAIL: usize = 64 * 1024;

/// A bounded ring buffer of the last bytes of a stream, shared by cheap clones.
///
/// Clones see the same bytes, so a reader can push into one while a monitor
/// or status request takes [`Tail::snapshot`]s from another. The buffer is
/// allocated once at its capacity and never grows.
///
/// # Examples
///
/// ```
/// use stallwarden_sources::output::Tail;
///
/// let tail = Tail::new(4);
/// tail.push(b"hello");
/// tail.push(b"!");
/// assert_eq!(tail.snapshot(), b"llo!");
/// assert_eq!(tail.total(), 6);
/// ```
#[derive(Clone)]
pub struct Tail {
    ring: Arc<Mutex<Ring>>,
}

struct Ring {
    buf: Box<[u8]>,
    /// Where the next byte goes.
    head: usize,
    /// Bytes held, at most `buf.len()`.
    len: usize,
    /// Bytes ever pushed.
    total: u64,
}

impl fmt::Debug for Tail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.ring.lock();
        f.debug_struct("Tail")
            .field("capacity", &r.buf.len())
            .field("held", &r.len)
            .field("total", &r.total)
            .finish()
    }
}

impl Default for Tail {
    /// A tail of [`DEFAULT_TAIL`] bytes.
    fn default() -> Self {
        Tail::new(DEFAULT_TAIL)
    }
}

impl Tail {
    /// Creates a tail that keeps the last `capacity` bytes; 0 keeps nothing.
    pub fn new(capacity: usize) -> Self {
        Tail {
            ring: Arc::new(Mutex::new(Ring {
                buf: vec![0; capacity].into_boxed_slice(),
                head: 0,
                len: 0,
                total: 0,
            })),
        }
    }

    /// Appends `bytes`, dropping the oldest bytes past the capacity.
    pub fn push(&self, bytes: &[u8]) {
        let mut r = self.ring.lock();
        r.total = r.total.saturating_add(bytes.len() as u64);
        let cap = r.buf.len();
        if cap == 0 || bytes.is_empty() {
            return;
        }
        // Only the last `cap` bytes of a large write can survive.
        let bytes = &bytes[bytes.len().saturating_sub(cap)..];
        let head = r.head;
        let first = bytes.len().min(cap - head);
        r.buf[head..head + first].copy_from_slice(&bytes[..first]);
        let rest = bytes.len() - first;
        r.buf[..rest].copy_from_slice(&bytes[first..]);
        r.head = (head + bytes.len()) % cap;
        r.len = (r.len + bytes.len()).min(cap);
    }

    /// Returns a copy of the bytes held, oldest first.
    pub fn snapshot(&self) -> Vec<u8> {
        let r = self.ring.lock();
        let cap = r.buf.len();
        let mut out = Vec::with_capacity(r.len);
        if r.len == 0 {
            return out;
        }
        let start = (r.head + cap - r.len) % cap;
        if start + r.len <= cap {
            out.extend_from_slice(&r.buf[start..start + r.len]);
        } else {
            out.extend_from_slice(&r.buf[start..]);
            out.extend_from_slice(&r.buf[..r.head]);
        }
        out
    }

    /// Returns the most bytes the tail keeps.
    pub fn capacity(&self) -> usize {
        self.ring.lock().buf.len()
    }

    /// Returns how many bytes the tail holds now.
    pub fn len(&self) -> usize {
        self.ring.lock().len
    }

    /// Returns true when the tail holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns how many bytes were ever pushed, held or not.
    pub fn total(&self) -> u64 {
        self.ring.lock().total
    }
}

/// The counting shared by both readers: totals, the recorder, the tail.
struct Counter {
    /// This reader's own single-writer counter on the task (R9.1).
    output: OutputCounter,
    /// This stream's lines, judged against the task's window (R5.12).
    lines_judge: LineJudge,
    /// Count only: another source signals what these bytes mean.
    silent: bool,
    /// How the last read with data was recorded (R5.12); `None` before
    /// any, or when counting only.
    last: Option<SignalKind>,
    tail: Option<Tail>,
    bytes: u64,
    lines: u64,
}

impl Counter {
    #[inline]
    fn count(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.silent {
            let lines = memchr::memchr_iter(b'\n', data).count() as u64;
            self.bytes = self.bytes.saturating_add(data.len() as u64);
            self.lines = self.lines.saturating_add(lines);
            self.output.count(data.len() as u64, lines);
        } else {
            let verdict = self.lines_judge.feed(data);
            let lines = verdict.newlines;
            self.bytes = self.bytes.saturating_add(data.len() as u64);
            self.lines = self.lines.saturating_add(lines);
            self.output
                .record_as(data.len() as u64, lines, verdict.kind);
            self.last = Some(verdict.kind);
        }
        if let Some(tail) = &self.tail {
            tail.push(data);
        }
    }
}

impl fmt::Debug for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counter")
            .field("task", &self.output.recorder().id())
            .field("bytes", &self.bytes)
            .field("lines", &self.lines)
            .field("tail", &self.tail)
            .finish()
    }
}

macro_rules! reader_accessors {
    () => {
        /// Keeps the last bytes read in `tail` (see [`Tail`]).
        #[must_use]
        pub fn with_tail(mut self, tail: Tail) -> Self {
            self.counter.tail = Some(tail);
            self
        }

        /// Counts bytes and lines but signals nothing: for a stream whose
        /// meaning another source judges and signals, as an
        /// [`crate::agent::AgentStream`] does for an agent CLI's JSON lines
        /// (R5.12: what the agent says and calls, not raw lines whose ids
        /// always differ).
        #[must_use]
        pub fn counting_only(mut self) -> Self {
            self.counter.silent = true;
            self
        }

        /// Returns how the last read with data was recorded:
        /// [`SignalKind::Output`] for new work, [`SignalKind::Repeat`] for
        /// lines that only repeat recent ones (R5.12); `None` before any
        /// read with data, or when [counting only](Self::counting_only).
        /// A runner that holds bytes it has not judged yet (R8.16) can
        /// presume them like the last ones.
        pub fn last_kind(&self) -> Option<SignalKind> {
            self.counter.last
        }

        /// Returns the tail, if one was attached.
        pub fn tail(&self) -> Option<&Tail> {
            self.counter.tail.as_ref()
        }

        /// Returns the bytes read through this reader so far.
        pub fn total_bytes(&self) -> u64 {
            self.counter.bytes
        }

        /// Returns the newlines read through this reader so far.
        pub fn total_lines(&self) -> u64 {
            self.counter.lines
        }

        /// Returns the wrapped reader.
        pub fn get_ref(&self) -> &R {
            &self.inner
        }

        /// Returns the wrapped reader mutably; bytes read from it directly
        /// are not counted.
        pub fn get_mut(&mut self) -> &mut R {
            &mut self.inner
        }

        /// Unwraps the reader.
        pub fn into_inner(self) -> R {
            self.inner
        }
    };
}

/// A blocking reader that passes bytes through unchanged and records each
/// read with data as an `output` signal (R5.1), or a `repeat` when the
/// lines it ends only repeat recent ones (R5.12).
///
/// # Examples
///
/// ```
/// use std::io::Read;
/// use stallwarden_sources::output::{CountingReader, Tail};
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("cmd", Profile::default()).unwrap();
/// let tail = Tail::new(8);
/// let mut reader = CountingReader::new(&b"one\ntwo\nthree"[..], task.recorder())
///     .with_tail(tail.clone());
/// let mut out = Vec::new();
/// reader.read_to_end(&mut out).unwrap();
/// assert_eq!(out, b"one\ntwo\nthree");
/// assert_eq!((reader.total_bytes(), reader.total_lines()), (13, 2));
/// assert_eq!(tail.snapshot(), b"wo\nthree");
/// assert_eq!(task.status().unwrap().total_bytes, 13);
/// ```
#[derive(Debug)]
pub struct CountingReader<R> {
    inner: R,
    counter: Counter,
}

impl<R: io::Read> CountingReader<R> {
    /// Wraps `inner`, recording output on `recorder`'s task.
    pub fn new(inner: R, recorder: Recorder) -> Self {
        CountingReader {
            inner,
            counter: Counter {
                output: recorder.output_counter(),
                lines_judge: recorder.repeats().lines(),
                silent: false,
                last: None,
                tail: None,
                bytes: 0,
                lines: 0,
            },
        }
    }

    reader_accessors!();
}

impl<R: io::Read> io::Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.count(&buf[..n]);
        Ok(n)
    }
}

/// An async reader that passes bytes through unchanged and records each
/// read with data as an `output` signal (R5.1), or a `repeat` when the
/// lines it ends only repeat recent ones (R5.12).
///
/// The wrapped reader must be `Unpin` (a child's stdout or stderr is); box
/// and pin one that is not. Reading is cancel safe when the wrapped reader's
/// is: bytes are counted only once they are in the caller's buffer.
///
/// # Examples
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use tokio::io::AsyncReadExt;
/// use stallwarden_sources::output::AsyncCountingReader;
/// use watchdog_core::{Guard, ManualClock, Profile};
///
/// let guard = Guard::builder().clock(ManualClock::new()).build();
/// let task = guard.start("cmd", Profile::default()).unwrap();
/// let mut reader = AsyncCountingReader::new(&b"\xff\xfe\nbinary"[..], task.recorder());
/// let mut out = Vec::new();
/// reader.read_to_end(&mut out).await.unwrap();
/// assert_eq!(out, b"\xff\xfe\nbinary");
/// assert_eq!((reader.total_bytes(), reader.total_lines()), (9, 1));
/// # });
/// ```
#[derive(Debug)]
pub struct AsyncCountingReader<R> {
    inner: R,
    counter: Counter,
}

impl<R: AsyncRead + Unpin> AsyncCountingReader<R> {
    /// Wraps `inner`, recording output on `recorder`'s task.
    pub fn new(inner: R, recorder: Recorder) -> Self {
        AsyncCountingReader {
            inner,
            counter: Counter {
                output: recorder.output_counter(),
                lines_judge: recorder.repeats().lines(),
                silent: false,
                last: None,
                tail: None,
                bytes: 0,
                lines: 0,
            },
        }
    }

    reader_accessors!();
}

impl<R: AsyncRead + Unpin> AsyncRead for AsyncCountingReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.counter.count(&buf.filled()[before..]);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tail;

    #[test]
    fn tail_wraps_and_keeps_the_newest_bytes() {
        let t = Tail::new(5);
        for chunk in [&b"ab"[..], b"cd", b"ef", b"g"] {
            t.push(chunk);
        }
        assert_eq!(t.snapshot(), b"cdefg");
        t.push(b"0123456789");
        assert_eq!(t.snapshot(), b"56789");
        assert_eq!(t.total(), 17);
    }

    #[test]
    fn zero_capacity_tail_keeps_nothing() {
        let t = Tail::new(0);
        t.push(b"abc");
        assert!(t.is_empty());
        assert_eq!(t.total(), 3);
    }
}
