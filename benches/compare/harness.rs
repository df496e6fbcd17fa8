//! The harness: contenders that run a batch and return nanoseconds per
//! operation, taken round-robin batch by batch, and a pair of long-lived
//! threads that run a batch at the same moment.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use crate::BATCHES;

/// One contender: a name and a closure that runs `n` operations and
/// returns the cost of one in nanoseconds.
pub(crate) struct Contender {
    pub(crate) name: &'static str,
    ops: u64,
    run: Box<dyn FnMut(u64) -> f64>,
    samples: Vec<f64>,
}

impl Contender {
    pub(crate) fn new(name: &'static str, ops: u64, run: impl FnMut(u64) -> f64 + 'static) -> Self {
        Contender {
            name,
            ops,
            run: Box::new(run),
            samples: Vec::with_capacity(BATCHES),
        }
    }

    pub(crate) fn median(&self) -> f64 {
        median(&self.samples)
    }
}

pub(crate) fn median(samples: &[f64]) -> f64 {
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
pub(crate) fn per_op(n: u64, mut op: impl FnMut(u64)) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        op(i);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Runs every contender round-robin: one warm-up batch each, then
/// `batches` counted batches each, interleaved.
pub(crate) fn run_round_robin(contenders: &mut [Contender], batches: usize) {
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

/// One batch of work for a pair thread: runs `n` operations, returns the
/// nanoseconds per operation.
pub(crate) type PairJob = Box<dyn FnMut(u64) -> f64 + Send>;

/// Two long-lived threads that run one batch each at the same moment, so
/// a two-thread row measures recording, not thread start-up, and each
/// thread keeps its own counter across batches (R9.1).
pub(crate) struct Pair {
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
    pub(crate) fn spawn(jobs: [PairJob; 2]) -> Self {
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
    pub(crate) fn run(&self, n: u64) -> f64 {
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
