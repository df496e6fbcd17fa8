//! Output readers (R5.1, R10.2, R10.3): bytes pass through unchanged, are
//! counted in O(1) memory, and reach the task's status totals.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{self, Read};
use std::time::Duration;

use stallwarden_sources::output::{AsyncCountingReader, CountingReader, Tail, DEFAULT_TAIL};
use watchdog_core::{Guard, ManualClock, Profile, RecordingSink, SignalKind};

/// Counts the bytes this thread has live on the heap, and the peak, so a test
/// can show that streaming a huge line allocates nothing per byte.
struct PeakAlloc;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LIVE.try_with(|l| {
            let v = l.get() + layout.size() as isize;
            l.set(v);
            let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
        });
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|l| l.set(l.get() - layout.size() as isize));
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

fn reset_peak() -> isize {
    let live = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(live));
    live
}

fn peak() -> isize {
    PEAK.with(Cell::get)
}

/// Yields `remaining` zero bytes (one endless line) without holding them.
struct Zeros {
    remaining: u64,
}

impl Read for Zeros {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.remaining) as usize;
        buf[..n].fill(0);
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// Returns at most `chunk` bytes per read, to exercise many small reads.
struct Trickle<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.chunk.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn guard() -> (Guard, RecordingSink) {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    (guard, rec)
}

fn awkward_bytes() -> Vec<u8> {
    // Binary, invalid UTF-8, CR LF, a lone CR, NULs, no trailing newline.
    let mut v = b"plain\r\nlone\rcr\n".to_vec();
    v.extend_from_slice(&[0xff, 0xfe, 0x00, 0xc3, 0x28, b'\n', 0x80, 0x00]);
    v.extend((0..=255u8).cycle().take(10_000));
    v.extend_from_slice(b"no newline at the end");
    v
}

#[test]
fn blocking_reader_passes_awkward_bytes_through_unchanged() {
    // R5.1, R10.3: never altered or truncated, whatever the encoding.
    let (guard, _) = guard();
    let task = guard.start("bytes", Profile::default()).unwrap();
    let data = awkward_bytes();
    let expected_lines = data.iter().filter(|b| **b == b'\n').count() as u64;
    let mut reader = CountingReader::new(
        Trickle {
            data: &data,
            chunk: 7,
        },
        task.recorder(),
    );
    let mut out = Vec::new();
    reader.read_to_end(&mut out).unwrap();
    assert_eq!(out, data);
    assert_eq!(reader.total_bytes(), data.len() as u64);
    assert_eq!(reader.total_lines(), expected_lines);
}

#[tokio::test]
async fn async_reader_passes_awkward_bytes_through_unchanged() {
    use tokio::io::AsyncReadExt;
    let (guard, _) = guard();
    let task = guard.start("bytes", Profile::default()).unwrap();
    let data = awkward_bytes();
    let tail = Tail::new(16);
    let mut reader = AsyncCountingReader::new(&data[..], task.recorder()).with_tail(tail.clone());
    let mut out = Vec::new();
    reader.read_to_end(&mut out).await.unwrap();
    assert_eq!(out, data);
    assert_eq!(reader.total_bytes(), data.len() as u64);
    assert_eq!(tail.snapshot(), &data[data.len() - 16..]);
}

#[tokio::test]
async fn async_reader_counts_output_of_a_real_child_process() {
    // R5.1 on a real pipe: printf writes 3 lines, the last without newline.
    use tokio::io::AsyncReadExt;
    let (guard, _) = guard();
    let task = guard.start("child", Profile::default()).unwrap();
    let mut child = tokio::process::Command::new("printf")
        .arg("a\\nbb\\n\\377ccc")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("printf runs");
    let stdout = child.stdout.take().unwrap();
    let mut reader = AsyncCountingReader::new(stdout, task.recorder());
    let mut out = Vec::new();
    reader.read_to_end(&mut out).await.unwrap();
    child.wait().await.unwrap();
    assert_eq!(out, b"a\nbb\n\xffccc");
    let status = task.status().unwrap();
    assert_eq!((status.total_bytes, status.total_lines), (9, 2));
}

#[test]
fn counts_reach_the_status_totals_and_renew_the_idle_budget() {
    // R5.1: each read with data is an `output` signal; R4.2 totals.
    let (guard, rec) = guard();
    let profile = Profile::default()
        .idle(Duration::from_millis(100))
        .heartbeat_interval(None);
    let task = guard.start("cmd", profile).unwrap();
    let mut reader = CountingReader::new(
        Trickle {
            data: b"line 1\nline 2\npartial",
            chunk: 7,
        },
        task.recorder(),
    );
    let mut buf = [0u8; 64];
    // Three reads, 90 ms apart: each renews, so no stall in 270 ms.
    for _ in 0..3 {
        guard.advance(Duration::from_millis(90));
        assert!(reader.read(&mut buf).unwrap() > 0);
    }
    assert_eq!(rec.types_for("cmd"), ["started"], "at {:?}", guard.now());
    let status = task.status().unwrap();
    assert_eq!(status.total_bytes, 21);
    assert_eq!(status.total_lines, 2);
    assert_eq!(status.last_output_age, Some(Duration::ZERO));
    assert!(task.last_signal(SignalKind::Output).is_some());
    // An empty read (EOF) is not a signal: silence runs out.
    assert_eq!(reader.read(&mut buf).unwrap(), 0);
    guard.advance(Duration::from_millis(100));
    assert_eq!(rec.types_for("cmd"), ["started", "stalled", "cancelling"]);
}

#[test]
fn one_256_mib_line_streams_in_bounded_memory() {
    // R5.1 / R10.2: a single enormous line costs O(1) memory; the tail stays
    // at its cap. Nothing is buffered per byte or per line.
    const SIZE: u64 = 256 << 20;
    let (guard, _) = guard();
    let task = guard.start("flood", Profile::default()).unwrap();
    let tail = Tail::default();
    let mut reader =
        CountingReader::new(Zeros { remaining: SIZE }, task.recorder()).with_tail(tail.clone());
    let mut buf = vec![0u8; 64 * 1024];
    let base = reset_peak();
    let mut seen = 0u64;
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        seen += n as u64;
    }
    let grew = peak() - base;
    assert_eq!(seen, SIZE);
    assert_eq!((reader.total_bytes(), reader.total_lines()), (SIZE, 0));
    assert!(grew < 64 * 1024, "streaming allocated {grew} bytes");
    assert_eq!(tail.len(), DEFAULT_TAIL);
    assert_eq!(tail.total(), SIZE);
    assert!(tail.snapshot().iter().all(|b| *b == 0));
    assert_eq!(task.status().unwrap().total_bytes, SIZE);
}

// R5.1: the tail is a 64 KiB ring by default, and whatever the writes'
// sizes and however they wrap it holds exactly the last `capacity` bytes
// written, oldest first (checked against the plain model: the end of the
// concatenation).
#[test]
fn the_tail_holds_exactly_the_last_bytes_however_writes_wrap() {
    assert_eq!(DEFAULT_TAIL, 64 * 1024);
    assert_eq!(Tail::default().capacity(), 64 * 1024);
    let mut runner = proptest::test_runner::TestRunner::default();
    let writes = proptest::collection::vec(
        proptest::collection::vec(proptest::num::u8::ANY, 0..40),
        0..12,
    );
    runner
        .run(&(1usize..32, writes), |(cap, writes)| {
            let tail = Tail::new(cap);
            proptest::prop_assert_eq!(tail.capacity(), cap);
            proptest::prop_assert!(tail.is_empty());
            let mut all = Vec::new();
            for w in &writes {
                tail.push(w);
                all.extend_from_slice(w);
                let want = &all[all.len().saturating_sub(cap)..];
                proptest::prop_assert_eq!(tail.snapshot(), want);
                proptest::prop_assert_eq!(tail.len(), want.len());
                proptest::prop_assert_eq!(tail.is_empty(), want.is_empty());
            }
            Ok(())
        })
        .unwrap();
}
