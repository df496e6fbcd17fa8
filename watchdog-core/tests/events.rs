//! Events as sinks and the events file see them (R8.3, R3.1): every event
//! type's name and which ones a sink may never lose, an event's JSON line,
//! the names of budgets and task ids, and leaked processes reaching the
//! sinks as an event of their own (R8.5).
//!
//! Pure values, and one guard on a virtual clock (`ManualClock`) that is
//! never advanced.

use std::time::{Duration, SystemTime};

use watchdog_core::{Budget, Event, EventKind, Nanos, Outcome, Profile, TaskId};

mod common;
use common::{ms, secs, setup};

// R8.3: every event type's name, and which ones a sink may never lose.
#[test]
fn every_event_type_has_its_name_and_the_critical_ones_are_marked() {
    let finished = EventKind::Finished {
        outcome: Outcome::Completed,
        exit_code: None,
        signal: None,
    };
    let kinds = [
        (EventKind::Started { pid: None }, "started", false),
        (EventKind::LongRunning, "long_running", false),
        (
            EventKind::Heartbeat {
                last_output_age: None,
                total_lines: 0,
                total_bytes: 0,
                idle_remaining: None,
                deadline: None,
            },
            "heartbeat",
            false,
        ),
        (
            EventKind::Stalled {
                budget: Budget::Idle,
                strike: 1,
                terminate_after: 1,
                silent: secs(1),
                last_step: None,
                children: None,
                stacks: Vec::new(),
                on_stall: None,
                repeating: None,
            },
            "stalled",
            true,
        ),
        (EventKind::Recovered { silent: secs(1) }, "recovered", false),
        (
            EventKind::DeadlineExceeded { reason: "r".into() },
            "deadline_exceeded",
            false,
        ),
        (
            EventKind::LivenessLost { reason: "r".into() },
            "liveness_lost",
            false,
        ),
        (
            EventKind::Triggered { reason: "r".into() },
            "triggered",
            false,
        ),
        (
            EventKind::Cancelling {
                reason: "r".into(),
                signal: "SIGTERM",
            },
            "cancelling",
            true,
        ),
        (EventKind::Killed { signal: "SIGKILL" }, "killed", true),
        (finished, "finished", true),
    ];
    for (kind, name, critical) in kinds {
        assert_eq!(kind.type_name(), name);
        assert_eq!(kind.is_critical(), critical, "{name}");
        let json = serde_json::to_value(&kind).unwrap();
        assert_eq!(json["type"], name);
    }
}

// R8.3: an event serializes to its JSON line: RFC 3339 milliseconds,
// elapsed in ms, absent optionals omitted.
#[test]
fn event_serializes_to_its_json_line() {
    let e = Event {
        name: "build".into(),
        task: TaskId::from_raw(3),
        wall: SystemTime::UNIX_EPOCH + Duration::from_millis(1_767_225_600_250),
        at: Nanos::from_secs(9),
        elapsed: Duration::from_micros(2_500_900),
        kind: EventKind::Stalled {
            budget: Budget::Execution,
            strike: 2,
            terminate_after: 3,
            silent: Duration::from_micros(1_999_999),
            last_step: None,
            children: None,
            stacks: Vec::new(),
            on_stall: None,
            repeating: None,
        },
    };
    assert_eq!(
        serde_json::to_value(&e).unwrap(),
        serde_json::json!({
            "type": "stalled",
            "task": "build",
            "at": "2026-01-01T00:00:00.250Z",
            "elapsed_ms": 2500,
            "budget": "execution",
            "strike": 2,
            "terminate_after": 3,
            "silent_ms": 1999
        })
    );
    let hb = EventKind::Heartbeat {
        last_output_age: Some(ms(1234)),
        total_lines: 2,
        total_bytes: 9,
        idle_remaining: Some(Duration::MAX),
        deadline: None,
    };
    let json = serde_json::to_value(&hb).unwrap();
    assert_eq!(json["last_output_age_ms"], 1234);
    assert_eq!(json["idle_remaining_ms"], u64::MAX);
    assert!(json.get("deadline_ms").is_none());
}

// R3.1: budget names as events and configs spell them; ids print as `#n`.
#[test]
fn budgets_print_as_configs_spell_them_and_task_ids_as_hash_n() {
    assert_eq!(Budget::Idle.to_string(), "idle");
    assert_eq!(Budget::Execution.to_string(), "execution");
    assert_eq!(Budget::Startup.as_str(), "startup");
    assert_eq!(TaskId::from_raw(42).to_string(), "#42");
    assert_eq!(TaskId::from_raw(42).as_raw(), 42);
}

// R8.5: processes named as leaked reach the sinks as `leaked`, before
// `finished`.
#[test]
fn leaked_processes_are_an_event() {
    let (guard, rec, _clock) = setup();
    let task = guard.start("job", Profile::default()).unwrap();
    task.leaked(vec![watchdog_core::ProcessName {
        pid: 7,
        name: "tee".into(),
    }])
    .unwrap();
    task.finish_completed();
    assert_eq!(rec.types_for("job"), ["started", "leaked", "finished"]);
}
