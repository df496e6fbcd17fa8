//! Escalation and settling (R3.5, R3.6, R3.8, R8.6): cancel by name with its
//! reason and pid, long_running while cancelling, how a task finishes, what
//! is left of its tree before `finished`, and what a settled task refuses.
//! Virtual time (`ManualClock` + `Guard::advance`), never a real sleep.

use watchdog_core::{
    ActionKind, CallOutcome, EventKind, GuardError, LeftoverAction, Outcome, ProcessName,
};

mod common;
use common::{quiet, reason_of, secs, setup};

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
