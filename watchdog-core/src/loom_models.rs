//! Loom models of the engine's lock-free protocols (R10.5): every
//! interleaving of the threads below, and every value a relaxed load may
//! read, is explored on the crate's own code, its atomics and locks taken
//! from `crate::loom`.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p
//! watchdog-core --release --target-dir target/loom --lib loom_models`.

use std::sync::Arc;
use std::time::Duration;

use loom::thread;

use crate::engine::dispatch::Dispatcher;
use crate::engine::slab::{Slab, CHUNK};
use crate::state::outbox::Item;
use crate::state::task::TaskCtl;
use crate::vocab::event::{Event, EventKind, TaskId};
use crate::vocab::signal::SignalKind;
use crate::vocab::sink::{Delivery, RecordingSink, Sink, SinkError};
use crate::{Clock, Guard, ManualClock, Nanos, Profile};

/// Runs `f` under loom, bounded to `LOOM_MAX_PREEMPTIONS` (3 if unset).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// R3.3, R10.5: a renewal recorded while the driver takes a stall verdict
/// is never lost between them. Either the verdict sees it (no stall), or
/// the recorder sees the `STALLED` flag and takes the slow path, or the
/// driver sees it after raising the flag: in every case the task is not
/// left stalled with a renewal nobody absorbed, which would put its
/// `recovered` a whole budget late.
#[test]
fn a_renewal_racing_a_stall_verdict_is_never_missed() {
    model(|| {
        let clock = ManualClock::new();
        let rec = RecordingSink::new();
        let guard = Guard::builder()
            .clock(clock.clone())
            .sink(rec.clone())
            .build();
        let profile = Profile::default()
            .idle(Duration::from_secs(1))
            .terminate_after(3)
            .heartbeat_interval(None);
        let task = guard.start("t", profile).unwrap();
        // A first renewal ends startup, whose flag sends every renewal
        // down the slow path.
        task.signal(SignalKind::Output);
        // The budget runs out now; the driver has not looked yet.
        clock.advance(Duration::from_secs(1));
        let recorder = task.recorder();
        let r = thread::spawn(move || recorder.signal(SignalKind::Output));
        guard.tick();
        r.join().unwrap();
        let types = rec.types_for("t");
        let stalled = types.iter().filter(|t| **t == "stalled").count();
        let recovered = types.iter().filter(|t| **t == "recovered").count();
        assert_eq!(
            stalled, recovered,
            "a stall with the renewal that raced it unabsorbed: {types:?}"
        );
        drop(task);
    });
}

fn ctl(n: u64) -> TaskCtl {
    TaskCtl::new(
        TaskId::from_raw(n),
        format!("t{n}").into(),
        Arc::new(Profile::default()),
        None,
        Nanos::from_secs(1),
    )
}

/// R9.3, R10.5: a slot comes back only once the task and every recorder
/// let go, exactly once, and the next task's cell shows none of the old
/// recorders' writes, however late they came.
#[test]
fn a_slot_is_reused_once_every_holder_let_go_and_shows_none_of_their_writes() {
    model(|| {
        let mut slab = Slab::default();
        let (slot, first) = slab.insert(ctl(0)).unwrap();
        // Fill the chunk so that the only free slot can be `slot`.
        let _others: Vec<_> = (1..CHUNK as u64)
            .map(|n| slab.insert(ctl(n)).unwrap())
            .collect();
        let second = first.clone();
        let a = thread::spawn(move || {
            first.record(SignalKind::Output, Nanos::from_secs(7));
            drop(first);
        });
        let b = thread::spawn(move || {
            second.record(SignalKind::Heartbeat, Nanos::from_secs(8));
            drop(second);
        });
        slab.remove(slot);
        let (next, cell) = slab.insert(ctl(99)).unwrap();
        if next == slot {
            assert_eq!(cell.last(SignalKind::Output), None, "an old write");
            assert_eq!(cell.last(SignalKind::Heartbeat), None, "an old write");
        }
        a.join().unwrap();
        b.join().unwrap();
        if next != slot {
            // Every holder has gone now: the slot is free, once.
            let free = slab.free.lock().iter().filter(|&&s| s == slot).count();
            assert_eq!(free, 1, "slot {slot} freed {free} times");
        }
    });
}

/// R5.1, R9.1, R10.5: an output counter written by one thread at a time
/// (handed from thread to thread, as `Send` allows) counts exactly, and a
/// status taken meanwhile sees totals that only rise.
#[test]
fn an_output_counter_handed_between_threads_counts_exactly() {
    model(|| {
        let guard = Guard::builder().clock(ManualClock::new()).build();
        let task = guard.start("t", Profile::default()).unwrap();
        let counter = task.output_counter();
        let w = thread::spawn(move || {
            counter.record(10, 1);
            thread::spawn(move || counter.record(5, 0)).join().unwrap();
        });
        let first = task.status().unwrap().total_bytes;
        let second = task.status().unwrap().total_bytes;
        assert!([0, 10, 15].contains(&first), "torn total {first}");
        assert!(second >= first, "totals went back: {first} then {second}");
        w.join().unwrap();
        let status = task.status().unwrap();
        assert_eq!((status.total_bytes, status.total_lines), (15, 1));
    });
}

/// An isolated sink: its own queue and thread.
#[derive(Clone)]
struct Isolated(RecordingSink);

impl Sink for Isolated {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        self.0.on_event(event)
    }
    fn delivery(&self) -> Delivery {
        Delivery::Isolated
    }
}

fn started(name: &str, clock: &ManualClock) -> Item {
    Item::Event(Arc::new(Event {
        name: name.into(),
        task: TaskId::from_raw(1),
        wall: clock.wall_at(clock.now()),
        at: clock.now(),
        elapsed: Duration::ZERO,
        kind: EventKind::Started { pid: None },
    }))
}

/// R6.2, R10.5: two threads emitting at once, each draining: whoever holds
/// the drain delivers for both, so once both drains returned every event
/// reached the inline sink and the isolated sink's queue, and a flush
/// sees the isolated sink's thread handle them all.
#[test]
fn the_drain_hand_off_loses_no_event() {
    model(|| {
        let clock = ManualClock::new();
        let inline = RecordingSink::new();
        let isolated = RecordingSink::new();
        let sinks: Vec<Arc<dyn Sink>> = vec![
            Arc::new(inline.clone()),
            Arc::new(Isolated(isolated.clone())),
        ];
        let d = Arc::new(Dispatcher::new(sinks, None).unwrap());
        let emit = |name: &'static str| {
            let d = Arc::clone(&d);
            let item = started(name, &clock);
            thread::spawn(move || {
                d.push([item]);
                d.drain();
            })
        };
        let a = emit("a");
        let b = emit("b");
        a.join().unwrap();
        b.join().unwrap();
        let mut seen: Vec<_> = inline.events().iter().map(|e| e.name.to_string()).collect();
        seen.sort();
        assert_eq!(seen, ["a", "b"], "an event left in the outbox");
        assert!(d.flush(Duration::from_secs(1)));
        let mut seen: Vec<_> = isolated
            .events()
            .iter()
            .map(|e| e.name.to_string())
            .collect();
        seen.sort();
        assert_eq!(seen, ["a", "b"]);
    });
}
