//! The metrics sink against a guard on virtual time, recorded by a real
//! `metrics` recorder (metrics-util's `DebuggingRecorder`, scoped to the
//! test thread): counters per profile and budget, live tasks by state,
//! histograms, bounded labels (R6.8), Unix-time gauges that are absent until
//! observed, never 0 (R6.4, R4.1).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metrics::{SharedString, Unit};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::CompositeKey;
use stallwarden_sinks::metrics::{
    MetricsSink, CANCELS, HEARTBEATS, KILLS, LAST_CALL, LAST_PROGRESS, RESTARTS, STALLS,
    STALL_SILENCE, TASKS, TASK_DURATION,
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

fn gauge(snap: &Snap, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    match value(snap, name, labels) {
        Some(DebugValue::Gauge(g)) => Some(g.0),
        None => None,
        other => panic!("{name} is not a gauge: {other:?}"),
    }
}

fn histogram(snap: &Snap, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    match value(snap, name, labels) {
        Some(DebugValue::Histogram(v)) => v.iter().map(|f| f.0).collect(),
        None => Vec::new(),
        other => panic!("{name} is not a histogram: {other:?}"),
    }
}

/// Runs `scenario` with a fresh recorder installed for this thread only,
/// every task in profile `default`.
fn record(scenario: impl FnOnce(&Guard, &MetricsSink)) -> Snap {
    record_with(MetricsSink::new(), |g, s| scenario(g, s)).0
}

/// Runs `scenario` with `sink` and a fresh thread-local recorder; the
/// snapshot is taken while what the scenario returns (e.g. live task
/// handles) is still alive.
fn record_with<T>(
    sink: MetricsSink,
    scenario: impl FnOnce(&Guard, &MetricsSink) -> T,
) -> (Snap, T) {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let guard = Guard::builder()
            .clock(ManualClock::new())
            .sink(sink.clone())
            .build();
        let kept = scenario(&guard, &sink);
        (snap.snapshot().into_vec(), kept)
    })
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
    let p = ("profile", "default");
    assert_eq!(counter(&snap, STALLS, &[p, ("budget", "startup")]), 1);
    assert_eq!(counter(&snap, CANCELS, &[p, ("reason", "stall")]), 1);
    assert_eq!(counter(&snap, KILLS, &[p]), 1);
    assert_eq!(counter(&snap, STALLS, &[p, ("budget", "idle")]), 2);
    // Nothing observed progress for `build`: no stamp, not 0; `flaky`
    // recovered nothing either (its output came before its stalls).
    assert_eq!(gauge(&snap, LAST_CALL, &[p]), None);
}

// R8.15: each `restarted` event is one restart; none before the first.
#[test]
fn restarts_are_counted_per_restarted_event() {
    let snap = record(|g, _| {
        let profile = Profile::default().idle(5 * SECOND).heartbeat_interval(None);
        let t = g.start("worker", profile.clone()).unwrap();
        g.advance(5 * SECOND);
        t.finish(Outcome::Cancelled, None, Some(15)).unwrap();
        for n in 1..=2 {
            let t = g.start("worker", profile.clone()).unwrap();
            t.restarted(n, SECOND * n, Some("idle budget 5s exceeded".into()))
                .unwrap();
            t.finish_completed();
        }
    });
    assert_eq!(counter(&snap, RESTARTS, &[("profile", "default")]), 2);
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
    assert_eq!(counter(&snap, HEARTBEATS, &[("profile", "default")]), 1);
    assert_eq!(
        gauge(&snap, LAST_PROGRESS, &[("profile", "default")]),
        None,
        "no output yet"
    );

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
    assert!(counter(&snap, HEARTBEATS, &[("profile", "default")]) >= 2);
    let at = gauge(&snap, LAST_PROGRESS, &[("profile", "default")]).expect("set from a heartbeat");
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
    let at = gauge(&snap, LAST_PROGRESS, &[("profile", "default")]).expect("set from recovered");
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
        gauge(&snap, LAST_PROGRESS, &[("profile", "default")]),
        None,
        "a heartbeat is not progress"
    );
    assert_eq!(
        gauge(&snap, LAST_CALL, &[("profile", "default")]),
        None,
        "no call observed"
    );

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
    let call = gauge(&snap, LAST_CALL, &[("profile", "default")]).expect("last call set");
    assert!((call - (WALL0 + 7.0)).abs() < 1e-3, "{}", call - WALL0);
    let progress =
        gauge(&snap, LAST_PROGRESS, &[("profile", "default")]).expect("last progress set");
    assert!(
        (progress - (WALL0 + 8.0)).abs() < 1e-3,
        "{}",
        progress - WALL0
    );
}

/// The part of a task name before its `/`: the fleet's profile label.
fn by_prefix() -> MetricsSink {
    MetricsSink::new().profile_of(|name| name.split('/').next().unwrap_or("").to_owned().into())
}

// R6.8: a fleet of many differently named turns makes a fixed number of
// series: no series carries a `task` label unless asked for.
#[test]
fn many_tasks_make_no_task_labelled_series() {
    let (snap, ()) = record_with(by_prefix(), |g, sink| {
        let profile = Profile::default()
            .idle(5 * SECOND)
            .terminate_after(0)
            .heartbeat_interval(Some(2 * SECOND));
        for i in 0..200 {
            let kind = if i % 2 == 0 { "agent" } else { "review" };
            let t = g
                .start(format!("{kind}/turn-{i}"), profile.clone())
                .unwrap();
            t.output(1, 1);
            g.advance(6 * SECOND);
            t.output(1, 1);
            sink.observe(&t.status().unwrap());
            t.finish_completed();
        }
    });
    for (key, _, _, _) in &snap {
        let key = key.key();
        assert!(
            key.labels().all(|l| l.key() != "task"),
            "{} carries a task label",
            key.name()
        );
    }
    assert!(snap.len() <= 20, "{} series for 200 tasks", snap.len());
    assert_eq!(
        counter(&snap, STALLS, &[("profile", "agent"), ("budget", "idle")]),
        100
    );
    assert_eq!(
        counter(&snap, STALLS, &[("profile", "review"), ("budget", "idle")]),
        100
    );
    assert_eq!(
        histogram(
            &snap,
            TASK_DURATION,
            &[("profile", "agent"), ("outcome", "completed")]
        )
        .len(),
        100
    );
}

// R6.8: per-task series exist only behind the explicit opt-in.
#[test]
fn per_task_series_only_when_asked_for() {
    let (snap, ()) = record_with(MetricsSink::new().per_task(true), |g, sink| {
        let t = g
            .start("turn-1", Profile::default().heartbeat_interval(None))
            .unwrap();
        g.advance(2 * SECOND);
        t.output(5, 1);
        sink.observe(&t.status().unwrap());
        t.finish_completed();
    });
    let at = gauge(
        &snap,
        LAST_PROGRESS,
        &[("profile", "default"), ("task", "turn-1")],
    )
    .expect("per-task stamp");
    assert!((at - (WALL0 + 2.0)).abs() < 1e-3, "{}", at - WALL0);
}

// R6.8: `stallwarden_tasks{state}` is moved by the events themselves:
// started → working, stalled → stalled, recovered → working, cancelling →
// cancelling, finished → gone; no polling.
#[test]
fn live_tasks_by_state_follow_the_events() {
    let (snap, _kept) = record_with(MetricsSink::new(), |g, _| {
        let quiet = Profile::default()
            .idle(5 * SECOND)
            .terminate_after(0)
            .heartbeat_interval(None);
        let busy = g.start("busy", quiet.clone()).unwrap();
        let stuck = g.start("stuck", quiet.clone()).unwrap();
        let back = g.start("back", quiet.clone()).unwrap();
        let doomed = g
            .start(
                "doomed",
                quiet.clone().terminate_after(1).grace_period(60 * SECOND),
            )
            .unwrap();
        let done = g.start("done", quiet).unwrap();
        done.finish_completed();
        g.advance(3 * SECOND);
        busy.output(1, 1);
        g.advance(3 * SECOND); // stuck, back and doomed stall at 5 s
        back.output(1, 1); // recovered
        busy.output(1, 1);
        vec![busy, stuck, back, doomed]
    });
    assert_eq!(gauge(&snap, TASKS, &[("state", "working")]), Some(2.0));
    assert_eq!(gauge(&snap, TASKS, &[("state", "stalled")]), Some(1.0));
    assert_eq!(gauge(&snap, TASKS, &[("state", "cancelling")]), Some(1.0));
    assert_eq!(
        counter(
            &snap,
            CANCELS,
            &[("profile", "default"), ("reason", "stall")]
        ),
        1
    );
    // Three verdicts at 5 s of startup silence.
    assert_eq!(
        histogram(
            &snap,
            STALL_SILENCE,
            &[("profile", "default"), ("budget", "startup")]
        ),
        vec![5.0; 3]
    );
    assert_eq!(
        histogram(
            &snap,
            TASK_DURATION,
            &[("profile", "default"), ("outcome", "completed")]
        ),
        vec![0.0]
    );
}

// R6.8: every task that settles leaves the state gauge at zero, whatever
// its path; the cancel reason is the verdict's kind, never its free text.
#[test]
fn settled_tasks_leave_no_live_count_and_reasons_are_kinds() {
    let (snap, ()) = record_with(MetricsSink::new(), |g, _| {
        let p = Profile::default()
            .idle(60 * SECOND)
            .deadline(8 * SECOND)
            .grace_period(SECOND)
            .heartbeat_interval(None);
        let a = g.start("deadline", p.clone()).unwrap();
        let b = g.start("requested", p.clone()).unwrap();
        let c = g.start("triggered", p.clone()).unwrap();
        let d = g.start("liveness", p.liveness(3 * SECOND)).unwrap();
        b.cancel("operator said so").unwrap();
        c.trigger("tool reported a loop").unwrap();
        d.heartbeat(); // arms liveness (R2.5): lost at 3 s
        g.advance(9 * SECOND);
        g.advance(2 * SECOND);
        for t in [a, b, c, d] {
            t.finish(Outcome::Cancelled, None, Some(15)).unwrap();
        }
    });
    for state in ["working", "stalled", "cancelling"] {
        // Never touched (stalled, here) or back to zero.
        assert_eq!(
            gauge(&snap, TASKS, &[("state", state)]).unwrap_or(0.0),
            0.0,
            "{state}"
        );
    }
    for reason in ["deadline", "requested", "triggered", "liveness"] {
        assert_eq!(
            counter(
                &snap,
                CANCELS,
                &[("profile", "default"), ("reason", reason)]
            ),
            1,
            "{reason}"
        );
    }
    assert_eq!(
        histogram(
            &snap,
            TASK_DURATION,
            &[("profile", "default"), ("outcome", "cancelled")]
        )
        .len(),
        4
    );
}

// R6.8: a wall clock set before 1970 stamps a negative Unix time, not a
// bogus 0 or a positive one that reads as "just now" minus an offset.
#[test]
fn a_stamp_before_1970_is_negative() {
    use watchdog_core::{RecordingSink, Sink};
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let t = guard
        .start(
            "old",
            Profile::default().idle(5 * SECOND).terminate_after(0),
        )
        .unwrap();
    t.output(1, 1);
    guard.advance(6 * SECOND);
    t.output(1, 1); // recovered: stamps last progress at the event's wall
    let mut recovered = rec
        .events()
        .into_iter()
        .find(|e| e.kind.type_name() == "recovered")
        .expect("a recovered event");
    recovered.wall = UNIX_EPOCH - Duration::from_millis(2500);
    let sink = MetricsSink::new();
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || sink.on_event(&recovered).unwrap());
    let snap = snap.snapshot().into_vec();
    assert_eq!(
        gauge(&snap, LAST_PROGRESS, &[("profile", "default")]),
        Some(-2.5)
    );
}

// R6.8: the exported series carry their unit and help text (a Prometheus
// `# HELP` line), registered by `describe` (kills `describe -> ()`).
#[test]
fn describe_gives_every_series_its_unit_and_help() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        MetricsSink::describe();
        metrics::gauge!(LAST_PROGRESS).set(1.0);
    });
    let all = snap.snapshot().into_vec();
    let (_, unit, help, _) = all
        .iter()
        .find(|(k, ..)| k.key().name() == LAST_PROGRESS)
        .expect("the gauge was set");
    assert_eq!(*unit, Some(Unit::Seconds));
    assert_eq!(
        help.as_deref(),
        Some("Unix time of the last progress signal")
    );
}
