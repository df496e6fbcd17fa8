//! The callback sink against a guard on virtual time: events and actions in
//! order, isolated by default so a closure that hangs or panics delays and
//! loses nobody else's cancel (R6.2, R6.4).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use stallwarden_sinks::callback::CallbackSink;
use watchdog_core::{
    ActionKind, Delivery, Guard, ManualClock, Outcome, Profile, RecordingSink, Sink,
};

const SECOND: Duration = Duration::from_secs(1);
const FLUSH: Duration = Duration::from_secs(10);

fn quiet() -> Profile {
    Profile::default()
        .idle(5 * SECOND)
        .grace_period(2 * SECOND)
        .heartbeat_interval(None)
}

fn escalate(guard: &Guard, name: &str) {
    let t = guard.start(name, quiet()).unwrap();
    guard.advance(5 * SECOND);
    guard.advance(2 * SECOND);
    t.finish(Outcome::Cancelled, None, Some(9)).unwrap();
}

/// A callback sink logging `event:TYPE` and `action:cancel|kill` lines.
fn logging(delivery: Delivery) -> (CallbackSink, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (events, actions) = (Arc::clone(&log), Arc::clone(&log));
    let sink =
        CallbackSink::new(move |e| events.lock().push(format!("event:{}", e.kind.type_name())))
            .on_action(move |a| {
                let what = match a.kind {
                    ActionKind::Cancel { .. } => "cancel",
                    ActionKind::Kill => "kill",
                    _ => "other",
                };
                actions.lock().push(format!("action:{what}"));
            })
            .with_delivery(delivery);
    (sink, log)
}

const ESCALATION: [&str; 7] = [
    "event:started",
    "event:stalled",
    "event:cancelling",
    "action:cancel",
    "event:killed",
    "action:kill",
    "event:finished",
];

// R6.4: isolated by default; after a flush the closure has seen every
// event and action, in order.
#[test]
fn isolated_callback_sees_events_and_actions_in_order() {
    let (sink, log) = logging(Delivery::Isolated);
    assert_eq!(CallbackSink::new(|_| {}).delivery(), Delivery::Isolated);
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink)
        .build();
    escalate(&guard, "turn");
    assert!(guard.flush(FLUSH));
    assert_eq!(*log.lock(), ESCALATION);
}

// Inline: everything has arrived when the guard call returns.
#[test]
fn inline_callback_runs_before_the_guard_call_returns() {
    let (sink, log) = logging(Delivery::Inline);
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink)
        .build();
    let t = guard.start("turn", quiet()).unwrap();
    guard.advance(5 * SECOND);
    assert_eq!(*log.lock(), ESCALATION[..4]);
    guard.advance(2 * SECOND);
    t.finish_completed();
    assert_eq!(*log.lock(), ESCALATION);
}

// R6.2: a closure that never returns (isolated) delays neither the guard
// nor another sink, and the other sink still gets its cancel.
#[test]
fn a_hung_callback_delays_nobody() {
    let (release, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let hung = CallbackSink::new(move |_| {
        let _ = wait.lock().recv(); // blocks until the test ends
    })
    .named("hung");
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(hung)
        .sink(rec.clone())
        .build();
    escalate(&guard, "turn");
    assert_eq!(
        rec.types_for("turn"),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
    assert_eq!(rec.actions().len(), 2, "cancel and kill delivered");
    assert!(
        !guard.flush(Duration::from_millis(50)),
        "the hung sink is behind"
    );
    drop(release); // let the sink thread go
}

// R6.2: a closure that panics is contained; the next events still reach it
// and other sinks.
#[test]
fn a_panicking_callback_is_contained() {
    let calls = Arc::new(Mutex::new(0u32));
    let counted = Arc::clone(&calls);
    let panicky = CallbackSink::new(move |e| {
        *counted.lock() += 1;
        if e.kind.type_name() == "stalled" {
            panic!("callback bug");
        }
    })
    .with_delivery(Delivery::Inline);
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(panicky)
        .sink(rec.clone())
        .build();
    escalate(&guard, "turn");
    assert_eq!(*calls.lock(), 5, "every event reached the callback");
    rec.assert_settled("turn");
    assert_eq!(rec.actions().len(), 2);
}
