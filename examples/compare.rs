//! A side-by-side comparison of stallguard's record path and process sampler
//! with what a user would hand-roll (SPEC R9.1, R9.2, R9.4), in one process
//! and one run, printed as one table of medians and ratios.
//!
//! Run it with `cargo run --release --example compare`. Contenders take turns
//! batch by batch (round-robin), so drift in clock speed or machine load hits
//! all of them alike; each has a warm-up batch that is not counted, and each
//! row is the median over the batches. Nothing here asserts: targets are
//! reported as met or not met, and BENCHMARKS.md explains the misses.

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::task::Poll;
use std::time::{Duration, Instant};

use stallguard_sources::procs;
use watchdog_core::{Guard, Profile, Recorder, SignalKind, TaskHandle};

#[path = "../benches/support/mod.rs"]
mod support;
use support::{coarse_now, Tree};

/// Batches per contender; the median is taken over these.
const BATCHES: usize = 81;
/// Batches per process sampler.
const SAMPLER_BATCHES: usize = 41;
/// Operations per batch for the nanosecond-scale contenders.
const FAST_OPS: u64 = 200_000;
/// Operations per batch for an actor that must be woken per signal.
const WAKE_OPS: u64 = 2_000;
/// The idle budget every contender renews.
const IDLE: Duration = Duration::from_secs(300);

/// One contender: a name and a closure that runs `n` operations and
/// returns the cost of one in nanoseconds.
struct Contender {
    name: &'static str,
    ops: u64,
    run: Box<dyn FnMut(u64) -> f64>,
    samples: Vec<f64>,
}

impl Contender {
    fn new(name: &'static str, ops: u64, run: impl FnMut(u64) -> f64 + 'static) -> Self {
        Contender {
            name,
            ops,
            run: Box::new(run),
            samples: Vec::with_capacity(BATCHES),
        }
    }

    fn median(&self) -> f64 {
        median(&self.samples)
    }
}

fn median(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Times `n` calls of `op` and returns nanoseconds per call.
#[inline(always)]
fn per_op(n: u64, mut op: impl FnMut(u64)) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        op(i);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Runs every contender round-robin: one warm-up batch each, then
/// `batches` counted batches each, interleaved.
fn run_round_robin(contenders: &mut [Contender], batches: usize) {
    for c in contenders.iter_mut() {
        let ops = c.ops;
        black_box((c.run)(ops));
    }
    for _ in 0..batches {
        for c in contenders.iter_mut() {
            let ops = c.ops;
            let ns = (c.run)(ops);
            c.samples.push(ns);
        }
    }
}

fn profile() -> Profile {
    Profile::default().idle(IDLE)
}

/// Starts a task and takes it past its one-time slow path (the first
/// renewal ends startup), so batches measure the steady state.
fn started(guard: &Guard, name: &str) -> TaskHandle {
    let task = guard.start(name, profile()).expect("start task");
    task.output(1, 0);
    task.argument_delta();
    task
}

/// One batch of work for a pair thread: runs `n` operations, returns the
/// nanoseconds per operation.
type PairJob = Box<dyn FnMut(u64) -> f64 + Send>;

/// Two long-lived threads that run one batch each at the same moment, so
/// a two-thread row measures recording, not thread start-up, and each
/// thread keeps its own counter across batches (R9.1).
struct Pair {
    shared: Arc<PairShared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

struct PairShared {
    /// Operations in the next batch; 0 tells the threads to exit.
    ops: AtomicU64,
    /// The main thread and both workers meet here to start and end a batch.
    start: Barrier,
    done: Barrier,
    /// Workers that reached the spin barrier in this batch: the timed loops
    /// start together, not one wake-up apart.
    ready: AtomicU64,
    /// Each worker's nanoseconds per operation, as f64 bits.
    result: [AtomicU64; 2],
}

impl Pair {
    fn spawn(jobs: [PairJob; 2]) -> Self {
        let shared = Arc::new(PairShared {
            ops: AtomicU64::new(0),
            start: Barrier::new(3),
            done: Barrier::new(3),
            ready: AtomicU64::new(0),
            result: [AtomicU64::new(0), AtomicU64::new(0)],
        });
        let threads = jobs
            .into_iter()
            .enumerate()
            .map(|(i, mut job)| {
                let sh = Arc::clone(&shared);
                std::thread::spawn(move || loop {
                    sh.start.wait();
                    let n = sh.ops.load(Ordering::Acquire);
                    if n == 0 {
                        return;
                    }
                    sh.ready.fetch_add(1, Ordering::AcqRel);
                    while sh.ready.load(Ordering::Acquire) % 2 != 0 {
                        std::hint::spin_loop();
                    }
                    let ns = job(n);
                    sh.result[i].store(ns.to_bits(), Ordering::Release);
                    sh.done.wait();
                })
            })
            .collect();
        Pair { shared, threads }
    }

    /// Runs one batch of `n` on both threads; the slower thread's
    /// nanoseconds per operation.
    fn run(&self, n: u64) -> f64 {
        self.shared.ops.store(n, Ordering::Release);
        self.shared.start.wait();
        self.shared.done.wait();
        let [a, b] = &self.shared.result;
        f64::from_bits(a.load(Ordering::Acquire)).max(f64::from_bits(b.load(Ordering::Acquire)))
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.shared.ops.store(0, Ordering::Release);
        self.shared.start.wait();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Two threads, each recording to its own task through its own source's
/// counter (as a pipe reader does), kept for the whole run; a batch returns
/// the slower thread's nanoseconds per signal (R9.1 "lose ≤ 20 % each").
fn two_threads(a: &Recorder, b: &Recorder) -> Pair {
    let job = |rec: &Recorder| -> PairJob {
        let out = rec.output_counter();
        Box::new(move |n| per_op(n, |i| out.record(black_box(i & 63), 0)))
    };
    Pair::spawn([job(a), job(b)])
}

/// A cell alone on its own pair of cache lines.
#[repr(align(128))]
struct Padded(AtomicU64);

/// The floor on two long-lived threads at once, each storing into its own
/// padded cell: what the machine itself loses when both cores record.
fn two_threads_floor() -> Pair {
    let job = || -> PairJob {
        let cell = Box::new(Padded(AtomicU64::new(0)));
        Box::new(move |n| {
            per_op(n, |_| {
                black_box(&cell.0).store(coarse_now(), Ordering::Relaxed)
            })
        })
    };
    Pair::spawn([job(), job()])
}

/// A contender sampling `root` through a table kept across samples.
fn reused_table(name: &'static str, mut table: procs::ProcTable, root: u32) -> Contender {
    table.sample(root).expect("sample");
    Contender::new(name, 40, move |n| {
        per_op(n, |_| {
            drop(black_box(table.sample(root).expect("sample")));
        })
    })
}

/// What a user would send to a hand-rolled watchdog actor.
#[derive(Debug)]
enum Signal {
    Output(u64),
}

/// The actor a user would write: it owns the deadline (a `Sleep` reset on
/// each wake-up, after draining whatever queued up) and counts what it saw.
async fn watchdog_actor(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Signal>,
    processed: Arc<AtomicU64>,
) {
    let deadline = tokio::time::sleep(IDLE);
    tokio::pin!(deadline);
    let mut bytes = 0u64;
    loop {
        tokio::select! {
            msg = rx.recv() => {
                let Some(Signal::Output(n)) = msg else { break };
                bytes += n;
                let mut seen = 1;
                while let Ok(Signal::Output(n)) = rx.try_recv() {
                    bytes += n;
                    seen += 1;
                }
                deadline.as_mut().reset(tokio::time::Instant::now() + IDLE);
                processed.fetch_add(seen, Ordering::Release);
            }
            () = &mut deadline => {
                eprintln!("actor: stalled");
                deadline.as_mut().reset(tokio::time::Instant::now() + IDLE);
            }
        }
    }
    black_box(bytes);
}

/// One spawned actor on a runtime of its own, with one worker thread, so
/// it runs on the other core.
struct Actor {
    _rt: tokio::runtime::Runtime,
    tx: tokio::sync::mpsc::UnboundedSender<Signal>,
    processed: Arc<AtomicU64>,
    sent: u64,
}

impl Actor {
    fn spawn() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("actor runtime");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let processed = Arc::new(AtomicU64::new(0));
        rt.spawn(watchdog_actor(rx, Arc::clone(&processed)));
        Actor {
            _rt: rt,
            tx,
            processed,
            sent: 0,
        }
    }

    /// Spins until the actor has handled everything sent so far.
    fn wait_drained(&self) {
        let start = Instant::now();
        while self.processed.load(Ordering::Acquire) < self.sent {
            std::hint::spin_loop();
            if start.elapsed() > Duration::from_secs(30) {
                panic!("actor fell 30 s behind");
            }
        }
    }

    /// Sender-side cost while the actor drains on the other core; the
    /// queue is emptied between batches, outside the timing.
    fn draining(&mut self, n: u64) -> f64 {
        let tx = &self.tx;
        let ns = per_op(n, |i| {
            tx.send(Signal::Output(black_box(i & 63)))
                .expect("actor alive");
        });
        self.sent += n;
        self.wait_drained();
        ns
    }

    /// One signal at a time to a parked actor: send, then wait until the
    /// actor woke and handled it — the cost of waking the watchdog.
    fn woken(&mut self, n: u64) -> f64 {
        let t = Instant::now();
        for i in 0..n {
            self.tx
                .send(Signal::Output(black_box(i & 63)))
                .expect("actor alive");
            self.sent += 1;
            self.wait_drained();
        }
        t.elapsed().as_nanos() as f64 / n as f64
    }
}

/// Registers a future's timer the way a `select!` loop would: one poll.
fn poll_once<F: Future + ?Sized>(rt: &tokio::runtime::Runtime, mut fut: Pin<&mut F>) {
    rt.block_on(std::future::poll_fn(|cx| {
        let _ = fut.as_mut().poll(cx);
        Poll::Ready(())
    }));
}

// ---------------------------------------------------------------------------
// Process sampling (R9.4)

/// The descendants of `root` in a (pid, ppid) table, breadth first.
fn descendants(table: &[(u32, u32)], root: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(pid, ppid) in table {
            if ppid == p {
                out.push(pid);
                frontier.push(pid);
            }
        }
    }
    out
}

/// A descendant as `ps` reports it.
#[derive(Debug)]
#[allow(dead_code)] // fields are read through black_box only
struct PsRow {
    pid: u32,
    ppid: u32,
    etime: String,
    time: String,
    comm: String,
}

/// What a user would do without a sampler: spawn `ps`, parse, walk the tree.
fn sample_with_ps(root: u32) -> Vec<PsRow> {
    let out = Command::new("ps")
        .args(["-e", "-o", "pid=,ppid=,etime=,time=,comm="])
        .stderr(Stdio::null())
        .output()
        .expect("run ps");
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<PsRow> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some(PsRow {
                pid: f.next()?.parse().ok()?,
                ppid: f.next()?.parse().ok()?,
                etime: f.next()?.to_owned(),
                time: f.next()?.to_owned(),
                comm: f.collect::<Vec<_>>().join(" "),
            })
        })
        .collect();
    let table: Vec<(u32, u32)> = rows.iter().map(|r| (r.pid, r.ppid)).collect();
    let keep = descendants(&table, root);
    rows.into_iter().filter(|r| keep.contains(&r.pid)).collect()
}

/// What a user would do with `sysinfo`: refresh every process (it cannot
/// refresh "descendants of X"), then walk parents.
fn sample_with_sysinfo(sys: &mut sysinfo::System, root: u32) -> Vec<(u32, String, u64)> {
    sys.refresh_processes(sysinfo::ProcessesToUpdate::All, true);
    let table: Vec<(u32, u32)> = sys
        .processes()
        .iter()
        .filter_map(|(pid, p)| Some((pid.as_u32(), p.parent()?.as_u32())))
        .collect();
    descendants(&table, root)
        .into_iter()
        .filter_map(|pid| {
            let p = sys.process(sysinfo::Pid::from_u32(pid))?;
            Some((
                pid,
                p.name().to_string_lossy().into_owned(),
                p.accumulated_cpu_time(),
            ))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The table

/// A target from SPEC §9, checked against a measured value.
struct Target {
    text: String,
    met: bool,
}

fn target(met: bool, text: String) -> Target {
    Target { text, met }
}

fn met(ok: bool) -> &'static str {
    if ok {
        "MET    "
    } else {
        "NOT MET"
    }
}

fn row(name: &str, ns: f64, sg: f64, floor: f64, target: Option<Target>) {
    let verdict = match &target {
        Some(t) => format!("{} {}", met(t.met), t.text),
        None => String::new(),
    };
    println!(
        "{name:<44} {:>12} {:>9} {:>9}  {verdict}",
        fmt_ns(ns),
        format!("{:.2}x", ns / sg),
        format!("{:.2}x", ns / floor),
    );
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 10_000.0 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.2} ns")
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    format!("{cpu}, {cores} cores, load {load}")
}

fn count_processes() -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
                .count()
        })
        .unwrap_or(0)
}

fn main() {
    let started_at = Instant::now();
    println!("stallguard compare: {}", machine());

    // --- Recording a signal (R9.1, R9.2) -----------------------------------
    let guard = Guard::builder().build(); // the real MonotonicClock
    let one = started(&guard, "bench-one");
    // Keep the handles alive: dropping one finishes its task.
    let task_a = started(&guard, "bench-a");
    let task_b = started(&guard, "bench-b");
    let (a, b) = (task_a.recorder(), task_b.recorder());

    let floor_cell = Arc::new(AtomicU64::new(0));
    let mut contenders = Vec::new();
    {
        let cell = Arc::clone(&floor_cell);
        contenders.push(Contender::new(
            "floor: coarse clock read + atomic store",
            FAST_OPS,
            move |n| {
                per_op(n, |_| {
                    black_box(&*cell).store(coarse_now(), Ordering::Relaxed)
                })
            },
        ));
    }
    // Two diagnostic rows that explain output's distance from the floor:
    // the byte counter as a locked read-modify-write (what the core does)
    // and as a plain relaxed load and store (what a single writer needs).
    {
        let (cell, bytes) = (Arc::clone(&floor_cell), Arc::new(AtomicU64::new(0)));
        contenders.push(Contender::new(
            "diag: floor + fetch_add (a byte counter)",
            FAST_OPS,
            move |n| {
                per_op(n, |i| {
                    bytes.fetch_add(black_box(i & 63), Ordering::Relaxed);
                    black_box(&*cell).store(coarse_now(), Ordering::Relaxed);
                })
            },
        ));
    }
    {
        let (cell, bytes) = (Arc::clone(&floor_cell), Arc::new(AtomicU64::new(0)));
        contenders.push(Contender::new(
            "diag: floor + relaxed load/store add",
            FAST_OPS,
            move |n| {
                per_op(n, |i| {
                    let b = bytes.load(Ordering::Relaxed);
                    bytes.store(b + black_box(i & 63), Ordering::Relaxed);
                    black_box(&*cell).store(coarse_now(), Ordering::Relaxed);
                })
            },
        ));
    }
    {
        let out = one.output_counter();
        contenders.push(Contender::new(
            "stallguard output_counter.record(n, 0)",
            FAST_OPS,
            move |n| per_op(n, |i| out.record(black_box(i & 63), 0)),
        ));
    }
    {
        let out = one.output_counter();
        contenders.push(Contender::new(
            "stallguard output_counter.record(n, 1)",
            FAST_OPS,
            move |n| per_op(n, |i| out.record(black_box(i & 63), 1)),
        ));
    }
    {
        let rec = one.recorder();
        contenders.push(Contender::new(
            "stallguard recorder.output(n, 0)",
            FAST_OPS,
            move |n| per_op(n, |i| rec.output(black_box(i & 63), 0)),
        ));
    }
    {
        let rec = one.recorder();
        contenders.push(Contender::new(
            "stallguard recorder.output(n, 1)",
            FAST_OPS,
            move |n| per_op(n, |i| rec.output(black_box(i & 63), 1)),
        ));
    }
    {
        let rec = one.recorder();
        contenders.push(Contender::new(
            "stallguard recorder.argument_delta()",
            FAST_OPS,
            move |n| per_op(n, |_| rec.argument_delta()),
        ));
    }
    {
        let rec = one.recorder();
        contenders.push(Contender::new(
            "stallguard recorder.signal(Custom)",
            FAST_OPS,
            move |n| per_op(n, |_| rec.signal(black_box(SignalKind::Custom))),
        ));
    }
    {
        let pair = two_threads_floor();
        contenders.push(Contender::new(
            "diag: floor, 2 threads x 2 padded cells",
            FAST_OPS,
            move |n| pair.run(n),
        ));
    }
    {
        let pair = two_threads(&a, &b);
        contenders.push(Contender::new(
            "stallguard output, 2 threads x 2 tasks",
            FAST_OPS,
            move |n| pair.run(n),
        ));
    }
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let mut sleep = {
            let _enter = rt.enter();
            Box::pin(tokio::time::sleep(IDLE))
        };
        poll_once(&rt, sleep.as_mut());
        contenders.push(Contender::new(
            "tokio Sleep::reset(now + idle)",
            FAST_OPS,
            move |n| {
                let _enter = rt.enter();
                per_op(n, |_| {
                    sleep
                        .as_mut()
                        .reset(black_box(tokio::time::Instant::now() + IDLE))
                })
            },
        ));
    }
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let mut queue = {
            let _enter = rt.enter();
            tokio_util::time::DelayQueue::<u64>::new()
        };
        let key = {
            let _enter = rt.enter();
            queue.insert(0, IDLE)
        };
        rt.block_on(std::future::poll_fn(|cx| {
            let _ = queue.poll_expired(cx);
            Poll::Ready(())
        }));
        contenders.push(Contender::new(
            "tokio-util DelayQueue::reset(key, idle)",
            FAST_OPS,
            move |n| {
                let _enter = rt.enter();
                per_op(n, |_| queue.reset(black_box(&key), IDLE))
            },
        ));
    }
    {
        let mut actor = Actor::spawn();
        contenders.push(Contender::new(
            "mpsc actor, draining on the other core",
            FAST_OPS,
            move |n| actor.draining(n),
        ));
    }
    {
        let mut actor = Actor::spawn();
        contenders.push(Contender::new(
            "mpsc actor, woken per signal (round trip)",
            WAKE_OPS,
            move |n| actor.woken(n),
        ));
    }
    run_round_robin(&mut contenders, BATCHES);

    // --- Process sampling (R9.4) --------------------------------------------
    let tree = Tree::spawn();
    let root = tree.pid();
    // Let the shell fork its children before the first sample.
    let settle = Instant::now();
    while sample_with_ps(root).len() < 4 && settle.elapsed() < Duration::from_secs(5) {
        std::thread::yield_now();
    }
    let mut samplers = Vec::new();
    samplers.push(Contender::new(
        "stallguard procs::sample_once (one-shot)",
        40,
        move |n| {
            per_op(n, |_| {
                drop(black_box(procs::sample_once(root).expect("sample")));
            })
        },
    ));
    samplers.push(reused_table(
        "stallguard procs::ProcTable::sample (reused)",
        procs::ProcTable::new(),
        root,
    ));
    // What a kernel without children lists gets: the table walked.
    samplers.push(reused_table(
        "diag: ProcTable walk_only (reused)",
        procs::ProcTable::new().walk_only(),
        root,
    ));
    {
        let mut sys = sysinfo::System::new();
        sys.refresh_processes(sysinfo::ProcessesToUpdate::All, true);
        samplers.push(Contender::new(
            "sysinfo refresh_processes(All) + walk",
            20,
            move |n| per_op(n, |_| drop(black_box(sample_with_sysinfo(&mut sys, root)))),
        ));
    }
    samplers.push(Contender::new(
        "spawn ps -e -o pid,ppid,etime,time,comm",
        4,
        move |n| per_op(n, |_| drop(black_box(sample_with_ps(root)))),
    ));
    run_round_robin(&mut samplers, SAMPLER_BATCHES);
    drop(tree);

    // --- Print ---------------------------------------------------------------
    let floor = contenders[0].median();
    let floor2 = contenders
        .iter()
        .find(|c| c.name == "diag: floor, 2 threads x 2 padded cells")
        .map_or(f64::NAN, Contender::median);
    let sg = contenders
        .iter()
        .find(|c| c.name == "stallguard output_counter.record(n, 0)")
        .map_or(f64::NAN, Contender::median);
    println!(
        "{} batches x {} ops (woken actor: {} ops), medians in ns per signal; \
         ratios are the row's cost over stallguard output_counter.record(n, 0) and over the floor",
        BATCHES, FAST_OPS, WAKE_OPS
    );
    println!(
        "{:<44} {:>12} {:>9} {:>9}  target (SPEC §9)",
        "contender", "median", "vs sg", "vs floor"
    );
    for c in &contenders {
        let m = c.median();
        let t = match c.name {
            "stallguard output_counter.record(n, 0)" => Some(target(
                m <= 10.0 && m <= 1.5 * floor,
                format!("R9.1 <= 10 ns and <= 1.5x floor ({:.2} ns)", 1.5 * floor),
            )),
            "stallguard recorder.argument_delta()" => Some(target(
                m <= 10.0 && m <= 1.5 * floor,
                "R9.1 <= 10 ns and <= 1.5x floor".into(),
            )),
            // What two threads lose is judged against what the machine
            // loses on the same two-thread floor: a VM whose two vCPUs
            // share a physical core loses it whatever the code does.
            "stallguard output, 2 threads x 2 tasks" => Some(target(
                m <= 1.2 * sg || m <= 1.2 * sg * floor2 / floor,
                format!(
                    "R9.1 loses <= 20% each (lost {:.0}%; the floor itself lost {:.0}%)",
                    (m / sg - 1.0) * 100.0,
                    (floor2 / floor - 1.0) * 100.0
                ),
            )),
            "tokio Sleep::reset(now + idle)" => {
                Some(target(m >= 4.0 * sg, "R9.2 sg >= 4x faster".into()))
            }
            "tokio-util DelayQueue::reset(key, idle)" => {
                Some(target(m >= 8.0 * sg, "R9.2 sg >= 8x faster".into()))
            }
            "mpsc actor, draining on the other core" => {
                Some(target(m >= 6.0 * sg, "R9.2 sg >= 6x faster".into()))
            }
            _ => None,
        };
        row(c.name, m, sg, floor, t);
    }

    println!();
    println!(
        "process sampling of a root with 5 descendants, {} processes on the machine, \
         {SAMPLER_BATCHES} batches, median per full sample",
        count_processes()
    );
    // Every stallguard row is a full sample of the descendants. The
    // one-shot and the reused table follow the kernel's children lists
    // down from the root, reading only the tree; the walk_only row reads
    // the table instead, skipping pids known to be outside the tree and
    // reading everything every FULL_WALK_EVERY samples.
    let full = samplers[0].median();
    let reused = samplers[1].median();
    println!(
        "{:<44} {:>12} {:>9} {:>9}  target (SPEC R9.4)",
        "sampler", "median", "vs 1-shot", "vs reused"
    );
    for c in &samplers {
        let m = c.median();
        let t = match c.name {
            "sysinfo refresh_processes(All) + walk" => Some(target(
                m >= 4.0 * full,
                format!(
                    "R9.4 sg >= 4x cheaper (reused: {})",
                    met(m >= 4.0 * reused).trim_end()
                ),
            )),
            "spawn ps -e -o pid,ppid,etime,time,comm" => Some(target(
                m >= 10.0 * full,
                format!(
                    "R9.4 sg >= 10x cheaper (reused: {})",
                    met(m >= 10.0 * reused).trim_end()
                ),
            )),
            _ => Some(target(m <= 1e6, "R9.4 <= 1 ms".into())),
        };
        let verdict = t.map_or(String::new(), |t| format!("{} {}", met(t.met), t.text));
        println!(
            "{:<44} {:>12} {:>9} {:>9}  {verdict}",
            c.name,
            fmt_ns(m),
            format!("{:.2}x", m / full),
            format!("{:.2}x", m / reused),
        );
    }
    println!("\ntook {:.1} s", started_at.elapsed().as_secs_f64());
    drop((one, task_a, task_b));
}
