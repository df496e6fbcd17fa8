//! What renews a silence budget, and which budget applies (R2.1–R2.3,
//! R2.6, R2.8, R5.4): a verdict due at an operation's instant, signals while
//! paused, READY=1 after startup or while cancelling, progress values that
//! start at 0 or -0.0, and the execution budget alone. Virtual time
//! (`ManualClock` + `Guard::advance`), never a real sleep.

use watchdog_core::{Budget, CallOutcome, EventKind, KindSet, SignalKind};

mod common;
use common::{budget, quiet, reason_of, secs, setup};

// R2.1, R2.6: with tool-call out of renewed-by, finishing the last call
// hands the whole silence back to the idle budget, and the verdict that
// makes due at that very instant is taken by the call itself, not later.
#[test]
fn verdict_due_at_the_instant_of_an_operation_is_taken_by_it() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "op",
            quiet()
                .idle(secs(10))
                .execution(secs(100))
                .renewed_by(KindSet::EMPTY.with(SignalKind::Output)),
        )
        .unwrap();
    t.output(1, 0); // startup over
    t.tool_started("c1", "bash").unwrap();
    guard.advance(secs(10));
    assert_eq!(rec.types_for("op"), ["started"]);
    t.tool_finished("c1", CallOutcome::Success).unwrap();
    assert_eq!(rec.types_for("op"), ["started", "stalled", "cancelling"]);
    let stalled = &rec.events_of(t.id())[1];
    assert!(
        matches!(
            stalled.kind,
            EventKind::Stalled {
                budget: Budget::Idle,
                ..
            }
        ),
        "{stalled:?}"
    );
    assert_eq!(stalled.elapsed, secs(10));
}

// R2.8: a signal recorded while paused renews; after the resume the budget
// runs in full from the resume, not from the signal's raw instant.
#[test]
fn signal_while_paused_renews_from_the_resume() {
    let (guard, rec, _) = setup();
    let t = guard.start("q", quiet().idle(secs(10))).unwrap();
    t.output(1, 0);
    guard.advance(secs(5));
    t.pause().unwrap();
    guard.advance(secs(15));
    t.output(1, 0); // at 20 s, while paused
    guard.advance(secs(10));
    t.resume().unwrap(); // at 30 s
    guard.advance(secs(9));
    assert_eq!(rec.types_for("q"), ["started"]);
    guard.advance(secs(1));
    assert_eq!(
        rec.timeline("q")[1],
        (secs(40), "stalled"),
        "a full idle budget after the resume at 30 s"
    );
}

// R2.3, R5.4: READY=1 ends only the startup phase; once progress has ended
// startup, READY=1 must not renew the idle budget.
#[test]
fn ready_after_first_progress_does_not_renew_idle() {
    let (guard, rec, _) = setup();
    let t = guard.start("svc", quiet().idle(secs(10))).unwrap();
    t.output(1, 0);
    guard.advance(secs(8));
    t.ready();
    guard.advance(secs(2));
    assert_eq!(rec.timeline("svc")[1], (secs(10), "stalled"));
}

// R2.3: READY=1 while cancelling changes nothing (no renewal, no error).
#[test]
fn ready_while_cancelling_is_ignored() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("c", quiet().startup(secs(60)).grace_period(secs(5)))
        .unwrap();
    t.cancel("operator").unwrap();
    t.ready();
    guard.advance(secs(5));
    assert_eq!(rec.types_for("c"), ["started", "cancelling", "killed"]);
    assert_eq!(reason_of(&rec, "c", "cancelling"), "operator");
}

// R2.6: a first progress value of 0 is a rise from "never".
#[test]
fn first_progress_of_zero_counts_as_a_rise() {
    let (guard, rec, _) = setup();
    let t = guard.start("z", quiet().idle(secs(10))).unwrap();
    guard.advance(secs(9));
    assert!(t.progress(0.0));
    assert!(!t.progress(0.0));
    assert!(!t.progress(f64::INFINITY));
    guard.advance(secs(9));
    assert_eq!(rec.types_for("z"), ["started"]);
    assert!(t.progress(0.25));
    assert!(t.progress(7.0));
    assert!(!t.progress(6.5));
}

// R2.6: -0.0 is zero, not a huge value: after a first progress of -0.0 a
// rising value must still count. `TaskCell::raise_progress` compares raw
// f64 bits, and -0.0 has its sign bit set; unnormalised, its bits were
// larger than every positive float's and every later rise was refused (a
// task reporting MCP progress 0 as -0.0 stalled while its progress climbed).
#[test]
fn negative_zero_progress_does_not_block_later_progress() {
    let (guard, rec, _) = setup();
    let t = guard.start("nz", quiet().idle(secs(10))).unwrap();
    t.progress(-0.0);
    guard.advance(secs(9));
    assert!(t.progress(1.0), "1.0 rose above -0.0");
    guard.advance(secs(9));
    assert!(t.progress(2.0), "2.0 rose above 1.0");
    guard.advance(secs(9));
    assert_eq!(rec.types_for("nz"), ["started"], "rising progress renews");
}

// R2.2: with a call in flight and no idle budget, the execution budget
// alone applies; with neither, silence is never judged.
#[test]
fn execution_budget_alone_applies_while_a_call_is_in_flight() {
    let (guard, rec, _) = setup();
    let mut p = quiet().execution(secs(20)).terminate_after(0);
    p.idle = None;
    let t = guard.start("eo", p).unwrap();
    guard.advance(secs(100));
    assert_eq!(rec.types_for("eo"), ["started"], "no idle budget: no stall");
    t.tool_started("c", "bash").unwrap();
    guard.advance(secs(20));
    assert_eq!(rec.timeline("eo")[1], (secs(120), "stalled"));
    let s = t.status().unwrap();
    assert_eq!(
        s.budgets,
        [budget("execution", secs(20), secs(20), true)],
        "re-armed from the verdict"
    );
}
