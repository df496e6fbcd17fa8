//! Tests that bite (SPEC §10): each pins an engine behaviour that a surviving
//! mutant of `cargo mutants -p watchdog-core` showed the other suites left
//! loose. Virtual time throughout (`ManualClock` + `Guard::advance`), exact
//! events and fields asserted, never a real sleep.
//!
//! Rules are cited per test; TESTING.md (`## Mutation testing`) says how the
//! survivors were found and which remain, and why.

use std::sync::Arc;
use std::time::Duration;

use watchdog_core::{
    ActionKind, Budget, BudgetStatus, CallOutcome, ChildInfo, ChildProbe, Clock, EventKind, Guard,
    GuardError, KindSet, LeftoverAction, Outcome, Phase, ProcState, ProcessName, Profile,
    RecordingSink, SignalKind, TaskState,
};

mod common;
use common::{ms, quiet, secs, setup};

/// The `reason` of the first event of type `ty` for task `name`.
fn reason_of(rec: &RecordingSink, name: &str, ty: &str) -> String {
    rec.events()
        .into_iter()
        .filter(|e| &*e.name == name && e.kind.type_name() == ty)
        .find_map(|e| match e.kind {
            EventKind::Cancelling { reason, .. }
            | EventKind::DeadlineExceeded { reason }
            | EventKind::LivenessLost { reason }
            | EventKind::Triggered { reason } => Some(reason),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {ty} with a reason for {name}"))
}

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

fn budget(name: &'static str, limit: Duration, remaining: Duration, active: bool) -> BudgetStatus {
    BudgetStatus {
        budget: name,
        limit,
        remaining,
        active,
    }
}

// ---------------------------------------------------------------------------
// Silence, strikes and recovery (R2.8, R3.1–R3.3)
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Deadline, liveness and extension (R2.4, R2.5, R2.8, R2.9, R3.4)
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Escalation and settling (R3.5, R3.6, R3.8)
// ---------------------------------------------------------------------------

// R3.6: long_running comes at its time even while the task is cancelling,
// because the task is still active; the kill still comes after the grace.
#[test]
fn long_running_still_reported_while_cancelling() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "lr",
            quiet()
                .idle(secs(600))
                .long_running_after(secs(10))
                .grace_period(secs(60)),
        )
        .unwrap();
    guard.advance(secs(1));
    t.trigger("fault").unwrap();
    guard.advance(secs(100));
    assert_eq!(
        rec.timeline("lr"),
        [
            (secs(0), "started"),
            (secs(1), "triggered"),
            (secs(1), "cancelling"),
            (secs(10), "long_running"),
            (secs(61), "killed")
        ]
    );
    assert_eq!(reason_of(&rec, "lr", "triggered"), "fault");
    assert_eq!(reason_of(&rec, "lr", "cancelling"), "triggered: fault");
}

// R3.5: the guard-level cancel by name dispatches the cancel with the
// caller's reason and the attached pid.
#[test]
fn cancel_by_name_dispatches_the_reason_and_pid() {
    let (guard, rec, _) = setup();
    let t = guard.start("job", quiet().grace_period(secs(5))).unwrap();
    t.set_pid(777);
    guard.cancel("job", "user pressed stop").unwrap();
    assert_eq!(rec.types_for("job"), ["started", "cancelling"]);
    assert_eq!(reason_of(&rec, "job", "cancelling"), "user pressed stop");
    let a = &rec.actions()[0];
    assert_eq!(a.pid, Some(777));
    assert_eq!(
        a.kind,
        ActionKind::Cancel {
            reason: "user pressed stop".into()
        }
    );
    assert_eq!(
        guard.cancel("job", "again"),
        Err(GuardError::Cancelling("job".into()))
    );
    assert_eq!(
        t.pause(),
        Err(GuardError::Cancelling("job".into())),
        "a cancelling task's budgets no longer move"
    );
    assert_eq!(t.resume(), Err(GuardError::Cancelling("job".into())));
    assert_eq!(t.extend(secs(1)), Err(GuardError::Cancelling("job".into())));
}

// R3.5: the pid given at start is in the started event and in every action.
#[test]
fn started_event_and_actions_carry_the_process_pid() {
    let (guard, rec, _) = setup();
    let t = guard
        .start_process("proc", quiet().idle(secs(1)).grace_period(secs(1)), 4242)
        .unwrap();
    guard.advance(secs(2));
    assert_eq!(rec.events()[0].kind, EventKind::Started { pid: Some(4242) });
    let pids: Vec<_> = rec.actions().iter().map(|a| a.pid).collect();
    assert_eq!(pids, [Some(4242), Some(4242)]);
    drop(t);
}

// R3.8: finishing as failed is reported as failed, with the exit code.
#[test]
fn finish_failed_reports_failed() {
    let (guard, rec, _) = setup();
    let t = guard.start("f", quiet()).unwrap();
    t.finish_failed();
    assert_eq!(
        rec.events().last().unwrap().kind,
        EventKind::Finished {
            outcome: Outcome::Failed,
            exit_code: None,
            signal: None
        }
    );
    let u = guard.start("g", quiet()).unwrap();
    u.finish(Outcome::Completed, Some(3), None).unwrap();
    assert_eq!(
        rec.events().last().unwrap().kind,
        EventKind::Finished {
            outcome: Outcome::Completed,
            exit_code: Some(3),
            signal: None
        }
    );
    rec.assert_settled("f");
    rec.assert_settled("g");
}

// ---------------------------------------------------------------------------
// Outbound heartbeats (R3.7, §8.3)
// ---------------------------------------------------------------------------

// R3.7, R2.8: a heartbeat emitted while paused reports the budget left at
// the pause, and the deadline in active time.
#[test]
fn heartbeat_while_paused_reports_budget_left_at_the_pause() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "h",
            Profile::default()
                .idle(secs(60))
                .deadline(secs(100))
                .heartbeat_interval(Some(secs(10))),
        )
        .unwrap();
    guard.advance(secs(5));
    t.pause().unwrap();
    guard.advance(secs(20)); // heartbeats at 10 s and 20 s
    t.resume().unwrap(); // at 25 s: 20 s paused
    guard.advance(secs(5)); // heartbeat at 30 s
    let hbs: Vec<_> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Heartbeat {
                idle_remaining,
                deadline,
                ..
            } => Some((e.elapsed, idle_remaining, deadline)),
            _ => None,
        })
        .collect();
    assert_eq!(
        hbs,
        [
            (secs(10), Some(secs(55)), Some(secs(100))),
            (secs(20), Some(secs(55)), Some(secs(100))),
            (secs(30), Some(secs(50)), Some(secs(100))),
        ]
    );
}

// R3.7: no heartbeat for an interval with a renewal in it, even one renewal
// in the middle; heartbeats resume once a whole interval is silent. With
// no idle budget the heartbeat says so (absent).
#[test]
fn heartbeat_skipped_for_any_interval_with_a_renewal() {
    let (guard, rec, _) = setup();
    let mut p = Profile::default().heartbeat_interval(Some(secs(10)));
    p.idle = None;
    let t = guard.start("hb", p).unwrap();
    guard.advance(secs(15));
    t.output(7, 1); // renews inside (10 s, 20 s]
    guard.advance(secs(15)); // 30 s
    let hbs: Vec<_> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Heartbeat {
                idle_remaining,
                total_bytes,
                total_lines,
                last_output_age,
                ..
            } => Some((
                e.elapsed,
                idle_remaining,
                total_bytes,
                total_lines,
                last_output_age,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        hbs,
        [
            (secs(10), None, 0, 0, None),
            (secs(30), None, 7, 1, Some(secs(15)))
        ]
    );
}

// R3.7, R5.1: output counters feed the heartbeat's totals along with
// `Recorder::output`.
#[test]
fn heartbeat_totals_add_every_output_counter() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "oc",
            Profile::default()
                .idle(secs(600))
                .heartbeat_interval(Some(secs(10))),
        )
        .unwrap();
    let out = t.output_counter();
    let err = t.output_counter();
    out.record(100, 3);
    err.record(20, 0);
    t.output(1, 1);
    assert_eq!(out.recorder().id(), t.id());
    guard.advance(secs(10));
    let hb = rec
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::Heartbeat {
                total_bytes,
                total_lines,
                ..
            } => Some((total_bytes, total_lines)),
            _ => None,
        })
        .unwrap();
    assert_eq!(hb, (121, 4));
    let s = t.status().unwrap();
    assert_eq!((s.total_bytes, s.total_lines), (121, 4));
    assert_eq!(s.last_output_age, Some(secs(10)));
}

// ---------------------------------------------------------------------------
// Status snapshots (R4.1–R4.3)
// ---------------------------------------------------------------------------

// R4.2: every configured budget is listed, in a fixed order, with its limit,
// the time left and whether it is the silence budget that applies now.
#[test]
fn status_lists_each_budget_with_its_remaining_time() {
    let (guard, _, _) = setup();
    let t = guard
        .start(
            "b",
            quiet()
                .idle(secs(10))
                .startup(secs(30))
                .deadline(secs(100))
                .liveness(secs(20))
                .terminate_after(0),
        )
        .unwrap();
    guard.advance(secs(4));
    let s = t.status().unwrap();
    assert_eq!(
        s.budgets,
        [
            budget("startup", secs(30), secs(26), true),
            budget("idle", secs(10), secs(6), false),
            budget("deadline", secs(100), secs(96), false),
        ]
    );
    assert_eq!(s.phase, Phase::Idle);

    t.heartbeat(); // arms liveness at 4 s
    t.tool_started("c1", "bash").unwrap(); // first progress at 4 s
    guard.advance(secs(3));
    let s = t.status().unwrap();
    assert_eq!(
        s.budgets,
        [
            budget("idle", secs(10), secs(7), false),
            budget("execution", secs(10), secs(7), true),
            budget("deadline", secs(100), secs(93), false),
            budget("liveness", secs(20), secs(17), false),
        ]
    );
    assert_eq!(s.phase, Phase::Executing { tools: 1 });

    t.pause().unwrap(); // at 7 s
    guard.advance(secs(100));
    let s = t.status().unwrap();
    assert!(s.paused);
    assert_eq!(s.elapsed, secs(107));
    assert_eq!(
        s.budgets,
        [
            budget("idle", secs(10), secs(7), false),
            budget("execution", secs(10), secs(7), true),
            budget("deadline", secs(100), secs(93), false),
            budget("liveness", secs(20), secs(17), false),
        ],
        "nothing runs down while paused"
    );
    t.resume().unwrap();
    guard.advance(secs(2));
    let s = t.status().unwrap();
    assert!(!s.paused);
    assert_eq!(
        s.budgets,
        [
            budget("idle", secs(10), secs(5), false),
            budget("execution", secs(10), secs(5), true),
            budget("deadline", secs(100), secs(91), false),
            budget("liveness", secs(20), secs(15), false),
        ]
    );
}

// R4.2: a configured execution budget is listed while idle too (inactive),
// and an extended deadline shows its new limit.
#[test]
fn status_lists_a_configured_execution_budget_while_idle() {
    let (guard, _, _) = setup();
    let t = guard
        .start(
            "ex",
            quiet()
                .idle(secs(10))
                .execution(secs(100))
                .deadline(secs(60)),
        )
        .unwrap();
    t.output(1, 0);
    guard.advance(secs(2));
    t.extend(secs(120)).unwrap(); // deadline now 122 s from the start
    let s = t.status().unwrap();
    assert_eq!(
        s.budgets,
        [
            budget("idle", secs(10), secs(8), true),
            budget("execution", secs(100), secs(98), false),
            budget("deadline", secs(122), secs(120), false),
        ]
    );
}

#[derive(Debug)]
struct OneChild;

impl ChildProbe for OneChild {
    fn children(&self) -> Option<Vec<ChildInfo>> {
        Some(vec![ChildInfo {
            pid: 31,
            name: "psql".into(),
            state: ProcState::Sleeping,
            wchan: Some("do_poll".into()),
            blocked_on: None,
            started_unix_ms: Some(1),
            cpu_ms: 5,
            cpu_delta_ms: Some(2),
        }])
    }
}

// R4.2, R5.5: children are shown for a running task and absent once it is
// cancelling; the stall event lists the suspects, and when none is one (a
// child that used CPU) every live process, never an empty list (R3.1,
// R8.13).
#[test]
fn status_children_only_while_running() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("ch", quiet().idle(secs(5)).grace_period(secs(30)))
        .unwrap();
    assert_eq!(t.status().unwrap().children, None, "unknown is absent");
    t.set_children_probe(Arc::new(OneChild));
    let kids = t.status().unwrap().children.unwrap();
    assert_eq!(kids.len(), 1);
    assert_eq!(kids[0].name, "psql");
    guard.advance(secs(5));
    let stalled = &rec.events_of(t.id())[1];
    assert!(
        matches!(&stalled.kind, EventKind::Stalled { children: Some(c), .. }
            if c.len() == 1 && c[0].name == "psql"),
        "{stalled:?}"
    );
    let s = t.status().unwrap();
    assert_eq!(s.state, TaskState::Cancelling);
    assert_eq!(s.children, None);
}

// R4.3: a background task past the cap (unnamed) keeps the owner monitoring.
#[test]
fn unnamed_background_alone_makes_the_owner_monitoring() {
    let (guard, _, _) = setup();
    let t = guard.start("o", quiet()).unwrap();
    t.set_background(Vec::new(), true);
    let s = t.status().unwrap();
    assert_eq!(s.state, TaskState::Monitoring);
    assert!(s.unnamed_background);
    t.set_background(Vec::new(), false);
    assert_eq!(t.status().unwrap().state, TaskState::Working);
}

// R3.1, R4.2: the last step is the newest call in flight, then the step a
// finished call or STATUS= left, then the newest signal kind, else absent.
#[test]
fn last_step_prefers_calls_in_flight_then_steps_then_signals() {
    let (guard, _, _) = setup();
    let t = guard.start("ls", quiet()).unwrap();
    assert_eq!(t.status().unwrap().last_step, None);
    t.output(1, 0);
    guard.advance(secs(1));
    t.heartbeat();
    assert_eq!(
        t.status().unwrap().last_step.as_deref(),
        Some("last signal: heartbeat")
    );
    guard.advance(secs(1));
    t.argument_delta();
    assert_eq!(
        t.status().unwrap().last_step.as_deref(),
        Some("last signal: argument-delta")
    );
    t.tool_started("a", "grep").unwrap();
    t.tool_started("b", "psql").unwrap();
    assert_eq!(
        t.status().unwrap().last_step.as_deref(),
        Some("tool \"psql\" still running")
    );
    t.tool_finished("b", CallOutcome::Error).unwrap();
    assert_eq!(
        t.status().unwrap().last_step.as_deref(),
        Some("tool \"grep\" still running")
    );
    t.tool_finished("a", CallOutcome::Cancelled).unwrap();
    assert_eq!(
        t.status().unwrap().last_step.as_deref(),
        Some("tool \"grep\" finished (cancelled)")
    );
    t.tool_started("c", "ls").unwrap();
    t.tool_finished("c", CallOutcome::Success).unwrap();
    assert_eq!(
        t.status().unwrap().last_step.as_deref(),
        Some("tool \"ls\" finished (success)")
    );
    t.tool_started("d", "rm").unwrap();
    t.tool_finished("d", CallOutcome::Error).unwrap();
    assert_eq!(
        t.status().unwrap().last_step.as_deref(),
        Some("tool \"rm\" finished (error)")
    );
    t.set_step("waiting for approval");
    assert_eq!(
        t.status().unwrap().last_step.as_deref(),
        Some("waiting for approval")
    );
}

// R4.1: an argument delta is recorded (and renews, R2.6); a refused tool
// start still counts as a tool-call signal.
#[test]
fn argument_delta_and_refused_tool_start_are_recorded() {
    let (guard, rec, _) = setup();
    let t = guard.start("ad", quiet().idle(secs(10))).unwrap();
    guard.advance(secs(9));
    t.argument_delta();
    assert_eq!(
        t.last_signal(SignalKind::ArgumentDelta).unwrap().age,
        Duration::ZERO
    );
    guard.advance(secs(9));
    assert_eq!(rec.types_for("ad"), ["started"], "the delta renewed");
    t.tool_started("c", "x").unwrap();
    guard.advance(secs(3));
    assert!(t.tool_started("c", "x").is_err());
    assert_eq!(
        t.last_signal(SignalKind::ToolCall).unwrap().age,
        Duration::ZERO
    );
    let s = t.status().unwrap();
    let kinds: Vec<_> = s.last_signal.keys().copied().collect();
    assert_eq!(kinds, ["argument-delta", "tool-call"]);
    assert_eq!(s.last_of(SignalKind::ToolCall).unwrap().age, Duration::ZERO);
    assert_eq!(s.last_of(SignalKind::Output), None);
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

// R9.1, R9.3: recording a signal takes no lock and wakes nothing: a task
// fed a steady stream of output keeps one timer entry, re-armed only when
// it comes due, however many signals arrive in between.
#[test]
fn recording_signals_adds_no_timer_entries() {
    let (guard, rec, _) = setup();
    let t = guard.start("hot", quiet().idle(secs(10))).unwrap();
    assert_eq!(guard.timer_entries(), 1);
    t.output(1, 0); // ends startup: one slow-path visit, same due instant
    assert_eq!(guard.timer_entries(), 1);
    // 15 s of signals every 100 ms: the timer due at 10 s fires once, finds
    // the renewal and re-arms; nothing else touches the heap.
    for _ in 0..150 {
        guard.advance(ms(100));
        t.output(1, 0);
        t.argument_delta();
    }
    assert_eq!(guard.timer_entries(), 1, "no timer entry per signal");
    assert_eq!(rec.types_for("hot"), ["started"]);
}

// R9.3: a task holds one timer entry whatever its due instant does: a
// move re-keys the entry in place (no stale entry is left behind to cost
// memory and a wake-up), and finishing removes it at once.
#[test]
fn a_task_holds_one_timer_entry_while_its_due_instant_moves() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("st", quiet().idle(secs(10)).execution(secs(100)))
        .unwrap();
    t.output(1, 0);
    assert_eq!(guard.timer_entries(), 1);
    t.tool_started("c", "sql").unwrap(); // due moves from 10 s to 100 s
    assert_eq!(guard.timer_entries(), 1, "the entry moved, none was added");
    guard.advance(secs(20));
    assert_eq!(guard.timer_entries(), 1);
    guard.advance(secs(80));
    assert_eq!(rec.timeline("st")[1], (secs(100), "stalled"));
    assert_eq!(guard.timer_entries(), 1, "re-armed after the strike");
    t.finish_completed();
    assert_eq!(guard.timer_entries(), 0, "a finished task leaves no entry");
    guard.advance(secs(200));
    assert_eq!(rec.timeline("st").len(), 4, "nothing after finished");
}

// R9.3: a recorder kept past its task's end writes into its own cell only:
// the slot is not reused while any recorder holds it, so a late signal
// cannot renew or show up in a task started later.
#[test]
fn a_late_recorder_never_touches_a_later_task() {
    let (guard, rec, _) = setup();
    let old = guard.start("old", quiet().idle(secs(10))).unwrap();
    let late = old.recorder();
    old.finish_completed();
    drop(old);
    let new = guard.start("new", quiet().idle(secs(10))).unwrap();
    guard.advance(secs(5));
    late.output(100, 3);
    late.argument_delta();
    let status = new.status().unwrap();
    assert_eq!((status.total_bytes, status.total_lines), (0, 0));
    assert!(status.last_signal.is_empty(), "{:?}", status.last_signal);
    assert!(late.status().is_none(), "the old task is gone");
    guard.advance(secs(5));
    assert_eq!(rec.timeline("new")[1], (secs(10), "stalled"));

    // Once the last recorder is gone the slot serves new tasks, cleanly.
    drop(late);
    for i in 0..3 {
        let t = guard.start(format!("reuse-{i}"), quiet()).unwrap();
        let status = t.status().unwrap();
        assert_eq!((status.total_bytes, status.strikes), (0, 0));
        assert!(status.last_signal.is_empty());
    }
}

// The handle's guard is the guard that started it.
#[test]
fn handle_guard_is_the_guard_that_started_it() {
    let (guard, _, _) = setup();
    let t = guard.start("mine", quiet()).unwrap();
    let via_handle = t.guard();
    assert_eq!(via_handle.status("mine").unwrap().id, t.id());
    via_handle.advance(secs(1));
    assert_eq!(guard.status("mine").unwrap().elapsed, secs(1));
}

// R4.2: statuses of every live task come in start order; the guard's clock
// reading and its timer count are what the test drove.
#[test]
fn statuses_come_in_start_order() {
    let (guard, _, clock) = setup();
    let names = ["e", "a", "d", "b", "c"];
    let tasks: Vec<_> = names
        .iter()
        .map(|n| guard.start(*n, quiet()).unwrap())
        .collect();
    let got: Vec<_> = guard.statuses().into_iter().map(|s| s.name).collect();
    assert_eq!(got, names);
    assert_eq!(guard.timer_entries(), 5);
    guard.advance(secs(3));
    assert_eq!(guard.now(), clock.now());
    assert_eq!(guard.now(), watchdog_core::Nanos::from_nanos(1) + secs(3));
    drop(tasks);
    assert!(guard.statuses().is_empty());
}

// R9.3: a guard on a moved virtual clock takes its verdicts at `tick`, each
// at its own due instant.
#[test]
fn tick_takes_verdicts_after_the_clock_was_moved_elsewhere() {
    let (guard, rec, clock) = setup();
    let _t = guard
        .start("tk", quiet().idle(secs(4)).terminate_after(0))
        .unwrap();
    clock.advance(secs(9));
    assert_eq!(rec.types_for("tk"), ["started"]);
    guard.tick();
    assert_eq!(
        rec.timeline("tk"),
        [
            (secs(0), "started"),
            (secs(4), "stalled"),
            (secs(8), "stalled")
        ]
    );
}

// `Guard::advance` is only for virtual clocks: real time cannot be moved.
#[test]
#[should_panic(expected = "ManualClock")]
fn advance_on_a_real_clock_panics() {
    Guard::builder().build().advance(secs(1));
}

// The hand-written Debug output shows state, not pointers (STYLE.md).
#[test]
fn debug_output_shows_state() {
    let (guard, _, _) = setup();
    let t = guard.start("dbg", quiet()).unwrap();
    let g = format!("{guard:?}");
    assert!(g.contains("tasks: 1") && g.contains("virtual: true"), "{g}");
    assert!(format!("{t:?}").contains("finished: false"));
    assert!(format!("{:?}", t.recorder()).contains("Recorder"));
    assert!(format!("{:?}", Guard::default()).contains("virtual: false"));
    let b = format!("{:?}", Guard::builder().sink(RecordingSink::new()));
    assert!(b.contains("sinks: 1"), "{b}");
    let c = format!("{:?}", t.output_counter());
    assert!(c.contains("OutputCounter"), "{c}");
}

// Bad input on a finished task is an error naming it, never a panic.
#[test]
fn operations_on_a_settled_task_are_refused() {
    let (guard, _, _) = setup();
    let t = guard.start("done", quiet()).unwrap();
    let r = t.recorder();
    t.finish_completed();
    // R3.8: the error names the task by name and id, whichever path
    // refused (the task is gone from the registry here).
    let gone = GuardError::Finished {
        task: "done".into(),
        id: t.id(),
    };
    assert_eq!(r.tool_started("c", "x"), Err(gone.clone()));
    assert_eq!(
        r.tool_finished("c", CallOutcome::Success),
        Err(gone.clone())
    );
    assert_eq!(r.trigger("x"), Err(gone.clone()));
    assert_eq!(r.cancel("x"), Err(gone.clone()));
    assert!(r.status().is_none());
    assert!(r.last_call().is_none());
    assert_eq!(
        guard.cancel("done", "x"),
        Err(GuardError::UnknownTask("done".into()))
    );
    // Recording into a settled task's cell is harmless.
    r.output(1, 1);
    r.ready();
    r.set_step("late");
    r.set_pid(1);
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

// R3.1, R3.10: the wall time of an event is the clock's wall time at the
// event's monotonic instant.
#[test]
fn event_wall_time_is_taken_with_its_monotonic_instant() {
    let (guard, rec, clock) = setup();
    let _t = guard.start("w", quiet().idle(ms(1500))).unwrap();
    guard.advance(secs(2));
    let e = &rec.events()[1];
    assert_eq!(e.elapsed, ms(1500));
    assert_eq!(e.wall, clock.wall_at(e.at));
    assert_eq!(
        e.at,
        watchdog_core::Nanos::from_nanos(1) + ms(1500),
        "due instant, not the advance's end"
    );
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

/// Every `ERROR` the engine logs on this thread while `f` runs.
fn errors_logged_during(f: impl FnOnce()) -> Vec<String> {
    use std::fmt::Write as _;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    struct Text(String);
    impl Visit for Text {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let _ = write!(self.0, "{}={value:?} ", field.name());
        }
    }
    struct Errors(Arc<parking_lot::Mutex<Vec<String>>>);
    impl Subscriber for Errors {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            if *event.metadata().level() == Level::ERROR {
                let mut text = Text(String::new());
                event.record(&mut text);
                self.0.lock().push(text.0);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
    let errors = Arc::new(parking_lot::Mutex::new(Vec::new()));
    tracing::subscriber::with_default(Errors(errors.clone()), f);
    let logged = errors.lock().clone();
    logged
}

// R10.5: the driver's half of the record/stall handshake is the expedited
// membarrier, and once the process is registered it never fails: a stall
// verdict (which raises STALLED and so pays the heavy barrier) logs no
// error. With the wrong command (mutant `<< with >>` on
// `MEMBARRIER_CMD_PRIVATE_EXPEDITED`, which asks the kernel a query
// instead) the call "fails" on every pass, and the driver falls back to a
// plain fence and says so with this error.
#[test]
fn a_stall_pays_the_expedited_barrier_without_error() {
    let (guard, rec, _) = setup();
    let _t = guard
        .start("mb", quiet().idle(secs(10)).terminate_after(0))
        .unwrap();
    let errors = errors_logged_during(|| guard.advance(secs(11)));
    assert_eq!(rec.types_for("mb"), ["started", "stalled"]);
    assert!(errors.is_empty(), "{errors:?}");
}

// R8.6: what is left of the command's tree is named in a `leftover` event,
// with what was done to it, before the task's `finished`. (Mutant:
// `TaskHandle::leftover -> Ok(())`, named in issue 26, which dropped it.)
#[test]
fn leftover_processes_are_named_with_the_action_before_finished() {
    let (guard, rec, _) = setup();
    let t = guard.start("lo", quiet()).unwrap();
    let daemon = ProcessName {
        pid: 7,
        name: "sleep".into(),
    };
    t.leftover(LeftoverAction::Kept, vec![daemon.clone()])
        .unwrap();
    t.finish_completed();
    assert_eq!(rec.types_for("lo"), ["started", "leftover", "finished"]);
    let kinds: Vec<_> = rec.events().into_iter().map(|e| e.kind).collect();
    assert!(
        kinds.contains(&EventKind::Leftover {
            action: LeftoverAction::Kept,
            processes: vec![daemon]
        }),
        "{kinds:?}"
    );
}

// R8.7: what a source refuses is counted in the task's status, by key.
// (Mutant: `Recorder::refused -> ()`, named in issue 26, which counted
// nothing.)
#[test]
fn refused_inputs_are_counted_by_key() {
    let (guard, _, _) = setup();
    let t = guard.start("rf", quiet()).unwrap();
    assert!(t.status().unwrap().refused.is_empty());
    let r = t.recorder();
    r.refused("args.empty_delta");
    r.refused("tools.unknown_call");
    r.refused("args.empty_delta");
    let refused = t.status().unwrap().refused;
    assert_eq!(
        refused.into_iter().collect::<Vec<_>>(),
        [("args.empty_delta", 2), ("tools.unknown_call", 1)]
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

// R10.2: a recording sink with no clock of its own stamps an action with the
// instant of its own task's event, even when another task's event arrived
// between the two (an isolated, reordering or replaying sink delivers so).
#[test]
fn a_recorded_action_takes_the_time_of_its_own_tasks_event() {
    use watchdog_core::{Delivered, Sink};
    let (guard, rec, _) = setup();
    let _a = guard.start("a", quiet().idle(secs(5))).unwrap();
    let _b = guard.start("b", quiet().idle(secs(7))).unwrap();
    guard.advance(secs(7));
    let find = |name: &str, action: bool| {
        rec.delivered()
            .into_iter()
            .find(|d| match d {
                Delivered::Event(e) => {
                    !action && &*e.name == name && e.kind.type_name() == "cancelling"
                }
                Delivered::Action(a) => action && &*a.name == name,
            })
            .unwrap_or_else(|| panic!("no {name} cancel"))
    };
    let replay = RecordingSink::new();
    for d in [find("a", false), find("b", false), find("a", true)] {
        match &d {
            Delivered::Event(e) => replay.on_event(e).unwrap(),
            Delivered::Action(a) => replay.on_action(a).unwrap(),
        }
    }
    let at: Vec<_> = replay.timed().into_iter().map(|(at, _)| at).collect();
    assert_eq!(at[1].saturating_since(at[0]), secs(2));
    assert_eq!(at[2], at[0]);
}
