//! Status snapshots (R4.1–R4.3, with R3.1, R5.5 and R8.7): the budgets a
//! status lists and their time left, children, background tasks, the last
//! step, last signals, refused inputs, and the order of every live task's
//! status. Virtual time (`ManualClock` + `Guard::advance`), never a real
//! sleep.

use std::sync::Arc;
use std::time::Duration;

use watchdog_core::{
    CallOutcome, ChildInfo, ChildProbe, Clock, EventKind, Phase, ProcState, SignalKind, TaskState,
};

mod common;
use common::{budget, quiet, secs, setup};

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
