//! The recording sink, the test double every suite reads verdicts from:
//! its accessors return exactly what it received, in order, and
//! `assert_settled` refuses a task whose `finished` is not its one last
//! event. Its timelines (instants of emission and of delivery) are
//! `sinks.rs`.
//!
//! Virtual time (`ManualClock`); the one wait that must fail is bounded
//! (`wait_for` with 20 ms) and asserts no duration.

use std::time::{Duration, SystemTime};

use watchdog_core::{
    Delivered, Event, EventKind, Nanos, Outcome, Profile, RecordingSink, Sink, TaskId,
};

mod common;
use common::{ms, secs, setup};

// The recording sink's accessors return exactly what it received, in order.
#[test]
fn recording_sink_accessors_return_what_was_delivered() {
    let (guard, rec, _clock) = setup();
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

// `assert_settled` refuses a timeline with an event after `finished`:
// a task is settled only when `finished` is its last word.
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

// `assert_settled` refuses a task that is still running: a settled task
// has exactly one `finished`.
#[test]
#[should_panic(expected = "has 0 finished events")]
fn assert_settled_refuses_a_task_never_finished() {
    let (guard, rec, _clock) = setup();
    let _t = guard.start("x", Profile::default()).unwrap();
    rec.assert_settled("x");
}
