//! The deadline, liveness and extension (R2.4, R2.5, R2.8, R2.9, R3.4): the
//! reasons they give, active time across a pause, the inclusive
//! max-deadline bound, and notify-only mode firing once per deadline or
//! per liveness gap. Virtual time (`ManualClock` + `Guard::advance`), never
//! a real sleep.

use std::time::Duration;

use watchdog_core::GuardError;

mod common;
use common::{budget, quiet, reason_of, secs, setup};

// R2.4, R2.8, R3.4: the deadline reason names the deadline in active time,
// however long the task was paused.
#[test]
fn deadline_reason_names_the_deadline_in_active_time() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("d", quiet().idle(secs(600)).deadline(secs(60)))
        .unwrap();
    guard.advance(secs(10));
    t.pause().unwrap();
    guard.advance(secs(30));
    t.resume().unwrap();
    guard.advance(secs(49));
    assert_eq!(rec.types_for("d"), ["started"]);
    guard.advance(secs(1));
    assert_eq!(rec.timeline("d")[1], (secs(90), "deadline_exceeded"));
    assert_eq!(
        reason_of(&rec, "d", "deadline_exceeded"),
        "deadline of 1m exceeded"
    );
    assert_eq!(
        reason_of(&rec, "d", "cancelling"),
        "deadline of 1m exceeded"
    );
}

// R2.9: an extension to exactly max-deadline is allowed (the bound is
// inclusive); one nanosecond more is refused with the requested total.
#[test]
fn extension_to_exactly_max_deadline_is_allowed() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "e",
            quiet()
                .idle(secs(600))
                .deadline(secs(60))
                .max_deadline(secs(100)),
        )
        .unwrap();
    guard.advance(secs(50));
    assert_eq!(t.extend(secs(50)).unwrap(), secs(100));
    assert_eq!(
        t.extend(secs(50) + Duration::from_nanos(1)).unwrap_err(),
        GuardError::ExtensionRefused {
            task: "e".into(),
            requested: secs(100) + Duration::from_nanos(1),
            max: secs(100),
        }
    );
    // An extension that asks for less than the current deadline keeps it.
    assert_eq!(t.extend(secs(1)).unwrap(), secs(100));
    guard.advance(secs(49));
    // R8.7: the one refusal is an event too.
    assert_eq!(rec.types_for("e"), ["started", "extension_refused"]);
    guard.advance(secs(1));
    assert_eq!(rec.timeline("e")[2], (secs(100), "deadline_exceeded"));
}

// R2.9, R3.4: in notify-only mode a deadline that has fired stays fired
// unless an extension really moves it; an extension to where it already is
// must not fire it a second time.
#[test]
fn extension_that_does_not_move_the_deadline_does_not_refire_it() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "n",
            quiet().idle(secs(600)).deadline(secs(30)).notify_only(true),
        )
        .unwrap();
    guard.advance(secs(30));
    assert_eq!(rec.types_for("n"), ["started", "deadline_exceeded"]);
    assert_eq!(t.extend(Duration::ZERO).unwrap(), secs(30));
    guard.advance(secs(30));
    assert_eq!(rec.types_for("n"), ["started", "deadline_exceeded"]);
    // A real extension re-arms it.
    assert_eq!(t.extend(secs(5)).unwrap(), secs(65));
    guard.advance(secs(5));
    assert_eq!(
        rec.timeline("n"),
        [
            (secs(0), "started"),
            (secs(30), "deadline_exceeded"),
            (secs(65), "deadline_exceeded")
        ]
    );
}

// R2.8, R2.9: an extension asked for while paused is measured from the
// pause (active time), and the resume shifts it with every other budget.
#[test]
fn extension_while_paused_is_measured_in_active_time() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "x",
            quiet()
                .idle(secs(3600))
                .deadline(secs(60))
                .max_deadline(secs(200)),
        )
        .unwrap();
    guard.advance(secs(50));
    t.pause().unwrap();
    guard.advance(secs(1000));
    assert_eq!(t.extend(secs(40)).unwrap(), secs(90));
    t.resume().unwrap();
    let dl = |t: &watchdog_core::TaskHandle| {
        t.status()
            .unwrap()
            .budgets
            .into_iter()
            .find(|b| b.budget == "deadline")
            .unwrap()
    };
    assert_eq!(dl(&t), budget("deadline", secs(90), secs(40), false));
    guard.advance(secs(39));
    assert_eq!(rec.types_for("x"), ["started"]);
    guard.advance(secs(1));
    assert_eq!(rec.timeline("x")[1], (secs(1090), "deadline_exceeded"));
    assert_eq!(
        reason_of(&rec, "x", "deadline_exceeded"),
        "deadline of 1m 30s exceeded"
    );
}

// R2.5, R3.4: the liveness reason says how long the gap was and the limit.
#[test]
fn liveness_reason_names_the_gap_and_the_limit() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("l", quiet().idle(secs(600)).liveness(secs(10)))
        .unwrap();
    guard.advance(secs(3));
    t.heartbeat();
    guard.advance(secs(10));
    assert_eq!(rec.timeline("l")[1], (secs(13), "liveness_lost"));
    assert_eq!(
        reason_of(&rec, "l", "liveness_lost"),
        "no heartbeat for 10s (liveness 10s)"
    );
}

// R2.5, R2.8: the liveness gap stops while paused and resumes with what it
// had used.
#[test]
fn liveness_gap_excludes_paused_time() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("lp", quiet().idle(secs(3600)).liveness(secs(10)))
        .unwrap();
    guard.advance(secs(2));
    t.heartbeat(); // armed at 2 s
    guard.advance(secs(3));
    t.pause().unwrap(); // 3 s of the gap used
    guard.advance(secs(100));
    t.resume().unwrap(); // at 105 s
    guard.advance(secs(6));
    assert_eq!(rec.types_for("lp"), ["started"]);
    guard.advance(secs(1));
    assert_eq!(rec.timeline("lp")[1], (secs(112), "liveness_lost"));
}

// R2.5, R3.4: in notify-only mode liveness lost is reported once per loss;
// a heartbeat re-arms it and the next gap is measured from that heartbeat.
#[test]
fn liveness_lost_once_per_gap_in_notify_only_mode() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "ln",
            quiet()
                .idle(secs(3600))
                .liveness(secs(10))
                .notify_only(true),
        )
        .unwrap();
    t.heartbeat();
    guard.advance(secs(50));
    assert_eq!(rec.types_for("ln"), ["started", "liveness_lost"]);
    t.heartbeat(); // at 50 s
    guard.advance(secs(9));
    assert_eq!(rec.types_for("ln"), ["started", "liveness_lost"]);
    guard.advance(secs(1));
    assert_eq!(
        rec.timeline("ln"),
        [
            (secs(0), "started"),
            (secs(10), "liveness_lost"),
            (secs(60), "liveness_lost")
        ]
    );
}
