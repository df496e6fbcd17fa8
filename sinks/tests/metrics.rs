//! The metrics sink against a guard on virtual time, recorded by a real
//! `metrics` recorder (metrics-util's `DebuggingRecorder`, scoped to the
//! test thread): counters per task and budget, Unix-time gauges that are
//! absent until observed, never 0 (R6.4, R4.1).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metrics::{SharedString, Unit};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::CompositeKey;
use stallguard_sinks::metrics::{
    MetricsSink, CANCELS, HEARTBEATS, KILLS, LAST_CALL, LAST_PROGRESS, STALLS,
};
use watchdog_core::{CallOutcome, Guard, ManualClock, Outcome, Profile, SignalKind};

const SECOND: Duration = Duration::from_secs(1);
/// ManualClock's wall time at instant 0: 2026-01-01T00:00:00Z.
const WALL0: f64 = 1_767_225_600.0;

/// Every series the recorder saw, read once: a debugging snapshot resets
/// the values it reads.
type Snap = Vec<(CompositeKey, Option<Unit>, Option<SharedString>, DebugValue)>;

/// Reads one series by name and exact label set.
fn value<'a>(snap: &'a Snap, name: &str, labels: &[(&str, &str)]) -> Option<&'a DebugValue> {
    snap.iter()
        .find(|(k, _, _, _)| {
            let key = k.key();
            let got: Vec<(&str, &str)> = key.labels().map(|l| (l.key(), l.value())).collect();
            key.name() == name && got == labels
        })
        .map(|(_, _, _, v)| v)
}

fn counter(snap: &Snap, name: &str, labels: &[(&str, &str)]) -> u64 {
    match value(snap, name, labels) {
        Some(DebugValue::Counter(n)) => *n,
        None => 0,
        other => panic!("{name} is not a counter: {other:?}"),
    }
}

fn gauge(snap: &Snap, name: &str, task: &str) -> Option<f64> {
    match value(snap, name, &[("task", task)]) {
        Some(DebugValue::Gauge(g)) => Some(g.0),
        None => None,
        other => panic!("{name} is not a gauge: {other:?}"),
    }
}

/// Runs `scenario` with a fresh recorder installed for this thread only.
fn record(scenario: impl FnOnce(&Guard, &MetricsSink)) -> Snap {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let sink = MetricsSink::new();
        let guard = Guard::builder()
            .clock(ManualClock::new())
            .sink(sink)
            .build();
        scenario(&guard, &sink);
    });
    snap.snapshot().into_vec()
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

// R6.4: stall (by budget), cancel and kill counters per task through
// started → stalled → cancelling → killed → finished.
#[test]
fn escalation_counts_stalls_cancels_and_kills() {
    let snap = record(|g, _| {
        let profile = Profile::default()
            .idle(5 * SECOND)
            .grace_period(2 * SECOND)
            .heartbeat_interval(None);
        let t = g.start("build", profile.clone()).unwrap();
        g.advance(5 * SECOND);
        g.advance(2 * SECOND);
        t.finish(Outcome::Cancelled, None, Some(9)).unwrap();

        let t = g.start("flaky", profile.terminate_after(0)).unwrap();
        t.output(1, 0);
        g.advance(5 * SECOND);
        g.advance(5 * SECOND);
        t.finish_completed();
    });
    let build = [("task", "build")];
    assert_eq!(
        counter(&snap, STALLS, &[("task", "build"), ("budget", "startup")]),
        1
    );
    assert_eq!(counter(&snap, CANCELS, &build), 1);
    assert_eq!(counter(&snap, KILLS, &build), 1);
    assert_eq!(
        counter(&snap, STALLS, &[("task", "flaky"), ("budget", "idle")]),
        2
    );
    assert_eq!(counter(&snap, CANCELS, &[("task", "flaky")]), 0);
    // Nothing observed progress for `build`: its gauge is absent, not 0.
    assert_eq!(gauge(&snap, LAST_PROGRESS, "build"), None);
    assert_eq!(gauge(&snap, LAST_CALL, "build"), None);
}

// R3.7 / R4.1: heartbeats are counted; the progress gauge is set from a
// heartbeat only once output has been seen (now minus its age), and from a
// recovery (progress just arrived).
#[test]
fn heartbeats_count_and_set_progress_once_output_is_known() {
    let snap = record(|g, _| {
        let profile = Profile::default()
            .idle(60 * SECOND)
            .heartbeat_interval(Some(10 * SECOND));
        let t = g.start("sql", profile).unwrap();
        g.advance(10 * SECOND);
        t.finish_completed();
    });
    assert_eq!(counter(&snap, HEARTBEATS, &[("task", "sql")]), 1);
    assert_eq!(gauge(&snap, LAST_PROGRESS, "sql"), None, "no output yet");

    let snap = record(|g, _| {
        let profile = Profile::default()
            .idle(60 * SECOND)
            .heartbeat_interval(Some(10 * SECOND));
        let t = g.start("sql", profile).unwrap();
        g.advance(12 * SECOND);
        t.output(10, 1); // at 12 s
        g.advance(28 * SECOND); // heartbeats at 30 s and 40 s
        t.finish_completed();
    });
    assert!(counter(&snap, HEARTBEATS, &[("task", "sql")]) >= 2);
    let at = gauge(&snap, LAST_PROGRESS, "sql").expect("set from a heartbeat");
    assert!(
        (at - (WALL0 + 12.0)).abs() < 1e-3,
        "last output at 12 s, got {}",
        at - WALL0
    );

    let snap = record(|g, _| {
        let profile = Profile::default()
            .idle(5 * SECOND)
            .terminate_after(0)
            .heartbeat_interval(None);
        let t = g.start("flaky", profile).unwrap();
        g.advance(7 * SECOND);
        t.output(1, 0); // recovered at 7 s
        t.finish_completed();
    });
    let at = gauge(&snap, LAST_PROGRESS, "flaky").expect("set from recovered");
    assert!((at - (WALL0 + 7.0)).abs() < 1e-3, "{}", at - WALL0);
}

// R4.1 / R6.4: `observe` exports what a status snapshot knows; a heartbeat
// signal is liveness, not progress, and a missing stamp stays unset.
#[test]
fn observe_exports_last_progress_and_last_call_from_status() {
    let snap = record(|g, sink| {
        let t = g
            .start("turn", Profile::default().heartbeat_interval(None))
            .unwrap();
        g.advance(3 * SECOND);
        t.heartbeat(); // liveness only
        sink.observe(&t.status().unwrap());
        t.finish_completed();
    });
    assert_eq!(
        gauge(&snap, LAST_PROGRESS, "turn"),
        None,
        "a heartbeat is not progress"
    );
    assert_eq!(gauge(&snap, LAST_CALL, "turn"), None, "no call observed");

    let snap = record(|g, sink| {
        let t = g
            .start("turn", Profile::default().heartbeat_interval(None))
            .unwrap();
        g.advance(2 * SECOND);
        t.tool_started("c1", "sql_probe").unwrap();
        g.advance(5 * SECOND);
        t.tool_finished("c1", CallOutcome::Success).unwrap();
        g.advance(SECOND);
        t.output(5, 1);
        let status = t.status().unwrap();
        let call = status.last_call.clone().unwrap();
        assert_eq!(unix(call.finished.unwrap().at), WALL0 + 7.0);
        assert_eq!(
            unix(status.last_of(SignalKind::Output).unwrap().at),
            WALL0 + 8.0
        );
        sink.observe(&status);
        t.finish_completed();
    });
    let call = gauge(&snap, LAST_CALL, "turn").expect("last call set");
    assert!((call - (WALL0 + 7.0)).abs() < 1e-3, "{}", call - WALL0);
    let progress = gauge(&snap, LAST_PROGRESS, "turn").expect("last progress set");
    assert!(
        (progress - (WALL0 + 8.0)).abs() < 1e-3,
        "{}",
        progress - WALL0
    );
}
