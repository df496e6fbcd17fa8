//! Silence, strikes and recovery (R3.1–R3.3, with R2.8 for paused time and
//! R10.5 for the stall flag): what a `stalled` event and its strikes report,
//! how the budget re-arms after a stall, and what silence a `recovered`
//! event carries. Virtual time (`ManualClock` + `Guard::advance`), never a
//! real sleep.

use std::time::Duration;

use watchdog_core::{ActionKind, EventKind, RecordingSink, TaskState};

mod common;
use common::{quiet, reason_of, secs, setup};

/// The `silent` field of every `stalled` and `recovered` event of `name`.
fn silences(rec: &RecordingSink, name: &str) -> Vec<(&'static str, Duration)> {
    rec.events()
        .into_iter()
        .filter(|e| &*e.name == name)
        .filter_map(|e| match e.kind {
            EventKind::Stalled { silent, .. } => Some(("stalled", silent)),
            EventKind::Recovered { silent } => Some(("recovered", silent)),
            _ => None,
        })
        .collect()
}

// R3.3 + R2.8: the silence a `recovered` event reports is active silence; a
// signal that arrives while paused ends it at the pause, not at the signal.
#[test]
fn recovered_silence_excludes_paused_time() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("p", quiet().idle(secs(10)).terminate_after(0))
        .unwrap();
    guard.advance(secs(10)); // stalled, silent 10 s
    guard.advance(secs(2));
    t.pause().unwrap();
    guard.advance(secs(100));
    t.output(1, 0); // at 112 s, paused since 12 s
    assert_eq!(
        silences(&rec, "p"),
        [("stalled", secs(10)), ("recovered", secs(12))]
    );
    assert_eq!(
        rec.timeline("p"),
        [
            (secs(0), "started"),
            (secs(10), "stalled"),
            (secs(112), "recovered")
        ]
    );
}

// R2.8, R3.3: after a resume the silence carried by a stalled task is only
// the active part: 12 s before the pause and 3 s after the resume.
#[test]
fn recovered_after_resume_counts_only_active_silence() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("r", quiet().idle(secs(10)).terminate_after(0))
        .unwrap();
    guard.advance(secs(12));
    t.pause().unwrap();
    guard.advance(secs(100));
    t.resume().unwrap();
    guard.advance(secs(3));
    t.output(1, 0);
    assert_eq!(
        silences(&rec, "r"),
        [("stalled", secs(10)), ("recovered", secs(15))]
    );
}

// R3.1, R3.2: later strikes report the whole silence since the last
// progress, not the silence since the previous strike.
#[test]
fn later_strikes_report_silence_since_the_last_progress() {
    let (guard, rec, _) = setup();
    let _t = guard
        .start("s", quiet().idle(secs(10)).terminate_after(3))
        .unwrap();
    guard.advance(secs(35));
    assert_eq!(
        silences(&rec, "s"),
        [
            ("stalled", secs(10)),
            ("stalled", secs(20)),
            ("stalled", secs(30))
        ]
    );
    assert_eq!(
        reason_of(&rec, "s", "cancelling"),
        "idle budget of 10s exceeded before any output: silent for 30s (strike 3 of 3)"
    );
}

// R3.2: a strike that is not the last one does not cancel; the one that
// reaches terminate-after does, with a reason that names budget and strike.
#[test]
fn stall_reason_names_budget_limit_silence_and_strike() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("x", quiet().idle(secs(5)).grace_period(secs(2)))
        .unwrap();
    t.output(1, 1); // startup over: the idle budget applies
    guard.advance(secs(5));
    assert_eq!(
        reason_of(&rec, "x", "cancelling"),
        "idle budget of 5s exceeded: silent for 5s (strike 1 of 1)"
    );
    let cancel = &rec.actions()[0];
    assert_eq!(
        cancel.kind,
        ActionKind::Cancel {
            reason: "idle budget of 5s exceeded: silent for 5s (strike 1 of 1)".into()
        }
    );
    assert_eq!(t.status().unwrap().state, TaskState::Cancelling);
}

// R3.2: after a stall the budget re-arms from the verdict, and a renewal
// that comes later than the verdict moves the next strike accordingly.
#[test]
fn progress_after_a_stall_rearms_the_budget_from_the_progress() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("g", quiet().idle(secs(10)).terminate_after(0))
        .unwrap();
    guard.advance(secs(10));
    guard.advance(secs(4));
    t.output(1, 0); // recovered at 14 s
    guard.advance(secs(9));
    assert_eq!(t.status().unwrap().state, TaskState::Working);
    guard.advance(secs(1));
    assert_eq!(
        rec.timeline("g"),
        [
            (secs(0), "started"),
            (secs(10), "stalled"),
            (secs(14), "recovered"),
            (secs(24), "stalled")
        ]
    );
}

// R3.3, R10.5: a stall raises the task's flag, so the very next signal
// takes the slow path and the `recovered` event comes with it, at the
// signal's instant, with no clock movement after it.
#[test]
fn the_first_signal_after_a_stall_recovers_at_once() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("r", quiet().idle(secs(10)).terminate_after(0))
        .unwrap();
    guard.advance(secs(12));
    t.output(1, 0);
    assert_eq!(
        rec.timeline("r"),
        [
            (secs(0), "started"),
            (secs(10), "stalled"),
            (secs(12), "recovered")
        ]
    );
    // And the flag is lowered again: the next stall is its own.
    guard.advance(secs(10));
    t.output(1, 0);
    assert_eq!(rec.types_for("r").len(), 5, "{:?}", rec.types_for("r"));
}
