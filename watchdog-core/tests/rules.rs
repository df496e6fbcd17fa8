//! One test (or a few) per rule of SPEC §2–§4, in virtual time: a
//! `ManualClock` and `Guard::advance`, never a real sleep.

use std::sync::Arc;
use std::time::Duration;

use watchdog_core::{
    BackgroundKind, BackgroundTask, Budget, CallOutcome, ChildInfo, ChildProbe, Clock, EventKind,
    GuardError, KindSet, Outcome, Phase, ProcState, Profile, SignalKind, TaskState,
};

mod common;
use common::{ms, quiet, secs, setup};

// R2.1: every renewing signal renews; silence for a whole budget stalls,
// exactly at the budget in virtual time (R9.3).
#[test]
fn idle_budget_renewed_by_output_and_stalls_exactly_at_the_budget() {
    let (guard, rec, _) = setup();
    let _t = {
        let t = guard.start("a", quiet().idle(secs(10))).unwrap();
        for _ in 0..5 {
            guard.advance(secs(9));
            t.output(1, 0);
        }
        assert_eq!(rec.types_for("a"), ["started"]);
        guard.advance(secs(10));
        t
    };
    assert_eq!(rec.types_for("a"), ["started", "stalled", "cancelling"]);
    assert_eq!(rec.offsets("a", "stalled"), [secs(55)]);
}

// R2.1, R2.6: kinds outside renewed-by do not renew; heartbeat and cpu are
// opt-in.
#[test]
fn heartbeat_and_cpu_renew_only_when_opted_in() {
    let (guard, rec, _) = setup();
    let plain = guard.start("plain", quiet().idle(secs(5))).unwrap();
    let opted = guard
        .start(
            "opted",
            quiet().idle(secs(5)).renewed_by(
                KindSet::DEFAULT_RENEWING
                    .with(SignalKind::Heartbeat)
                    .with(SignalKind::Cpu),
            ),
        )
        .unwrap();
    for _ in 0..4 {
        guard.advance(secs(2));
        plain.heartbeat();
        plain.signal(SignalKind::Cpu);
        opted.heartbeat();
        guard.advance(secs(2));
        opted.signal(SignalKind::Cpu);
    }
    assert_eq!(rec.offsets("plain", "stalled"), [secs(5)]);
    assert!(rec.offsets("opted", "stalled").is_empty());
}

// R2.6: a progress value renews only when it rises.
#[test]
fn progress_renews_only_when_it_rises() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("p", quiet().idle(secs(5)).terminate_after(0))
        .unwrap();
    guard.advance(secs(4));
    assert!(t.progress(1.0));
    guard.advance(secs(4));
    assert!(!t.progress(1.0), "an equal value is not progress");
    assert!(!t.progress(0.5), "a lower value is not progress");
    assert!(!t.progress(f64::NAN));
    assert!(!t.progress(-3.0));
    guard.advance(secs(1));
    assert_eq!(rec.offsets("p", "stalled"), [secs(9)]);
}

// R2.2: a silent tool call runs on the execution budget; the effective
// budget is max(execution, idle); idle applies again when the last call ends.
#[test]
fn execution_budget_holds_a_silent_sql_probe_until_the_last_call_finishes() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("turn", quiet().idle(secs(30)).execution(secs(300)))
        .unwrap();
    t.tool_started("c1", "sql_probe").unwrap();
    t.tool_started("c2", "grep").unwrap();
    guard.advance(secs(165));
    t.tool_finished("c1", CallOutcome::Success).unwrap();
    guard.advance(secs(200)); // c2 still in flight: 200 s < 300 s
    assert_eq!(rec.types_for("turn"), ["started"]);
    assert_eq!(t.status().unwrap().phase, Phase::Executing { tools: 1 });
    t.tool_finished("c2", CallOutcome::Error).unwrap();
    guard.advance(secs(30));
    let stalled = rec
        .events()
        .into_iter()
        .find(|e| e.kind.type_name() == "stalled")
        .unwrap();
    assert!(matches!(
        stalled.kind,
        EventKind::Stalled {
            budget: Budget::Idle,
            ..
        }
    ));
    assert_eq!(stalled.elapsed, secs(395));
}

#[test]
fn execution_budget_below_idle_uses_idle() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("x", quiet().idle(secs(60)).execution(secs(10)))
        .unwrap();
    t.tool_started("c", "bash").unwrap();
    guard.advance(secs(59));
    assert_eq!(rec.types_for("x"), ["started"]);
    guard.advance(secs(1));
    let e = &rec.events_of(t.id())[1];
    assert!(
        matches!(
            e.kind,
            EventKind::Stalled {
                budget: Budget::Execution,
                ..
            }
        ),
        "{e:?}"
    );
}

// R2.3: the startup budget applies before the first progress signal; it
// defaults to idle; READY=1 ends it.
#[test]
fn startup_budget_applies_until_first_progress() {
    let (guard, rec, _) = setup();
    let slow = guard
        .start(
            "slow",
            quiet().idle(secs(5)).startup(secs(60)).terminate_after(0),
        )
        .unwrap();
    let default = guard.start("default", quiet().idle(secs(5))).unwrap();
    guard.advance(secs(5));
    assert_eq!(
        rec.types_for("default"),
        ["started", "stalled", "cancelling"]
    );
    let e = &rec.events_of(default.id())[1];
    assert!(matches!(
        e.kind,
        EventKind::Stalled {
            budget: Budget::Startup,
            ..
        }
    ));
    guard.advance(secs(54));
    assert_eq!(rec.types_for("slow"), ["started"]);
    slow.output(1, 1); // first progress at 59 s: idle from here
    guard.advance(secs(5));
    let e = &rec.events_of(slow.id())[1];
    assert!(
        matches!(
            e.kind,
            EventKind::Stalled {
                budget: Budget::Idle,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.elapsed, secs(64));
}

#[test]
fn ready_ends_startup() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("svc", quiet().idle(secs(5)).startup(secs(60)))
        .unwrap();
    guard.advance(secs(10));
    t.ready();
    guard.advance(secs(5));
    let e = &rec.events_of(t.id())[1];
    assert!(matches!(
        e.kind,
        EventKind::Stalled {
            budget: Budget::Idle,
            ..
        }
    ));
    assert_eq!(e.elapsed, secs(15));
}

// R2.4: the deadline is off by default, never renewed when set, and cancels
// at once (R3.4).
#[test]
fn deadline_is_a_total_limit_that_output_does_not_renew() {
    let (guard, rec, _) = setup();
    let free = guard.start("free", quiet().idle(secs(10))).unwrap();
    let capped = guard
        .start("capped", quiet().idle(secs(10)).deadline(secs(60)))
        .unwrap();
    for _ in 0..20 {
        guard.advance(secs(5));
        free.output(1, 1);
        capped.output(1, 1);
    }
    assert_eq!(rec.types_for("free"), ["started"]);
    assert_eq!(
        rec.types_for("capped"),
        ["started", "deadline_exceeded", "cancelling", "killed"]
    );
    assert_eq!(rec.offsets("capped", "deadline_exceeded"), [secs(60)]);
}

// R2.5: liveness is armed by the first heartbeat; losing it is its own
// verdict and cancels at once (R3.4).
#[test]
fn liveness_armed_by_first_heartbeat_and_lost_after_a_gap() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("w", quiet().idle(secs(600)).liveness(secs(10)))
        .unwrap();
    guard.advance(secs(100)); // never armed: nothing
    assert_eq!(rec.types_for("w"), ["started"]);
    t.heartbeat();
    for _ in 0..3 {
        guard.advance(secs(9));
        t.heartbeat();
    }
    guard.advance(secs(10));
    assert_eq!(
        rec.types_for("w"),
        ["started", "liveness_lost", "cancelling"]
    );
    assert_eq!(rec.offsets("w", "liveness_lost"), [secs(137)]);
}

// R3.4: notify only.
#[test]
fn notify_only_reports_deadline_and_liveness_without_cancelling() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "n",
            quiet()
                .idle(secs(600))
                .deadline(secs(30))
                .liveness(secs(10))
                .notify_only(true),
        )
        .unwrap();
    t.heartbeat();
    guard.advance(secs(40));
    assert_eq!(
        rec.types_for("n"),
        ["started", "liveness_lost", "deadline_exceeded"]
    );
    t.heartbeat(); // re-arms liveness
    guard.advance(secs(10));
    assert_eq!(
        rec.types_for("n"),
        [
            "started",
            "liveness_lost",
            "deadline_exceeded",
            "liveness_lost"
        ]
    );
}

// R2.7: silence is monotonic; a wall-clock jump only moves the labels.
#[test]
fn wall_clock_jump_changes_no_verdict() {
    let (guard, rec, clock) = setup();
    let _t = guard.start("j", quiet().idle(secs(10))).unwrap();
    guard.advance(secs(5));
    clock.jump_wall(-86_400);
    guard.advance(secs(4));
    assert_eq!(rec.types_for("j"), ["started"]);
    clock.jump_wall(3 * 86_400);
    guard.advance(secs(1));
    let events = rec.events();
    assert_eq!(events[1].elapsed, secs(10));
    let label_gap = events[1].wall.duration_since(events[0].wall).unwrap();
    assert_eq!(
        label_gap,
        secs(2 * 86_400 + 10),
        "labels follow the wall clock"
    );
}

// R2.8: while paused nothing runs down, the deadline included; on resume
// each budget continues with what it had used.
#[test]
fn pause_stops_every_budget_and_resume_keeps_what_was_used() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "h",
            quiet().idle(secs(10)).deadline(secs(30)).terminate_after(0),
        )
        .unwrap();
    guard.advance(secs(6));
    t.pause().unwrap();
    t.pause().unwrap(); // pausing twice is a no-op
    guard.advance(secs(3600));
    assert_eq!(rec.types_for("h"), ["started"]);
    assert!(t.status().unwrap().paused);
    t.resume().unwrap();
    guard.advance(secs(3));
    assert_eq!(rec.types_for("h"), ["started"]);
    guard.advance(secs(1)); // 6 + 4 = 10 s of active silence
    assert_eq!(rec.types_for("h"), ["started", "stalled"]);
    assert_eq!(rec.offsets("h", "stalled"), [secs(3610)]);
    guard.advance(secs(20)); // deadline: 30 s of active time
    assert_eq!(rec.offsets("h", "deadline_exceeded"), [secs(3630)]);
}

// R2.9: extend within max-deadline; past it, refused with a reason.
#[test]
fn extend_moves_the_deadline_within_its_bound() {
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
    assert_eq!(t.extend(secs(40)).unwrap(), secs(90));
    let err = t.extend(secs(51)).unwrap_err();
    assert!(matches!(err, GuardError::ExtensionRefused { .. }));
    assert!(
        err.to_string().contains("past max-deadline 1m 40s"),
        "{err}"
    );
    // R8.7: the refusal is also an event, with what was asked and allowed.
    let refused: Vec<_> = rec
        .events()
        .into_iter()
        .filter(|e| e.kind.type_name() == "extension_refused")
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(
        refused[0].kind,
        EventKind::ExtensionRefused {
            requested: secs(101),
            allowed: secs(100)
        }
    );
    guard.advance(secs(39));
    assert_eq!(rec.types_for("e"), ["started", "extension_refused"]);
    guard.advance(secs(1));
    assert_eq!(rec.offsets("e", "deadline_exceeded"), [secs(90)]);

    let none = guard.start("no-deadline", quiet()).unwrap();
    assert_eq!(
        none.extend(secs(1)).unwrap_err(),
        GuardError::NoDeadline("no-deadline".into())
    );
}

// R2.10: a task's own fault is a cancel with its reason.
#[test]
fn trigger_cancels_with_the_reason() {
    let (guard, rec, _) = setup();
    let t = guard.start("t", quiet().grace_period(secs(5))).unwrap();
    t.trigger("disk full").unwrap();
    assert_eq!(rec.types_for("t"), ["started", "triggered", "cancelling"]);
    let e = &rec.events_of(t.id())[2];
    assert!(
        matches!(&e.kind, EventKind::Cancelling { reason, signal: "SIGTERM" } if reason.contains("disk full"))
    );
    assert!(matches!(
        rec.actions()[0].kind,
        watchdog_core::ActionKind::Cancel { .. }
    ));
    assert!(
        t.trigger("again").is_err(),
        "a cancelling task cannot trigger twice"
    );
}

#[derive(Debug)]
struct FakeChildren;

impl ChildProbe for FakeChildren {
    fn children(&self) -> Option<Vec<ChildInfo>> {
        let child = |pid, name: &str, state, delta| ChildInfo {
            pid,
            name: name.into(),
            state,
            wchan: None,
            blocked_on: None,
            started_unix_ms: None,
            cpu_ms: 10,
            cpu_delta_ms: delta,
        };
        Some(vec![
            child(10, "bash", ProcState::Sleeping, Some(5)),
            child(11, "grep", ProcState::DiskWait, Some(3)),
            child(12, "psql", ProcState::Sleeping, Some(0)),
        ])
    }
}

// R3.1: the stall event says which budget, strike, terminate-after, the
// silence, the last step and the suspect children.
#[test]
fn stalled_event_names_budget_strike_silence_step_and_suspects() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("s", quiet().idle(secs(5)).terminate_after(2))
        .unwrap();
    t.set_children_probe(Arc::new(FakeChildren));
    t.tool_started("c1", "bash").unwrap();
    guard.advance(secs(5));
    let e = &rec.events_of(t.id())[1];
    let EventKind::Stalled {
        budget,
        strike,
        terminate_after,
        silent,
        last_step,
        children,
        stacks,
        on_stall,
        ..
    } = &e.kind
    else {
        panic!("expected stalled, got {e:?}");
    };
    // R8.14: nothing is taken at a stall unless an at-stall step is set.
    assert!(stacks.is_empty() && on_stall.is_none());
    assert_eq!(*budget, Budget::Execution);
    assert_eq!((*strike, *terminate_after), (1, 2));
    assert_eq!(*silent, secs(5));
    assert_eq!(last_step.as_deref(), Some("tool \"bash\" still running"));
    let names: Vec<_> = children
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["grep", "psql"]);
}

/// A probe whose fresh look calls back into the guard: it reads the
/// task's status and records output, as a probe that samples a tree and
/// finds it busy might.
#[derive(Debug, Default)]
struct CallsBack {
    recorder: std::sync::OnceLock<watchdog_core::Recorder>,
    seen: std::sync::Mutex<Vec<TaskState>>,
}

impl ChildProbe for CallsBack {
    fn children(&self) -> Option<Vec<ChildInfo>> {
        Some(Vec::new())
    }

    fn verdict_children(&self) -> Option<Vec<ChildInfo>> {
        let r = self.recorder.get()?;
        let state = r.status()?.state;
        self.seen.lock().unwrap().push(state);
        r.output(3, 1);
        Some(Vec::new())
    }
}

// R8.13, R3.1: the fresh look a stall names is taken outside the guard's
// scheduler lock, after the verdict and before any sink sees the event: a
// probe may ask for the task's status (already stalled) and record into
// it without deadlock, and that output is a recovery delivered after the
// stall it answers.
#[test]
fn a_stall_probe_may_call_back_into_the_guard() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("cb", quiet().idle(secs(5)).terminate_after(0))
        .unwrap();
    let probe = Arc::new(CallsBack::default());
    probe.recorder.set(t.recorder()).unwrap();
    t.set_children_probe(probe.clone());
    guard.advance(secs(5));
    assert_eq!(*probe.seen.lock().unwrap(), [TaskState::Stalled]);
    assert_eq!(rec.types_for("cb"), ["started", "stalled", "recovered"]);
    let events = rec.events_of(t.id());
    assert!(
        matches!(&events[1].kind, EventKind::Stalled { children: Some(c), .. } if c.is_empty()),
        "{:?}",
        events[1]
    );
    assert!(
        matches!(events[2].kind, EventKind::Recovered { silent } if silent == secs(5)),
        "{:?}",
        events[2]
    );
    assert_eq!(t.status().unwrap().total_bytes, 3);
    t.finish_completed();
    rec.assert_settled("cb");
}

#[derive(Debug)]
struct PanicsOnLook;

impl ChildProbe for PanicsOnLook {
    fn children(&self) -> Option<Vec<ChildInfo>> {
        Some(Vec::new())
    }

    fn verdict_children(&self) -> Option<Vec<ChildInfo>> {
        panic!("the probe broke");
    }
}

// R3.1, R6.2: a probe that panics at the stall's fresh look costs the
// stall its children, not the event, nor anything after it.
#[test]
fn a_panicking_stall_probe_loses_the_children_not_the_stall() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("pp", quiet().idle(secs(5)).terminate_after(2))
        .unwrap();
    t.set_children_probe(Arc::new(PanicsOnLook));
    guard.advance(secs(5));
    guard.advance(secs(5));
    assert_eq!(
        rec.timeline("pp"),
        [
            (secs(0), "started"),
            (secs(5), "stalled"),
            (secs(10), "stalled"),
            (secs(10), "cancelling")
        ]
    );
    let events = rec.events_of(t.id());
    assert!(
        matches!(&events[1].kind, EventKind::Stalled { children: None, .. }),
        "{:?}",
        events[1]
    );
    assert_eq!(rec.actions().len(), 1, "the cancel action is delivered");
}

// R3.2: strikes re-arm from the verdict; cancel at terminate-after; 0 never
// cancels.
#[test]
fn strikes_rearm_from_the_verdict_and_cancel_at_terminate_after() {
    let (guard, rec, _) = setup();
    let _three = guard
        .start("three", quiet().idle(secs(10)).terminate_after(3))
        .unwrap();
    let _never = guard
        .start("never", quiet().idle(secs(10)).terminate_after(0))
        .unwrap();
    guard.advance(secs(100)); // several timers passed over by one advance
    assert_eq!(
        rec.types_for("three"),
        [
            "started",
            "stalled",
            "stalled",
            "stalled",
            "cancelling",
            "killed"
        ]
    );
    assert_eq!(
        rec.offsets("three", "stalled"),
        [secs(10), secs(20), secs(30)]
    );
    assert_eq!(rec.offsets("never", "stalled").len(), 10);
    assert!(!rec.types_for("never").contains(&"cancelling"));
    let strikes: Vec<u32> = rec
        .events()
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Stalled { strike, .. } if &*e.name == "three" => Some(strike),
            _ => None,
        })
        .collect();
    assert_eq!(strikes, [1, 2, 3]);
}

// R3.3: progress after a stall recovers and resets the strikes.
#[test]
fn progress_after_a_stall_recovers_and_resets_strikes() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("r", quiet().idle(secs(10)).terminate_after(2))
        .unwrap();
    guard.advance(secs(13));
    assert_eq!(t.status().unwrap().state, TaskState::Stalled);
    t.output(4, 0);
    assert_eq!(t.status().unwrap().strikes, 0);
    guard.advance(secs(10));
    guard.advance(secs(9));
    t.output(4, 0);
    assert_eq!(
        rec.types_for("r"),
        ["started", "stalled", "recovered", "stalled", "recovered"],
        "two strikes never accumulate across a recovery"
    );
    let silent: Vec<_> = rec
        .events()
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Recovered { silent } => Some(silent),
            _ => None,
        })
        .collect();
    assert_eq!(silent, [secs(13), secs(19)]);
    assert_eq!(t.status().unwrap().stall_count, 2);
}

// R3.5: cancel, then kill after the grace period; grace 0 kills at once;
// finishing within the grace period prevents the kill; after a cancel no
// signal renews anything.
#[test]
fn cancel_then_kill_after_grace_period() {
    let (guard, rec, _) = setup();
    let slow = guard
        .start_process("slow", quiet().idle(secs(5)).grace_period(secs(3)), 4242)
        .unwrap();
    let quick = guard
        .start("quick", quiet().idle(secs(5)).grace_period(secs(3)))
        .unwrap();
    let at_once = guard
        .start(
            "at-once",
            quiet().idle(secs(5)).grace_period(Duration::ZERO),
        )
        .unwrap();
    guard.advance(secs(5));
    slow.output(1, 1); // ignored: cancelling
    quick.finish(Outcome::Failed, Some(143), None).unwrap();
    guard.advance(secs(3));
    assert_eq!(
        rec.types_for("slow"),
        ["started", "stalled", "cancelling", "killed"]
    );
    assert_eq!(rec.offsets("slow", "killed"), [secs(8)]);
    assert_eq!(
        rec.types_for("quick"),
        ["started", "stalled", "cancelling", "finished"]
    );
    assert_eq!(rec.offsets("at-once", "killed"), [secs(5)]);
    let actions: Vec<_> = rec
        .actions()
        .into_iter()
        .filter(|a| &*a.name == "slow")
        .collect();
    assert_eq!(actions.len(), 2);
    assert_eq!(actions[0].pid, Some(4242));
    assert!(matches!(actions[1].kind, watchdog_core::ActionKind::Kill));
    slow.finish(Outcome::Completed, None, Some(9)).unwrap();
    let last = rec.events_of(slow.id()).pop().unwrap();
    assert!(matches!(
        last.kind,
        EventKind::Finished {
            outcome: Outcome::Cancelled,
            exit_code: None,
            signal: Some(9)
        }
    ));
    drop(at_once);
}

// R3.6: one long_running event, never twice, not at all if finished first.
#[test]
fn long_running_once_and_not_after_finish() {
    let (guard, rec, _) = setup();
    let long = guard
        .start("long", quiet().idle(secs(600)).long_running_after(secs(3)))
        .unwrap();
    let short = guard
        .start("short", quiet().idle(secs(600)).long_running_after(secs(3)))
        .unwrap();
    guard.advance(ms(2900));
    short.finish_completed();
    guard.advance(secs(60));
    assert_eq!(rec.types_for("long"), ["started", "long_running"]);
    assert_eq!(rec.offsets("long", "long_running"), [secs(3)]);
    assert_eq!(rec.types_for("short"), ["started", "finished"]);
    drop(long);
}

// R3.7: heartbeats only after a whole silent interval; flowing output never
// heartbeats; fields as §8.3.
#[test]
fn heartbeats_only_for_silent_intervals() {
    let (guard, rec, _) = setup();
    let p = Profile::default()
        .idle(secs(600))
        .heartbeat_interval(Some(secs(10)));
    let silent = guard
        .start("silent", p.clone().deadline(secs(3600)))
        .unwrap();
    let chatty = guard.start("chatty", p).unwrap();
    silent.output(100, 2);
    for _ in 0..35 {
        guard.advance(secs(1));
        chatty.output(1, 0);
    }
    // Silent for the whole of (0 s, 10 s]: the output at 0 s is the
    // interval's open end, so the first heartbeat comes at 10 s.
    assert_eq!(
        rec.offsets("silent", "heartbeat"),
        [secs(10), secs(20), secs(30)]
    );
    assert!(rec.offsets("chatty", "heartbeat").is_empty());
    let hb = rec
        .events()
        .into_iter()
        .find(|e| e.kind.type_name() == "heartbeat")
        .unwrap();
    let json = serde_json::to_value(&hb).unwrap();
    assert_eq!(json["last_output_age_ms"], 10_000);
    assert_eq!(json["total_lines"], 2);
    assert_eq!(json["total_bytes"], 100);
    assert_eq!(json["idle_remaining_ms"], 590_000);
    assert_eq!(json["deadline_ms"], 3_600_000);
}

#[test]
fn heartbeat_before_any_output_omits_output_age() {
    let (guard, rec, _) = setup();
    let _t = guard
        .start("q", Profile::default().idle(secs(600)))
        .unwrap();
    guard.advance(secs(10));
    let json = serde_json::to_value(&rec.events()[1]).unwrap();
    assert_eq!(json["type"], "heartbeat");
    assert!(json.get("last_output_age_ms").is_none(), "{json}");
    assert!(json.get("deadline_ms").is_none(), "{json}");
}

// R3.8: finished is last, exactly once; no heartbeat between cancel and
// finish; nothing after finish.
#[test]
fn settled_gate_and_no_heartbeat_while_cancelling() {
    let (guard, rec, _) = setup();
    let t = guard
        .start(
            "g",
            Profile::default()
                .idle(secs(15))
                .heartbeat_interval(Some(secs(10)))
                .grace_period(secs(60)),
        )
        .unwrap();
    guard.advance(secs(50));
    assert_eq!(
        rec.types_for("g"),
        ["started", "heartbeat", "stalled", "cancelling"]
    );
    t.finish_completed();
    assert!(t.finish(Outcome::Completed, None, None).is_err());
    guard.advance(secs(120));
    t.output(1, 1);
    assert!(t.trigger("late").is_err());
    rec.assert_settled("g");
    assert!(!guard.is_busy());
}

// R3.9: dropping the handle finishes the task as abandoned.
#[test]
fn dropping_the_handle_abandons_the_task() {
    let (guard, rec, _) = setup();
    let t = guard.start("d", quiet()).unwrap();
    let recorder = t.recorder();
    drop(t);
    let last = rec.events().pop().unwrap();
    assert!(matches!(
        last.kind,
        EventKind::Finished {
            outcome: Outcome::Abandoned,
            ..
        }
    ));
    recorder.output(1, 1); // a recorder outliving its task is harmless
    assert!(recorder.pause().is_err());
    rec.assert_settled("d");
}

// R3.10: progress recorded before the verdict counts, even though the timer
// was armed before it.
#[test]
fn verdict_reads_progress_recorded_after_the_timer_was_armed() {
    let (guard, rec, _) = setup();
    let t = guard.start("v", quiet().idle(secs(10))).unwrap();
    guard.advance(secs(9));
    t.output(1, 0); // the timer armed for 10 s is now stale
    guard.advance(secs(1));
    assert_eq!(rec.types_for("v"), ["started"]);
    guard.advance(secs(9));
    assert_eq!(rec.offsets("v", "stalled"), [secs(19)]);
    assert!(guard.timer_entries() <= 3, "no timer entry per signal");
}

// R4.1: last call and last signals are absent until observed.
#[test]
fn last_call_and_last_signal_are_absent_until_observed() {
    let (guard, _, clock) = setup();
    let t = guard.start("l", quiet()).unwrap();
    assert!(t.last_call().is_none());
    assert!(t.last_signal(SignalKind::Output).is_none());
    let json = serde_json::to_value(t.status().unwrap()).unwrap();
    assert!(json.get("last_call").is_none());
    assert!(json.get("last_output_age_ms").is_none());
    assert_eq!(json["last_signal"], serde_json::json!({}));

    t.tool_started("c7", "sql").unwrap();
    guard.advance(secs(2));
    let call = t.last_call().unwrap();
    assert_eq!((call.id.as_str(), call.name.as_str()), ("c7", "sql"));
    assert_eq!(call.started.age, secs(2));
    assert!(call.finished.is_none() && call.outcome.is_none());
    t.tool_finished("c7", CallOutcome::Error).unwrap();
    guard.advance(secs(1));
    let call = t.last_call().unwrap();
    assert_eq!(call.outcome, Some(CallOutcome::Error));
    assert_eq!(call.finished.unwrap().age, secs(1));
    assert_eq!(
        call.finished.unwrap().at,
        clock.wall_at(clock.now()) - secs(1)
    );
    assert_eq!(t.last_signal(SignalKind::ToolCall).unwrap().age, secs(1));
}

// R4.2: the snapshot carries state, phase, totals, strikes and budgets.
#[test]
fn status_snapshot_reports_budgets_remaining_and_totals() {
    let (guard, _, _) = setup();
    let t = guard
        .start(
            "st",
            quiet()
                .idle(secs(10))
                .deadline(secs(100))
                .terminate_after(0),
        )
        .unwrap();
    t.output(1000, 10);
    guard.advance(secs(4));
    let s = guard.status("st").unwrap();
    assert_eq!(s.state, TaskState::Working);
    assert_eq!((s.total_bytes, s.total_lines), (1000, 10));
    assert_eq!(s.last_output_age, Some(secs(4)));
    assert_eq!(s.elapsed, secs(4));
    let idle = s.budgets.iter().find(|b| b.budget == "idle").unwrap();
    assert_eq!((idle.remaining, idle.active), (secs(6), true));
    let dl = s.budgets.iter().find(|b| b.budget == "deadline").unwrap();
    assert_eq!(dl.remaining, secs(96));
    guard.advance(secs(6));
    let s = guard.status("st").unwrap();
    assert_eq!(
        (s.state, s.strikes, s.stall_count),
        (TaskState::Stalled, 1, 1)
    );
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["state"], "stalled");
    assert_eq!(json["phase"], "idle");
    assert_eq!(guard.statuses().len(), 1);
    assert!(guard.status("nope").is_none());
}

// R4.3: monitoring while background tasks run; busy while any task lives.
#[test]
fn background_tasks_make_the_owner_monitoring_and_busy() {
    let (guard, _, _) = setup();
    assert!(!guard.is_busy());
    let t = guard.start("owner", quiet()).unwrap();
    t.set_background(
        vec![BackgroundTask {
            id: "bg-1".into(),
            launch_id: Some("toolu_1".into()),
            kind: BackgroundKind::Command,
        }],
        false,
    );
    assert_eq!(t.status().unwrap().state, TaskState::Monitoring);
    assert!(guard.is_busy());
    t.set_background(vec![], false);
    assert_eq!(t.status().unwrap().state, TaskState::Working);
    t.finish_completed();
    assert!(!guard.is_busy());
}

// R4.3, R5.6, R5.10: a monitoring task waits in silence for the background
// task it launched (`claude -p` writes nothing until its background shell
// ends): the execution budget holds, and idle applies again once the
// record is empty.
#[test]
fn a_running_background_task_holds_the_execution_budget() {
    let (guard, rec, _) = setup();
    let t = guard
        .start("agent", quiet().idle(secs(2)).execution(secs(30)))
        .unwrap();
    t.output(10, 1); // past startup
    t.set_background(
        vec![BackgroundTask {
            id: "b9miywpi3".into(),
            launch_id: Some("toolu_1".into()),
            kind: BackgroundKind::Command,
        }],
        false,
    );
    guard.advance(secs(20));
    assert_eq!(rec.types_for("agent"), ["started"]);
    let s = t.status().unwrap();
    assert_eq!(s.state, TaskState::Monitoring);
    assert!(s
        .budgets
        .iter()
        .any(|b| b.budget == "execution" && b.active));
    t.set_background(vec![], false);
    guard.advance(secs(2));
    let stalled = rec
        .events()
        .into_iter()
        .find(|e| e.kind.type_name() == "stalled")
        .unwrap();
    assert!(matches!(
        stalled.kind,
        EventKind::Stalled {
            budget: Budget::Idle,
            ..
        }
    ));
    // The unnamed flag is a running task too.
    let u = guard
        .start("unnamed", quiet().idle(secs(2)).execution(secs(30)))
        .unwrap();
    u.set_background(vec![], true);
    guard.advance(secs(10));
    assert_eq!(rec.types_for("unnamed"), ["started"]);
}

// Bad input: each a clear error or a documented no-op, never a panic.
#[test]
fn bad_input_is_an_error_not_a_panic() {
    let (guard, _, _) = setup();
    let t = guard.start("b", quiet()).unwrap();
    assert_eq!(
        guard.start("b", quiet()).unwrap_err(),
        GuardError::DuplicateName("b".into())
    );
    assert_eq!(
        guard.cancel("ghost", "x").unwrap_err().to_string(),
        "no live task named `ghost`"
    );
    assert!(matches!(
        t.tool_finished("nope", CallOutcome::Success),
        Err(GuardError::UnknownCall { .. })
    ));
    t.tool_started("c1", "bash").unwrap();
    assert!(matches!(
        t.tool_started("c1", "bash"),
        Err(GuardError::DuplicateCall { .. })
    ));
    t.tool_finished("c1", CallOutcome::Success).unwrap();
    let zero = guard.start("z", quiet().idle(Duration::ZERO)).unwrap_err();
    assert!(
        zero.to_string()
            .contains("idle is 0s, expected 1ms..=30days"),
        "{zero}"
    );
    let absurd = guard
        .start("a", quiet().deadline(secs(10 * 365 * 86_400)))
        .unwrap_err();
    assert!(absurd.to_string().contains("deadline"), "{absurd}");
    t.resume().unwrap(); // resuming a running task is a no-op
    t.finish_completed();
    assert_eq!(
        t.finish(Outcome::Completed, None, None).unwrap_err(),
        GuardError::Finished {
            task: "b".into(),
            id: t.id()
        }
    );
    // The name is free again once the task has settled.
    guard.start("b", quiet()).unwrap().finish_completed();
}
