//! Recording a signal (R9.1, R9.2): the floor, stallwarden's record paths,
//! and the peers a user would hand-roll (a tokio `Sleep`, a `DelayQueue`,
//! an mpsc actor), as contenders.

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use watchdog_core::{Guard, Profile, Recorder, SignalKind, TaskHandle};

use crate::harness::{per_op, Contender, Pair, PairJob};
use crate::support::coarse_now;
use crate::{FAST_OPS, IDLE, WAKE_OPS};

/// The record-path contenders, the floor first: `one` records alone, `a`
/// and `b` on two threads at once.
pub(crate) fn contenders(one: &TaskHandle, a: &Recorder, b: &Recorder) -> Vec<Contender> {
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
            "stallwarden output_counter.record(n, 0)",
            FAST_OPS,
            move |n| per_op(n, |i| out.record(black_box(i & 63), 0)),
        ));
    }
    {
        let out = one.output_counter();
        contenders.push(Contender::new(
            "stallwarden output_counter.record(n, 1)",
            FAST_OPS,
            move |n| per_op(n, |i| out.record(black_box(i & 63), 1)),
        ));
    }
    {
        let rec = one.recorder();
        contenders.push(Contender::new(
            "stallwarden recorder.output(n, 0)",
            FAST_OPS,
            move |n| per_op(n, |i| rec.output(black_box(i & 63), 0)),
        ));
    }
    {
        let rec = one.recorder();
        contenders.push(Contender::new(
            "stallwarden recorder.output(n, 1)",
            FAST_OPS,
            move |n| per_op(n, |i| rec.output(black_box(i & 63), 1)),
        ));
    }
    {
        let rec = one.recorder();
        contenders.push(Contender::new(
            "stallwarden recorder.argument_delta()",
            FAST_OPS,
            move |n| per_op(n, |_| rec.argument_delta()),
        ));
    }
    {
        let rec = one.recorder();
        contenders.push(Contender::new(
            "stallwarden recorder.signal(Custom)",
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
        let pair = two_threads(a, b);
        contenders.push(Contender::new(
            "stallwarden output, 2 threads x 2 tasks",
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
    contenders
}

fn profile() -> Profile {
    Profile::default().idle(IDLE)
}

/// Starts a task and takes it past its one-time slow path (the first
/// renewal ends startup), so batches measure the steady state.
pub(crate) fn started(guard: &Guard, name: &str) -> TaskHandle {
    let task = guard.start(name, profile()).expect("start task");
    task.output(1, 0);
    task.argument_delta();
    task
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
