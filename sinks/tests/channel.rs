//! The channel sink against a guard on virtual time: subscribers see what
//! the guard emitted, in order, per task or for all; nothing is lost for a
//! slow live subscriber (R6.2); a dropped subscriber is removed; `Option`
//! of the sink is a sink (R6.1).

use std::task::{Context, Poll, Waker};
use std::time::Duration;

use stallwarden_sinks::channel::{ChannelSink, TryRecvError};
use watchdog_core::{Event, Guard, ManualClock, Outcome, Profile, RecordingSink};

const SECOND: Duration = Duration::from_secs(1);

fn quiet() -> Profile {
    Profile::default()
        .idle(5 * SECOND)
        .grace_period(2 * SECOND)
        .heartbeat_interval(None)
}

fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.type_name()).collect()
}

/// Drives one task through started → stalled → cancelling → killed →
/// finished (R3.1, R3.5, R3.8).
fn escalate(guard: &Guard, name: &str) {
    let t = guard.start(name, quiet()).unwrap();
    guard.advance(5 * SECOND);
    guard.advance(2 * SECOND);
    t.finish(Outcome::Cancelled, None, Some(9)).unwrap();
}

// R6.4: a subscriber of all tasks sees exactly what the guard emitted, in
// emission order, ending with `finished` (R3.8).
#[test]
fn a_subscriber_sees_every_event_in_order() {
    let sink = ChannelSink::new();
    let rec = RecordingSink::new();
    let mut all = sink.subscribe();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .sink(sink.clone())
        .build();
    escalate(&guard, "turn");
    let got = all.drain();
    assert_eq!(got, rec.events());
    assert_eq!(
        types(&got),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
    assert_eq!(all.try_recv().unwrap_err(), TryRecvError::Empty);
}

// A task subscription gets only its task, latches onto one run, and ends
// after that run's `finished`: a later task reusing the name is not mixed in.
#[test]
fn a_task_subscription_follows_one_run_and_ends_with_it() {
    let sink = ChannelSink::new();
    let mut build = sink.subscribe_task("build");
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let other = guard.start("test", quiet()).unwrap();
    escalate(&guard, "build");
    other.finish_completed();
    guard.start("build", quiet()).unwrap().finish_completed(); // second run
    let got = build.drain();
    assert!(got.iter().all(|e| &*e.name == "build"));
    assert_eq!(
        types(&got),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
    assert!(got.iter().all(|e| e.task == got[0].task), "one run only");
    assert!(build.try_recv().unwrap_err().is_closed());
    assert_eq!(sink.subscriber_count(), 0, "ended subscription removed");
}

#[test]
fn an_id_subscription_gets_only_that_task() {
    let sink = ChannelSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let a = guard.start("a", quiet()).unwrap();
    let id = a.status().unwrap().id;
    let mut sub = sink.subscribe_task(id);
    let b = guard.start("b", quiet()).unwrap();
    guard.advance(5 * SECOND);
    b.finish_completed();
    a.finish_completed();
    let got = sub.drain();
    assert_eq!(types(&got), ["stalled", "cancelling", "finished"]);
    assert!(got.iter().all(|e| e.task == id));
    assert!(sub.try_recv().unwrap_err().is_closed());
}

// A dropped subscription is removed at the next event and costs nothing.
#[test]
fn a_dropped_subscriber_is_removed() {
    let sink = ChannelSink::new();
    let keep = sink.subscribe();
    let gone = sink.subscribe();
    assert_eq!(sink.subscriber_count(), 2);
    drop(gone);
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    guard.start("x", quiet()).unwrap().finish_completed();
    assert_eq!(sink.subscriber_count(), 1);
    drop(keep);
}

// R6.2: a subscriber that reads nothing for a long time loses nothing: no
// heartbeat coalescing, no critical event dropped, and the guard is never
// slowed (the queue is unbounded; delivery is inline and never blocks).
#[test]
fn a_slow_subscriber_loses_nothing() {
    let sink = ChannelSink::new();
    let mut slow = sink.subscribe();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let profile = Profile::default()
        .idle(Duration::from_secs(3 * 3600))
        .heartbeat_interval(Some(SECOND));
    let t = guard.start("long", profile).unwrap();
    for _ in 0..5000 {
        guard.advance(SECOND);
    }
    guard.advance(Duration::from_secs(3 * 3600)); // stall, cancel
    guard.advance(Duration::from_secs(10)); // kill
    t.finish_completed();
    let got = slow.drain();
    let beats = got
        .iter()
        .filter(|e| e.kind.type_name() == "heartbeat")
        .count();
    assert!(beats >= 5000, "{beats} heartbeats");
    let tail: Vec<_> = types(&got)
        .into_iter()
        .filter(|t| *t != "heartbeat")
        .collect();
    assert_eq!(
        tail,
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
    assert_eq!(got.last().unwrap().kind.type_name(), "finished");
}

// The subscription works from async code: a tokio task awaits events while
// the guard (on virtual time) emits them from another thread.
#[tokio::test]
async fn recv_awaits_events_from_another_thread() {
    let sink = ChannelSink::new();
    let mut sub = sink.subscribe_task("turn");
    let reader = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(e) = sub.recv().await {
            seen.push(e.kind.type_name());
        }
        seen
    });
    let driver = std::thread::spawn(move || {
        let guard = Guard::builder()
            .clock(ManualClock::new())
            .sink(sink)
            .build();
        escalate(&guard, "turn");
    });
    let seen = tokio::time::timeout(Duration::from_secs(30), reader)
        .await
        .expect("the subscription ended after finished")
        .unwrap();
    driver.join().unwrap();
    assert_eq!(
        seen,
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
}

// Blocking readers: `blocking_recv` on a plain thread.
#[test]
fn blocking_recv_reads_on_a_plain_thread() {
    let sink = ChannelSink::new();
    let mut sub = sink.subscribe_task("turn");
    let reader = std::thread::spawn(move || {
        std::iter::from_fn(|| sub.blocking_recv())
            .map(|e| e.kind.type_name())
            .collect::<Vec<_>>()
    });
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink)
        .build();
    escalate(&guard, "turn");
    assert_eq!(
        reader.join().unwrap(),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
}

// R6.1: `Option<ChannelSink>` is a sink; `None` is a no-op.
#[test]
fn an_option_of_channel_sink_is_a_sink() {
    let sink = ChannelSink::new();
    let mut sub = sink.subscribe();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(Some(sink.clone()))
        .sink(None::<ChannelSink>)
        .build();
    escalate(&guard, "turn");
    assert_eq!(
        types(&sub.drain()),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
}

// R3.8: a subscription by name follows one run. One channel sink shared by
// two guards (cloning shares the subscriber list) sees two live tasks of
// that name; the subscription keeps to the first it saw, by task id.
#[test]
fn a_name_subscription_keeps_to_the_first_task_it_saw() {
    let sink = ChannelSink::new();
    let mut build = sink.subscribe_task("build");
    let one = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let two = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let _other = one.start("lint", Profile::default()).unwrap(); // id 1 in `one`
    let first = one.start("build", Profile::default()).unwrap(); // id 2
    let second = two.start("build", Profile::default()).unwrap(); // id 1 in `two`
    second.finish_completed();
    first.finish_completed();
    let got: Vec<_> = build
        .drain()
        .into_iter()
        .map(|e| (e.task, e.kind.type_name()))
        .collect();
    assert_eq!(got, [(first.id(), "started"), (first.id(), "finished")]);
}

// R3.8: an empty queue is not a closed one; and a subscription polled by
// hand hands out what is queued.
#[test]
fn a_subscription_polled_by_hand_yields_what_is_queued() {
    assert!(!TryRecvError::Empty.is_closed());
    assert!(TryRecvError::Closed.is_closed());
    let sink = ChannelSink::new();
    let mut all = sink.subscribe();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(sink.clone())
        .build();
    let mut cx = Context::from_waker(Waker::noop());
    assert!(all.poll_recv(&mut cx).is_pending());
    let _task = guard.start("polled", Profile::default()).unwrap();
    match all.poll_recv(&mut cx) {
        Poll::Ready(Some(e)) => assert_eq!(e.kind.type_name(), "started"),
        other => panic!("{other:?}"),
    }
}
