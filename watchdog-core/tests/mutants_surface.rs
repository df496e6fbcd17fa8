//! Tests that bite (SPEC §10), second half: sink dispatch and the driver
//! thread (R6.1–R6.3), and the small value types every sink and config
//! reads (clock, profile ranges, signal kinds, events). Each pins a
//! behaviour a surviving mutant showed loose; see TESTING.md.
//!
//! Timing logic runs in virtual time. The few tests that need the real
//! driver or a sink thread poll with a bounded wait and assert no duration.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, SystemTime};

use parking_lot::{Condvar, Mutex};
use watchdog_core::sys::{state_from_code, ProcStat};
use watchdog_core::{
    duration_from_millis, Action, Budget, ChildInfo, Clock, Delivered, Delivery, DurationError,
    Event, EventKind, Guard, KindSet, Limit, ManualClock, MonotonicClock, Nanos, OptionValue,
    Outcome, ProcState, Profile, RecordingSink, SignalKind, Sink, SinkError, TaskId,
};

mod common;
use common::{ms, secs};

/// A bound for waits on real threads: generous, never a timing assert.
const PATIENCE: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------
// Isolated sinks (R6.2)
// ---------------------------------------------------------------------------

/// A gate a sink thread can be held at until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock();
        while !*open {
            self.cv.wait(&mut open);
        }
    }

    fn open(&self) {
        *self.open.lock() = true;
        self.cv.notify_all();
    }
}

/// An isolated sink that holds its thread at the gate on the first event
/// of type `hold_on`, then records like a [`RecordingSink`].
struct HeldSink {
    hold_on: &'static str,
    gate: Arc<Gate>,
    seen: RecordingSink,
}

impl Sink for HeldSink {
    fn on_event(&self, event: &Event) -> Result<(), SinkError> {
        if event.kind.type_name() == self.hold_on {
            self.gate.wait();
        }
        self.seen.on_event(event)
    }

    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        self.seen.on_action(action)
    }
}

fn held(hold_on: &'static str) -> (HeldSink, Arc<Gate>, RecordingSink) {
    let gate = Arc::new(Gate::default());
    let seen = RecordingSink::new();
    (
        HeldSink {
            hold_on,
            gate: Arc::clone(&gate),
            seen: seen.clone(),
        },
        gate,
        seen,
    )
}

fn count(rec: &RecordingSink, ty: &str) -> usize {
    rec.events()
        .iter()
        .filter(|e| e.kind.type_name() == ty)
        .count()
}

// R6.2: heartbeats queued for a slow sink are coalesced past a backlog of
// 64, critical events never are, and once the sink catches up its
// heartbeats flow again.
#[test]
fn slow_sink_heartbeats_coalesce_at_the_backlog_and_recover() {
    let (slow, gate, seen) = held("started");
    let inline = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(slow)
        .sink(inline.clone())
        .build();
    let t = guard
        .start(
            "hb",
            Profile::default()
                .idle(secs(3600))
                .heartbeat_interval(Some(secs(1))),
        )
        .unwrap();
    guard.advance(secs(200)); // 200 heartbeats while the sink is held
    assert_eq!(count(&inline, "heartbeat"), 200, "inline sinks get all");
    gate.open();
    assert!(guard.flush(PATIENCE), "the sink caught up");
    assert_eq!(count(&seen, "heartbeat"), 64, "backlog of 64 kept");
    guard.advance(secs(10)); // the backlog is empty again: all 10 pass
    t.finish_completed();
    assert!(guard.flush(PATIENCE));
    assert_eq!(count(&seen, "heartbeat"), 74);
    seen.assert_settled("hb");
    assert_eq!(seen.types_for("hb")[0], "started");
}

// R6.2: a slow sink's coalesced heartbeats are said in the log at every
// power of two, with the running count, so the warning neither floods the
// log nor hides how far behind the sink fell.
#[test]
fn coalesced_heartbeats_are_logged_at_each_power_of_two() {
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let log = Lines::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .finish();
    let (slow, gate, _seen) = held("started");
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(slow)
        .build();
    let _t = guard
        .start(
            "hb",
            Profile::default()
                .idle(secs(3600))
                .heartbeat_interval(Some(secs(1))),
        )
        .unwrap();
    // 200 heartbeats while the sink is held: 64 queued, 136 coalesced.
    tracing::subscriber::with_default(subscriber, || guard.advance(secs(200)));
    gate.open();
    assert!(guard.flush(PATIENCE));
    let text = String::from_utf8(log.0.lock().clone()).unwrap();
    let counts: Vec<u64> = text
        .lines()
        .filter(|l| l.contains("heartbeats coalesced"))
        .map(|l| {
            let n = l.split("coalesced=").nth(1).expect(l);
            n.split_whitespace().next().unwrap().parse().expect(l)
        })
        .collect();
    assert_eq!(counts, [1, 2, 4, 8, 16, 32, 64, 128], "{text}");
}

// R6.2: flush waits for the event a sink is still handling, not only for
// its queue to empty; it reports false while that sink is stuck.
#[test]
fn flush_waits_for_the_item_in_hand() {
    let (slow, gate, seen) = held("finished");
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(slow)
        .build();
    let t = guard
        .start("f", Profile::default().heartbeat_interval(None))
        .unwrap();
    t.finish_completed();
    assert!(seen.wait_for("f", "started", PATIENCE));
    assert!(
        !guard.flush(ms(1500)),
        "the sink still holds `finished`: not flushed"
    );
    assert_eq!(seen.types_for("f"), ["started"]);
    gate.open();
    assert!(guard.flush(PATIENCE));
    assert_eq!(seen.types_for("f"), ["started", "finished"]);
}

// R6.2: a guard with no isolated sink is always flushed.
#[test]
fn flush_without_isolated_sinks_is_immediate() {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let t = guard.start("i", Profile::default()).unwrap();
    assert!(guard.flush(Duration::ZERO));
    t.finish_completed();
    assert!(guard.flush(Duration::ZERO));
    rec.assert_settled("i");
}

/// Records the name of the thread each event was delivered on.
#[derive(Clone, Default)]
struct ThreadNames(Arc<Mutex<Vec<String>>>);

struct NamedSink {
    name: &'static str,
    delivery: Delivery,
    threads: ThreadNames,
}

impl Sink for NamedSink {
    fn on_event(&self, _: &Event) -> Result<(), SinkError> {
        let name = std::thread::current()
            .name()
            .unwrap_or("<unnamed>")
            .to_owned();
        self.threads.0.lock().push(name);
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        self.delivery
    }

    fn name(&self) -> &str {
        self.name
    }
}

// R6.2: an isolated sink runs on its own thread, named after the last path
// segment of the sink's name so a stuck sink is easy to spot; an inline
// sink runs on the caller's thread. Wrappers forward both (R6.1).
#[test]
fn isolated_sinks_run_on_a_named_thread_of_their_own() {
    let iso = ThreadNames::default();
    let boxed = ThreadNames::default();
    let arced = ThreadNames::default();
    let inline = ThreadNames::default();
    let sink = |name, delivery, threads: &ThreadNames| NamedSink {
        name,
        delivery,
        threads: threads.clone(),
    };
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink("probe::journal", Delivery::Isolated, &iso))
        .sink(Box::new(sink("boxed", Delivery::Isolated, &boxed)))
        .shared_sink(Arc::new(Arc::new(sink(
            "a::b::arced",
            Delivery::Isolated,
            &arced,
        ))))
        .sink(Box::new(sink("inline", Delivery::Inline, &inline)))
        .build();
    let t = guard.start("n", Profile::default()).unwrap();
    t.finish_completed();
    assert!(guard.flush(PATIENCE));
    assert_eq!(*iso.0.lock(), ["stallwarden-sink-journal"; 2]);
    assert_eq!(*boxed.0.lock(), ["stallwarden-sink-boxed"; 2]);
    assert_eq!(*arced.0.lock(), ["stallwarden-sink-arced"; 2]);
    let here = std::thread::current().name().unwrap().to_owned();
    assert_eq!(*inline.0.lock(), [here.clone(), here]);
}

/// Tells the test when it is dropped, i.e. when the guard let go of it.
struct DropAlarm {
    tx: Mutex<mpsc::Sender<&'static str>>,
    label: &'static str,
    delivery: Delivery,
}

impl Sink for DropAlarm {
    fn delivery(&self) -> Delivery {
        self.delivery
    }
}

impl Drop for DropAlarm {
    fn drop(&mut self) {
        let _ = self.tx.lock().send(self.label);
    }
}

// R6.3: dropping the last guard and handle stops the driver thread and
// every sink thread, which releases the sinks (no leaked threads).
#[test]
fn dropping_the_guard_stops_the_driver_and_sink_threads() {
    let (tx, rx) = mpsc::channel();
    let alarm = |label, delivery| DropAlarm {
        tx: Mutex::new(tx.clone()),
        label,
        delivery,
    };
    let guard = Guard::builder()
        .sink(alarm("isolated", Delivery::Isolated))
        .sink(alarm("inline", Delivery::Inline))
        .build();
    let t = guard
        .start("d", Profile::default().idle(secs(3600)))
        .unwrap();
    t.finish_completed();
    drop(t);
    drop(guard);
    let mut dropped = vec![
        rx.recv_timeout(PATIENCE)
            .expect("a sink was never released"),
        rx.recv_timeout(PATIENCE)
            .expect("a sink was never released"),
    ];
    dropped.sort_unstable();
    assert_eq!(dropped, ["inline", "isolated"]);
}

// R6.3, R9.3: on a real clock a task whose budget ends before the one the
// driver is parked for wakes the driver: its stall is not held back until
// the earlier-armed, later timer.
#[test]
fn driver_wakes_for_a_new_earlier_due() {
    let rec = RecordingSink::new();
    let guard = Guard::builder().sink(rec.clone()).build();
    let _slow = guard
        .start(
            "slow",
            Profile::default()
                .idle(secs(3600))
                .long_running_after(ms(1))
                .heartbeat_interval(None),
        )
        .unwrap();
    // Once `long_running` is out the driver has planned its next wake for
    // the hour-long budget and parks for it.
    assert!(rec.wait_for("slow", "long_running", PATIENCE));
    let _fast = guard
        .start(
            "fast",
            Profile::default()
                .idle(ms(50))
                .terminate_after(0)
                .heartbeat_interval(None),
        )
        .unwrap();
    assert!(
        rec.wait_for("fast", "stalled", PATIENCE),
        "the driver slept through an earlier due"
    );
    assert_eq!(rec.types_for("slow"), ["started", "long_running"]);
}

// ---------------------------------------------------------------------------
// Sink wrappers and the recording sink (R6.1)
// ---------------------------------------------------------------------------

// R6.1: wrappers forward delivery and name; `None` is an inline no-op; a
// Vec is inline only when every element is.
#[test]
fn sink_wrappers_forward_delivery_and_name() {
    let rec = RecordingSink::new();
    assert_eq!(rec.delivery(), Delivery::Inline);
    assert_eq!(rec.name(), "recording");
    let boxed: Box<dyn Sink> = Box::new(rec.clone());
    assert_eq!(
        (boxed.delivery(), boxed.name()),
        (Delivery::Inline, "recording")
    );
    let arced: Arc<dyn Sink> = Arc::new(rec.clone());
    assert_eq!(
        (arced.delivery(), arced.name()),
        (Delivery::Inline, "recording")
    );
    let some = Some(rec.clone());
    assert_eq!(
        (some.delivery(), some.name()),
        (Delivery::Inline, "recording")
    );
    let none: Option<RecordingSink> = None;
    assert_eq!((none.delivery(), none.name()), (Delivery::Inline, "none"));

    struct Plain;
    impl Sink for Plain {}
    assert_eq!(Plain.delivery(), Delivery::Isolated, "isolated by default");
    assert!(Plain.name().ends_with("Plain"), "{}", Plain.name());
    assert_eq!(Some(Plain).delivery(), Delivery::Isolated);
    assert_eq!(Box::new(Plain).delivery(), Delivery::Isolated);
    assert_eq!(Arc::new(Plain).delivery(), Delivery::Isolated);

    assert_eq!(vec![rec.clone(), rec.clone()].delivery(), Delivery::Inline);
    assert_eq!(Vec::<RecordingSink>::new().delivery(), Delivery::Inline);
    let mixed: Vec<Box<dyn Sink>> = vec![Box::new(rec), Box::new(Plain)];
    assert_eq!(mixed.delivery(), Delivery::Isolated);
    let isolated: Vec<Box<dyn Sink>> = vec![Box::new(Plain), Box::new(Plain)];
    assert_eq!(isolated.delivery(), Delivery::Isolated);
}

/// Counts calls and fails every one of them.
#[derive(Default)]
struct Refusing(AtomicUsize);

impl Sink for Refusing {
    fn on_event(&self, _: &Event) -> Result<(), SinkError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(SinkError::new("refused"))
    }
    fn on_action(&self, _: &Action) -> Result<(), SinkError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(SinkError::new("refused"))
    }
}

// R6.1: a Vec of sinks returns the first error after calling every element;
// `Option` and `Box` pass errors through.
#[test]
fn sink_wrappers_pass_errors_through() {
    let event = Event {
        name: "e".into(),
        task: TaskId::from_raw(1),
        wall: SystemTime::UNIX_EPOCH,
        at: Nanos::ZERO,
        elapsed: Duration::ZERO,
        kind: EventKind::LongRunning,
    };
    let action = Action {
        task: TaskId::from_raw(1),
        name: "e".into(),
        pid: None,
        kind: watchdog_core::ActionKind::Kill,
    };
    let refusing = Arc::new(Refusing::default());
    let rec = RecordingSink::new();
    let v: Vec<Box<dyn Sink>> = vec![
        Box::new(Arc::clone(&refusing)),
        Box::new(rec.clone()),
        Box::new(Arc::clone(&refusing)),
    ];
    assert_eq!(v.on_event(&event).unwrap_err().to_string(), "refused");
    assert_eq!(v.on_action(&action).unwrap_err().to_string(), "refused");
    assert_eq!(refusing.0.load(Ordering::SeqCst), 4);
    assert_eq!(rec.delivered().len(), 2);
    assert!(Some(Arc::clone(&refusing)).on_event(&event).is_err());
    assert!(Some(Arc::clone(&refusing)).on_action(&action).is_err());
    assert!(None::<Refusing>.on_event(&event).is_ok());
    assert!(None::<Refusing>.on_action(&action).is_ok());
    let boxed: Box<dyn Sink> = Box::new(Arc::clone(&refusing));
    assert!(boxed.on_action(&action).is_err());
    assert_eq!(refusing.0.load(Ordering::SeqCst), 7);
}

// The recording sink's accessors return exactly what it received, in order.
#[test]
fn recording_sink_accessors_return_what_was_delivered() {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let a = guard
        .start("a", Profile::default().idle(secs(1)).grace_period(secs(1)))
        .unwrap();
    let b = guard.start("b", Profile::default()).unwrap();
    guard.advance(secs(1));
    let delivered = rec.delivered();
    assert_eq!(delivered.len(), 5);
    assert!(matches!(&delivered[3], Delivered::Event(e) if e.kind.type_name() == "cancelling"));
    assert!(matches!(&delivered[4], Delivered::Action(a) if &*a.name == "a"));
    assert_eq!(rec.events().len(), 4);
    assert_eq!(rec.actions().len(), 1);
    assert_eq!(rec.types_for("a"), ["started", "stalled", "cancelling"]);
    assert_eq!(rec.events_of(b.id()).len(), 1);
    assert_eq!(rec.events_of(a.id()).len(), 3);
    assert!(rec.wait_for("a", "stalled", Duration::ZERO));
    assert!(!rec.wait_for("b", "stalled", ms(20)));
    rec.clear();
    assert!(rec.delivered().is_empty());
    drop((a, b));
    assert_eq!(rec.types_for("a"), ["finished"]);
}

#[test]
#[should_panic(expected = "finished is not last")]
fn assert_settled_refuses_a_finish_that_is_not_last() {
    let rec = RecordingSink::new();
    let event = |kind| Event {
        name: "x".into(),
        task: TaskId::from_raw(1),
        wall: SystemTime::UNIX_EPOCH,
        at: Nanos::ZERO,
        elapsed: Duration::ZERO,
        kind,
    };
    rec.on_event(&event(EventKind::Finished {
        outcome: Outcome::Completed,
        exit_code: None,
        signal: None,
    }))
    .unwrap();
    rec.on_event(&event(EventKind::LongRunning)).unwrap();
    rec.assert_settled("x");
}

#[test]
#[should_panic(expected = "has 0 finished events")]
fn assert_settled_refuses_a_task_never_finished() {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let _t = guard.start("x", Profile::default()).unwrap();
    rec.assert_settled("x");
}

// ---------------------------------------------------------------------------
// Clocks (R2.7)
// ---------------------------------------------------------------------------

// R2.7: instants are plain saturating nanosecond counts.
#[test]
fn nanos_arithmetic_saturates() {
    assert_eq!(Nanos::from_millis(1500).as_nanos(), 1_500_000_000);
    assert_eq!(Nanos::from_secs(2).as_nanos(), 2_000_000_000);
    assert_eq!(Nanos::from_secs(u64::MAX), Nanos::MAX);
    assert_eq!(Nanos::from_millis(u64::MAX), Nanos::MAX);
    assert_eq!(Nanos::from_nanos(7).as_nanos(), 7);
    assert_eq!(
        Nanos::from_secs(3).saturating_since(Nanos::from_secs(1)),
        secs(2)
    );
    assert_eq!(
        Nanos::from_secs(1).saturating_since(Nanos::from_secs(3)),
        Duration::ZERO
    );
    assert_eq!(
        Nanos::from_secs(3).saturating_sub(secs(1)),
        Nanos::from_secs(2)
    );
    assert_eq!(Nanos::from_secs(1).saturating_sub(secs(3)), Nanos::ZERO);
    assert_eq!(Nanos::from_secs(1) + ms(500), Nanos::from_millis(1500));
    assert_eq!(Nanos::from_secs(1) + Duration::MAX, Nanos::MAX);
    assert_eq!(Nanos::MAX + secs(1), Nanos::MAX);
    assert_eq!(format!("{:?}", Nanos::from_millis(1500)), "1.5s");
}

// R2.7: the real clock's wall labels keep the monotonic spacing, and its
// readings never go back and are never the "never observed" zero.
#[test]
fn monotonic_clock_wall_labels_follow_monotonic_time() {
    let c = MonotonicClock::default();
    assert!(!c.is_virtual());
    let a = c.now();
    let b = c.now();
    assert!(a > Nanos::ZERO && b >= a);
    let gap = c
        .wall_at(Nanos::from_secs(3600))
        .duration_since(c.wall_at(Nanos::ZERO))
        .unwrap();
    assert_eq!(gap, secs(3600));
    let drift = SystemTime::now()
        .duration_since(c.wall_at(c.now()))
        .unwrap_or_else(|e| e.duration());
    assert!(drift < secs(3600), "wall labels are near the wall clock");
}

// R2.7: the virtual clock starts at 1 ns on 2026-01-01, saturates, and its
// wall clock jumps both ways without moving monotonic time.
#[test]
fn manual_clock_starts_in_2026_and_jumps_its_wall_clock_both_ways() {
    let c = ManualClock::default();
    assert!(c.is_virtual());
    assert_eq!(c.now(), Nanos::from_nanos(1));
    let epoch = SystemTime::UNIX_EPOCH + secs(1_767_225_600);
    assert_eq!(c.wall_at(Nanos::ZERO), epoch);
    assert_eq!(c.wall_at(Nanos::from_secs(5)), epoch + secs(5));
    c.jump_wall(10);
    assert_eq!(c.wall_at(Nanos::ZERO), epoch + secs(10));
    c.jump_wall(-25);
    assert_eq!(c.wall_at(Nanos::ZERO), epoch - secs(15));
    c.jump_wall(0);
    assert_eq!(c.wall_at(Nanos::ZERO), epoch - secs(15));
    assert_eq!(c.now(), Nanos::from_nanos(1));
    c.advance(Duration::MAX);
    assert_eq!(c.now(), Nanos::MAX);
}

// ---------------------------------------------------------------------------
// Profiles (R2, R7.2)
// ---------------------------------------------------------------------------

// R7.2: the ends of every range are allowed; one step past them is refused
// with the key and the range.
#[test]
fn profile_ranges_are_inclusive_at_both_ends() {
    let ok = |p: Profile| p.validate().map_err(|e| e.to_string());
    let base = Profile::default;
    assert_eq!(ok(base().idle(ms(1))), Ok(()));
    assert_eq!(ok(base().idle(secs(30 * 86_400))), Ok(()));
    assert_eq!(ok(base().liveness(ms(1))), Ok(()));
    assert_eq!(ok(base().deadline(secs(365 * 86_400))), Ok(()));
    assert_eq!(ok(base().max_deadline(secs(365 * 86_400))), Ok(()));
    assert_eq!(ok(base().grace_period(Duration::ZERO)), Ok(()));
    assert_eq!(ok(base().grace_period(secs(3600))), Ok(()));
    assert_eq!(ok(base().heartbeat_interval(Some(secs(1)))), Ok(()));
    assert_eq!(ok(base().heartbeat_interval(Some(secs(3600)))), Ok(()));
    assert_eq!(ok(base().heartbeat_interval(None)), Ok(()));
    assert_eq!(ok(base().terminate_after(1000)), Ok(()));
    assert_eq!(ok(base().terminate_after(0)), Ok(()));
    assert_eq!(ok(base().deadline(secs(60)).max_deadline(secs(60))), Ok(()));

    let err = |p: Profile| p.validate().unwrap_err().to_string();
    assert_eq!(
        err(base().idle(Duration::from_micros(999))),
        "idle is 999us, expected 1ms..=30days"
    );
    assert_eq!(
        err(base().startup(secs(30 * 86_400) + ms(1))),
        "startup is 30days 1ms, expected 1ms..=30days"
    );
    assert_eq!(
        err(base().long_running_after(Duration::ZERO)),
        "long-running-after is 0s, expected 1ms..=30days"
    );
    assert_eq!(
        err(base().max_deadline(secs(365 * 86_400) + ms(1))),
        "max-deadline is 11months 30days 3h 50m 24s 1ms, expected 1ms..=365days"
    );
    assert_eq!(
        err(base().grace_period(secs(3600) + ms(1))),
        "grace-period is 1h 1ms, expected 0s..=1h"
    );
    assert_eq!(
        err(base().heartbeat_interval(Some(ms(999)))),
        "heartbeat-interval is 999ms, expected \"off\" or 1s..=1h"
    );
    assert_eq!(
        err(base().terminate_after(1001)),
        "terminate-after is 1001, expected 0..=1000 (0 means never cancel)"
    );
    assert_eq!(
        err(base().deadline(secs(61)).max_deadline(secs(60))),
        "deadline is 1m 1s, expected at most max-deadline"
    );
}

// R2.2, R2.3: the effective execution and startup budgets.
#[test]
fn effective_budgets_fall_back_to_idle() {
    let p = Profile {
        idle: None,
        ..Profile::default()
    };
    assert_eq!(p.execution_budget(), None);
    assert_eq!(p.startup_budget(), None);
    assert_eq!(p.idle_budget(), None);
    let p = p.execution(secs(7));
    assert_eq!(p.execution_budget(), Some(secs(7)));
    let p = p.idle(secs(9));
    assert_eq!(p.execution_budget(), Some(secs(9)));
    assert_eq!(p.idle_budget(), Some(secs(9)));
    assert_eq!(p.clone().startup(secs(2)).startup_budget(), Some(secs(2)));
    assert_eq!(p.startup_budget(), Some(secs(9)));
}

// R7.1: a profile serializes with kebab-case keys, humantime durations and
// "off" for a disabled budget, like the shipped default config.
#[test]
fn profile_serializes_like_the_config_file() {
    let json = serde_json::to_value(
        Profile::default()
            .deadline(secs(5400))
            .long_running_after(secs(3)),
    )
    .unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "idle": "5m",
            "execution": "off",
            "startup": "off",
            "deadline": "1h 30m",
            "max-deadline": "off",
            "liveness": "off",
            "renewed-by": ["argument-delta", "output", "tool-call", "progress"],
            "terminate-after": 1,
            "grace-period": "10s",
            "heartbeat-interval": "10s",
            "long-running-after": "3s",
            "notify-only": false
        })
    );
}

// ---------------------------------------------------------------------------
// Signal kinds (R2.6)
// ---------------------------------------------------------------------------

// R2.6: every kind round-trips through its kebab-case name and has its own
// slot; an unknown name is an error listing the kinds.
#[test]
fn signal_kinds_round_trip_through_their_names() {
    let names = [
        "argument-delta",
        "output",
        "tool-call",
        "progress",
        "heartbeat",
        "cpu",
        "net",
        "custom",
        "repeat",
    ];
    for (i, (kind, name)) in SignalKind::ALL.into_iter().zip(names).enumerate() {
        assert_eq!(kind.as_str(), name);
        assert_eq!(kind.to_string(), name);
        assert_eq!(name.parse::<SignalKind>(), Ok(kind));
        assert_eq!(kind.slot(), i);
        assert_eq!(serde_json::to_value(kind).unwrap(), name);
    }
    assert_eq!(SignalKind::COUNT, SignalKind::ALL.len());
    let err = "stdout".parse::<SignalKind>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown signal kind `stdout`, expected one of argument-delta, output, tool-call, progress, heartbeat, cpu, net, custom, repeat"
    );
}

// R2.6: a kind set holds exactly the kinds put in it.
#[test]
fn kind_sets_hold_exactly_their_kinds() {
    let d = KindSet::DEFAULT_RENEWING;
    let held: Vec<_> = d.iter().collect();
    assert_eq!(
        held,
        [
            SignalKind::ArgumentDelta,
            SignalKind::Output,
            SignalKind::ToolCall,
            SignalKind::Progress
        ]
    );
    assert_eq!(KindSet::EMPTY.iter().count(), 0);
    assert_eq!(KindSet::default(), KindSet::EMPTY);
    for k in SignalKind::ALL {
        let one = KindSet::EMPTY.with(k);
        assert_eq!(one.iter().collect::<Vec<_>>(), [k]);
        for other in SignalKind::ALL {
            assert_eq!(one.contains(other), other == k, "{k} vs {other}");
        }
    }
    let built: KindSet = [SignalKind::Cpu, SignalKind::Heartbeat, SignalKind::Cpu]
        .into_iter()
        .collect();
    assert_eq!(
        built,
        KindSet::EMPTY
            .with(SignalKind::Heartbeat)
            .with(SignalKind::Cpu)
    );
    assert_eq!(format!("{built:?}"), "{Heartbeat, Cpu}");
    assert_eq!(
        serde_json::to_value(built).unwrap(),
        serde_json::json!(["heartbeat", "cpu"])
    );
}

// ---------------------------------------------------------------------------
// Events (R3.1, R6.2, R8.3)
// ---------------------------------------------------------------------------

// R8.3: every event type's name, and which ones a sink may never lose.
#[test]
fn event_types_and_critical_set() {
    let finished = EventKind::Finished {
        outcome: Outcome::Completed,
        exit_code: None,
        signal: None,
    };
    let kinds = [
        (EventKind::Started { pid: None }, "started", false),
        (EventKind::LongRunning, "long_running", false),
        (
            EventKind::Heartbeat {
                last_output_age: None,
                total_lines: 0,
                total_bytes: 0,
                idle_remaining: None,
                deadline: None,
            },
            "heartbeat",
            false,
        ),
        (
            EventKind::Stalled {
                budget: Budget::Idle,
                strike: 1,
                terminate_after: 1,
                silent: secs(1),
                last_step: None,
                children: None,
                stacks: Vec::new(),
                on_stall: None,
                repeating: None,
            },
            "stalled",
            true,
        ),
        (EventKind::Recovered { silent: secs(1) }, "recovered", false),
        (
            EventKind::DeadlineExceeded { reason: "r".into() },
            "deadline_exceeded",
            false,
        ),
        (
            EventKind::LivenessLost { reason: "r".into() },
            "liveness_lost",
            false,
        ),
        (
            EventKind::Triggered { reason: "r".into() },
            "triggered",
            false,
        ),
        (
            EventKind::Cancelling {
                reason: "r".into(),
                signal: "SIGTERM",
            },
            "cancelling",
            true,
        ),
        (EventKind::Killed { signal: "SIGKILL" }, "killed", true),
        (finished, "finished", true),
    ];
    for (kind, name, critical) in kinds {
        assert_eq!(kind.type_name(), name);
        assert_eq!(kind.is_critical(), critical, "{name}");
        let json = serde_json::to_value(&kind).unwrap();
        assert_eq!(json["type"], name);
    }
}

// R8.3: an event serializes to its JSON line: RFC 3339 milliseconds,
// elapsed in ms, absent optionals omitted.
#[test]
fn event_serializes_to_its_json_line() {
    let e = Event {
        name: "build".into(),
        task: TaskId::from_raw(3),
        wall: SystemTime::UNIX_EPOCH + Duration::from_millis(1_767_225_600_250),
        at: Nanos::from_secs(9),
        elapsed: Duration::from_micros(2_500_900),
        kind: EventKind::Stalled {
            budget: Budget::Execution,
            strike: 2,
            terminate_after: 3,
            silent: Duration::from_micros(1_999_999),
            last_step: None,
            children: None,
            stacks: Vec::new(),
            on_stall: None,
            repeating: None,
        },
    };
    assert_eq!(
        serde_json::to_value(&e).unwrap(),
        serde_json::json!({
            "type": "stalled",
            "task": "build",
            "at": "2026-01-01T00:00:00.250Z",
            "elapsed_ms": 2500,
            "budget": "execution",
            "strike": 2,
            "terminate_after": 3,
            "silent_ms": 1999
        })
    );
    let hb = EventKind::Heartbeat {
        last_output_age: Some(ms(1234)),
        total_lines: 2,
        total_bytes: 9,
        idle_remaining: Some(Duration::MAX),
        deadline: None,
    };
    let json = serde_json::to_value(&hb).unwrap();
    assert_eq!(json["last_output_age_ms"], 1234);
    assert_eq!(json["idle_remaining_ms"], u64::MAX);
    assert!(json.get("deadline_ms").is_none());
}

// R3.1, R5.5: a suspect child is blocked in I/O, or alive across two
// samples with no CPU; a zombie with no CPU is not a suspect, and a first
// sample (no delta) names nobody.
#[test]
fn suspects_are_io_blocked_or_idle_live_children() {
    let child = |state, delta| ChildInfo {
        pid: 1,
        name: "c".into(),
        state,
        wchan: None,
        blocked_on: None,
        started_unix_ms: None,
        cpu_ms: 0,
        cpu_delta_ms: delta,
    };
    assert!(child(ProcState::DiskWait, Some(50)).is_suspect());
    assert!(child(ProcState::DiskWait, None).is_suspect());
    assert!(child(ProcState::Sleeping, Some(0)).is_suspect());
    assert!(child(ProcState::Stopped, Some(0)).is_suspect());
    assert!(!child(ProcState::Zombie, Some(0)).is_suspect());
    assert!(!child(ProcState::Sleeping, None).is_suspect());
    assert!(!child(ProcState::Running, Some(3)).is_suspect());
}

// R3.1: budget names as events and configs spell them; ids print as `#n`.
#[test]
fn budget_and_task_id_names() {
    assert_eq!(Budget::Idle.to_string(), "idle");
    assert_eq!(Budget::Execution.to_string(), "execution");
    assert_eq!(Budget::Startup.as_str(), "startup");
    assert_eq!(TaskId::from_raw(42).to_string(), "#42");
    assert_eq!(TaskId::from_raw(42).as_raw(), 42);
}

// ---------------------------------------------------------------------------
// Options and durations from every door (R10.6, R8.12)
// ---------------------------------------------------------------------------

// R10.6: `0` milliseconds is a duration (zero), from Node and Python as
// from the builder; only a negative or NaN count is refused. (Mutant:
// `< with <=` in `duration_from_millis`, which refused 0.)
#[test]
fn zero_milliseconds_is_a_zero_duration_not_an_error() {
    assert_eq!(duration_from_millis(0.0), Ok(Duration::ZERO));
    assert_eq!(duration_from_millis(1.5), Ok(Duration::from_micros(1500)));
    assert!(matches!(
        duration_from_millis(-0.5),
        Err(DurationError::Invalid { .. })
    ));
    // Through the option table: 0 ms is off for the heartbeat (R3.7) and
    // an immediate kill for the grace period (R3.5).
    let mut p = Profile::default();
    p.set("gracePeriod", 0.0).unwrap();
    assert_eq!(p.grace_period, Duration::ZERO);
    p.set("heartbeat_interval", 0).unwrap();
    assert_eq!(p.heartbeat_interval, None);
}

// R8.12, R10.6: a number in an error is written as a person would write
// it: `1e300`, not three hundred digits, and `0`, not `0e0`. (Mutant:
// `!= with ==` in `number`.)
#[test]
fn numbers_in_errors_are_written_as_people_write_them() {
    let err = duration_from_millis(1e300).unwrap_err();
    assert_eq!(
        err,
        DurationError::TooLong {
            text: "1e300ms".into()
        }
    );
    let mut p = Profile::default();
    let err = p.set("long-running-after", 0.0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "long-running-after is 0ms, expected 1ms..=30days"
    );
}

// R10.6: a duration out of its key's range names that range, the same
// text the builder's `validate` gives, not the generic "a duration such
// as ...". (Mutant: `delete field expected` in `OptionSpec::parse`.)
#[test]
fn an_out_of_range_option_names_its_range() {
    let mut p = Profile::default();
    let err = p.set("idle", "40days").unwrap_err();
    assert_eq!(err.to_string(), "idle is 40days, expected 1ms..=30days");
    let err = p.set("grace-period", 3_600_001).unwrap_err();
    assert_eq!(
        err.to_string(),
        "grace-period is 3600001ms, expected 0s..=1h"
    );
    assert_eq!(p, Profile::default(), "a refused value changes nothing");
}

// R3.2, R10.6: terminate-after takes 0..=1000 from every door; 1001 is
// refused with the range and leaves the profile as it was. (Mutant:
// `match guard n <= MAX_STRIKES with true` in `OptionSpec::parse`.)
#[test]
fn terminate_after_above_a_thousand_is_refused() {
    let mut p = Profile::default();
    p.set("terminate-after", 1000).unwrap();
    assert_eq!(p.terminate_after, 1000);
    for value in [OptionValue::from(1001), OptionValue::from("1001")] {
        let err = p.set("terminateAfter", value).unwrap_err();
        assert_eq!(
            err.to_string(),
            "terminateAfter is 1001, expected 0..=1000 (0 means never cancel)"
        );
    }
    assert_eq!(p.terminate_after, 1000);
    p.validate().unwrap();
}

// R10.6: `"off"` turns a budget off from every door, however it is spaced.
// (Mutant: `delete match arm "off"` in `Limit::from_str`, which sent it to
// humantime and refused it.)
#[test]
fn off_is_a_limit_from_text() {
    assert_eq!(" off ".parse::<Limit>(), Ok(Limit::Off));
    let mut p = Profile::default();
    p.set("idle", "off").unwrap();
    assert_eq!(p.idle, None);
    p.set("heartbeat-interval", "off").unwrap();
    assert_eq!(p.heartbeat_interval, None);
}

// R3.1, R5.5: a stopped child (`T`, or `t` when a tracer stopped it) is
// reported as stopped, which makes it a suspect when it uses no CPU. A real
// child is stopped with SIGSTOP and its /proc stat line read once
// `waitpid(WUNTRACED)` says it stopped. (Mutant: `delete match arm b'T' |
// b't'` in `state_from_code`, which reported it as "other".)
#[test]
fn a_stopped_child_reads_as_stopped() {
    assert_eq!(state_from_code(b't'), ProcState::Stopped);
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep");
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain syscalls on our own child's pid; `status` outlives the call.
    let stopped = unsafe {
        let mut status = 0;
        libc::kill(pid, libc::SIGSTOP) == 0
            && libc::waitpid(pid, &mut status, libc::WUNTRACED) == pid
            && libc::WIFSTOPPED(status)
    };
    let line = std::fs::read(format!("/proc/{pid}/stat"));
    child.kill().expect("kill sleep");
    child.wait().expect("reap sleep");
    assert!(stopped, "the child stopped");
    let line = line.expect("read stat");
    let stat = ProcStat::parse(&line).unwrap();
    assert_eq!(
        (stat.pid, stat.state_code, stat.state),
        (pid as u32, b'T', ProcState::Stopped)
    );
}

// R10.6: an unknown signal kind in a list is named, with the kinds there
// are. (Mutant: `delete field expected` at the kinds' error in
// `OptionSpec::parse`, which gave the generic "a list of ..." instead.)
#[test]
fn an_unknown_signal_kind_is_named_with_the_known_ones() {
    let mut p = Profile::default();
    let err = p
        .set("renewed-by", vec!["output", "telepathy"])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "renewed-by: unknown signal kind `telepathy`, expected one of argument-delta, \
         output, tool-call, progress, heartbeat, cpu, net, custom, repeat"
    );
}

// Whole-crate mutation run (issue 26, R10.4): what only a doctest showed,
// which a mutant's run does not compile.

// R8.13: a leftover process is named as people read it.
#[test]
fn a_process_name_reads_name_then_pid() {
    let p = watchdog_core::ProcessName {
        pid: 42,
        name: "sleep".into(),
    };
    assert_eq!(p.to_string(), "sleep (pid 42)");
}

// R10.6: a door that spells the key its own way gets the problem without
// it: the form's fault, or the range.
#[test]
fn a_profile_error_states_its_problem_without_the_key() {
    let mut p = Profile::default();
    let form = p.set("idle", OptionValue::from("soon")).unwrap_err();
    let problem = form.problem();
    assert!(problem.contains(", expected "), "{problem}");
    assert!(!problem.contains("idle"), "{problem}");
    let range = p
        .set("terminate-after", OptionValue::from(1001))
        .unwrap_err();
    assert_eq!(
        range.problem(),
        "1001 is out of range, expected 0..=1000 (0 means never cancel)"
    );
}

// R10.6: values are shown as a person wrote them, in every error.
#[test]
fn option_values_and_limits_render_as_written() {
    assert_eq!(OptionValue::Null.to_string(), "null");
    assert_eq!(OptionValue::Bool(false).to_string(), "false");
    assert_eq!(OptionValue::Float(1.5).to_string(), "1.5");
    assert_eq!(OptionValue::from("90s").to_string(), "\"90s\"");
    assert_eq!(
        OptionValue::from(vec!["output", "cpu", "net"]).to_string(),
        "[\"output\", \"cpu\", \"net\"]"
    );
    assert_eq!(OptionValue::List(vec![]).to_string(), "[]");
    assert_eq!(Limit::Off.to_string(), "off");
    assert_eq!(Limit::After(secs(90)).to_string(), "1m 30s");
    // R7.2: a bare zero is zero in every unit; any other bare number needs one.
    assert_eq!(" 0 ".parse::<Limit>(), Ok(Limit::After(Duration::ZERO)));
    assert!("5".parse::<Limit>().is_err());
}

// R8.12: milliseconds are accepted up to the longest duration, exactly.
#[test]
fn milliseconds_are_accepted_up_to_the_longest_duration() {
    let max = watchdog_core::MAX_DURATION;
    let max_ms = max.as_secs_f64() * 1000.0;
    assert_eq!(
        duration_from_millis(max_ms),
        Ok(Duration::from_secs_f64(max.as_secs_f64()))
    );
    assert!(duration_from_millis(max_ms * 1.01).is_err());
    // A year: far past the longest duration counted in seconds.
    assert_eq!(
        duration_from_millis(3.0e10),
        Ok(Duration::from_secs(30_000_000))
    );
}

// R2.7: a lagging clock is virtual time: the guard runs no driver thread
// of its own on it, so only `advance` moves its budgets.
#[test]
fn a_guard_on_a_lagging_clock_is_virtual() {
    let guard = Guard::builder()
        .clock(watchdog_core::LaggingClock::new(ms(4)))
        .build();
    assert!(format!("{guard:?}").contains("virtual: true"), "{guard:?}");
    let real = Guard::builder().build();
    assert!(format!("{real:?}").contains("virtual: false"), "{real:?}");
}

// R8.7: the one pidfd wait of the crate returns the moment a process
// ends, waits the timeout out while it runs, and takes a process that is
// gone (reaped, so no pidfd can be had) as ended.
#[test]
fn wait_exit_sees_an_end_a_run_and_an_absence() {
    use watchdog_core::sys::wait_exit;
    let mut child = std::process::Command::new("true").spawn().unwrap();
    assert!(wait_exit(child.id(), secs(30)), "a child that exited");
    let pid = child.id();
    child.wait().unwrap();
    assert!(wait_exit(pid, secs(30)), "a reaped child is gone");
    assert!(wait_exit(u32::MAX, secs(30)), "no pid of that size");
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    assert!(!wait_exit(sleeper.id(), ms(10)), "still running");
    sleeper.kill().unwrap();
    assert!(wait_exit(sleeper.id(), secs(30)), "killed, now a zombie");
    sleeper.wait().unwrap();
}

// R10.2: a stat line whose last `)` comes before its first `(` has no
// command name; each state letter the verdict names is read as itself.
#[test]
fn stat_lines_and_state_letters_read_exactly() {
    assert_eq!(
        ProcStat::parse(b"12 )x( S 1 2 3"),
        Err(watchdog_core::sys::StatError::NoCommand)
    );
    for (code, state) in [
        (b'R', ProcState::Running),
        (b'S', ProcState::Sleeping),
        (b'D', ProcState::DiskWait),
        (b'Z', ProcState::Zombie),
        (b'T', ProcState::Stopped),
        (b't', ProcState::Stopped),
        (b'I', ProcState::Other),
    ] {
        assert_eq!(state_from_code(code), state, "{}", code as char);
    }
}

// R8.5: processes named as leaked reach the sinks as `leaked`, before
// `finished`.
#[test]
fn leaked_processes_are_an_event() {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let task = guard.start("job", Profile::default()).unwrap();
    task.leaked(vec![watchdog_core::ProcessName {
        pid: 7,
        name: "tee".into(),
    }])
    .unwrap();
    task.finish_completed();
    assert_eq!(rec.types_for("job"), ["started", "leaked", "finished"]);
}

// R2.6: a recorder says which kinds renew its task's budgets.
#[test]
fn a_recorder_says_which_kinds_renew() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let net = KindSet::DEFAULT_RENEWING.with(SignalKind::Net);
    let task = guard
        .start("dl", Profile::default().renewed_by(net))
        .unwrap();
    assert!(task.recorder().renews(SignalKind::Net));
    assert!(task.recorder().renews(SignalKind::Output));
    assert!(!task.recorder().renews(SignalKind::Cpu));
}

// R10.2: an over-long id in an error is cut to MAX_CALL_ID bytes on a
// character boundary, however its characters fall.
#[test]
fn an_over_long_call_id_is_cut_on_a_character_boundary() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("turn", Profile::default()).unwrap();
    // "a" then two-byte characters: byte MAX_CALL_ID (even) falls inside one.
    let id = format!("a{}", "é".repeat(watchdog_core::MAX_CALL_ID));
    let err = task
        .tool_finished(&id, watchdog_core::CallOutcome::Success)
        .unwrap_err();
    let shown = format!("a{}", "é".repeat((watchdog_core::MAX_CALL_ID - 2) / 2));
    assert_eq!(shown.len(), watchdog_core::MAX_CALL_ID - 1);
    match err {
        watchdog_core::GuardError::UnknownCall { call, .. } => assert_eq!(call, shown),
        other => panic!("wanted UnknownCall, got {other:?}"),
    }
}

// R10.6: the option table says which keys take a duration (a bare number
// is then milliseconds), shows each value as `stallwarden check` prints it,
// and a parsed setting knows its key.
#[test]
fn the_option_table_knows_durations_shows_values_and_names_settings() {
    use watchdog_core::{OptionSpec, OPTIONS};
    let durations: Vec<&str> = OPTIONS
        .iter()
        .filter(|o| o.takes_duration())
        .map(|o| o.name())
        .collect();
    assert_eq!(
        durations,
        [
            "idle",
            "execution",
            "startup",
            "deadline",
            "max-deadline",
            "liveness",
            "grace-period",
            "heartbeat-interval",
            "long-running-after"
        ]
    );
    let p = Profile::default().idle(secs(90));
    let shown: Vec<String> = [
        "idle",
        "deadline",
        "grace-period",
        "terminate-after",
        "notify-only",
        "renewed-by",
    ]
    .iter()
    .map(|k| OptionSpec::find(k).unwrap().show(&p))
    .collect();
    assert_eq!(
        shown,
        [
            "1m 30s",
            "off",
            "10s",
            "1",
            "false",
            "argument-delta,output,tool-call,progress"
        ]
    );
    let spec = OptionSpec::find("grace-period").unwrap();
    let setting = spec.parse("grace_period", OptionValue::from("3s")).unwrap();
    assert_eq!(setting.key(), "grace-period");
}

// R7.2: a count given as a float must be a whole number a person could
// mean: 1e15 and past is not an integer, below it the range decides.
#[test]
fn a_count_as_a_float_is_whole_and_below_1e15() {
    let mut p = Profile::default();
    let err = p
        .set("terminate-after", OptionValue::Float(1e15))
        .unwrap_err();
    assert!(err.to_string().contains("is not an integer"), "{err}");
    let err = p
        .set("terminate-after", OptionValue::Float(1e14))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("is 100000000000000, expected 0..=1000"),
        "{err}"
    );
    p.set("terminate-after", OptionValue::Float(3.0)).unwrap();
    assert_eq!(p.terminate_after, 3);
}
