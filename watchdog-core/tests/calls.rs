//! The one set of tool calls in flight and its limits, in the core (R5.3,
//! R10.6): whatever door feeds it, the same ids are refused the same way,
//! and an error names the id it refused cut to `MAX_CALL_ID` bytes on a
//! character boundary (R10.2).

use std::time::Duration;

use watchdog_core::{
    CallOutcome, CallProblem, Guard, GuardError, ManualClock, Phase, Profile, RecordingSink,
    SignalKind, MAX_CALLS_IN_FLIGHT, MAX_CALL_ID,
};

fn setup() -> (Guard, RecordingSink) {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    (guard, rec)
}

fn quiet() -> Profile {
    Profile::default()
        .idle(Duration::from_secs(10))
        .execution(Duration::from_secs(300))
        .heartbeat_interval(None)
}

#[test]
fn ids_and_names_are_bounded_in_the_core_and_a_refusal_records_nothing() {
    // R10.6: the limits live in the core, so every door inherits them.
    let (guard, _) = setup();
    let t = guard.start("limits", quiet()).unwrap();
    let bad = |id: &str, name: &str| match t.tool_started(id, name) {
        Err(GuardError::BadCall { task, problem }) => {
            assert_eq!(task, "limits");
            problem
        }
        other => panic!("{id:.20}/{name:.20}: expected BadCall, got {other:?}"),
    };
    let long = "x".repeat(MAX_CALL_ID + 1);
    assert_eq!(bad("", "bash"), CallProblem::EmptyId);
    assert_eq!(bad("c1", ""), CallProblem::EmptyName);
    assert_eq!(bad(&long, "bash"), CallProblem::TooLong(MAX_CALL_ID + 1));
    assert_eq!(bad("c1", &long), CallProblem::TooLong(MAX_CALL_ID + 1));
    assert_eq!(
        t.tool_started(&long, "bash").unwrap_err().to_string(),
        "task `limits`: tool call id or name is 257 bytes, more than 256"
    );
    // Nothing was recorded: no signal, no call, no phase change.
    assert!(t.last_signal(SignalKind::ToolCall).is_none());
    assert!(t.last_call().is_none());
    assert_eq!(t.calls_in_flight(), 0);
    // At the limit exactly is fine.
    let edge = "é".repeat(MAX_CALL_ID / 2);
    t.tool_started(&edge, &edge).unwrap();
    assert!(t.is_call_in_flight(&edge));
}

#[test]
fn an_over_long_finish_is_unknown_and_names_the_id_cut_on_a_char_boundary() {
    // R5.3: reported, not a panic; the untrusted id is cut for the error.
    let (guard, _) = setup();
    let t = guard.start("cut", quiet()).unwrap();
    let long = format!("a{}", "é".repeat(MAX_CALL_ID));
    match t.tool_finished(&long, CallOutcome::Success) {
        Err(GuardError::UnknownCall { call, .. }) => {
            assert_eq!(call.len(), MAX_CALL_ID - 1, "cut before the split 'é'");
            assert!(long.starts_with(&call));
        }
        other => panic!("expected UnknownCall, got {other:?}"),
    }
    assert!(t.last_signal(SignalKind::ToolCall).is_none());
}

#[test]
fn the_cap_refuses_one_more_start_and_frees_a_place_on_a_finish() {
    // R10.6: a runaway stream cannot grow the set.
    let (guard, _) = setup();
    let t = guard.start("cap", quiet()).unwrap();
    for i in 0..MAX_CALLS_IN_FLIGHT {
        t.tool_started(&format!("c{i}"), "bash").unwrap();
    }
    assert_eq!(
        t.tool_started("one-more", "bash"),
        Err(GuardError::BadCall {
            task: "cap".into(),
            problem: CallProblem::TooMany
        })
    );
    assert_eq!(t.calls_in_flight(), MAX_CALLS_IN_FLIGHT);
    t.tool_finished("c7", CallOutcome::Success).unwrap();
    t.tool_started("one-more", "bash").unwrap();
    assert_eq!(
        t.status().unwrap().phase,
        Phase::Executing {
            tools: MAX_CALLS_IN_FLIGHT
        }
    );
}

#[test]
fn finish_calls_ends_every_call_and_hands_the_silence_back_to_idle() {
    // R5.3, R2.2: a turn that ended without its results.
    let (guard, rec) = setup();
    let t = guard.start("abandon", quiet()).unwrap();
    assert_eq!(t.finish_calls(CallOutcome::Cancelled), Ok(0));
    t.tool_started("a", "bash").unwrap();
    t.tool_started("b", "grep").unwrap();
    guard.advance(Duration::from_secs(60));
    assert_eq!(rec.types_for("abandon"), ["started"]);
    // The finish is a signal: idle counts from it, not from the starts.
    assert_eq!(t.finish_calls(CallOutcome::Cancelled), Ok(2));
    assert_eq!(rec.types_for("abandon"), ["started"]);
    assert_eq!(t.calls_in_flight(), 0);
    let last = t.last_call().unwrap();
    assert_eq!(
        (last.name.as_str(), last.outcome),
        ("grep", Some(CallOutcome::Cancelled))
    );
    assert_eq!(
        t.status().unwrap().last_step.as_deref(),
        Some("tool \"grep\" finished (cancelled)")
    );
    guard.advance(Duration::from_secs(9));
    assert_eq!(rec.types_for("abandon"), ["started"]);
    guard.advance(Duration::from_secs(1));
    assert_eq!(
        rec.types_for("abandon"),
        ["started", "stalled", "cancelling"]
    );
}

#[test]
fn a_call_is_in_flight_from_its_start_to_its_finish_and_never_otherwise() {
    // R5.3: `is_call_in_flight` answers for the one set, whichever door
    // asks; an unknown id, a finished call and a finished task are not in
    // flight.
    let (guard, _) = setup();
    let t = guard.start("turn", quiet()).unwrap();
    assert!(!t.is_call_in_flight("toolu_1"), "nothing started yet");
    t.tool_started("toolu_1", "bash").unwrap();
    let recorder = t.recorder();
    assert!(recorder.is_call_in_flight("toolu_1"));
    assert!(!recorder.is_call_in_flight("toolu_2"));
    t.tool_finished("toolu_1", CallOutcome::Success).unwrap();
    assert!(!recorder.is_call_in_flight("toolu_1"), "finished");
    t.tool_started("toolu_3", "bash").unwrap();
    t.finish_completed();
    assert!(!recorder.is_call_in_flight("toolu_3"), "the task finished");
}

// R10.2: an over-long id in an error is cut to MAX_CALL_ID bytes on a
// character boundary, however its characters fall.
#[test]
fn an_over_long_call_id_is_cut_on_a_character_boundary() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("turn", Profile::default()).unwrap();
    // "a" then two-byte characters: byte MAX_CALL_ID (even) falls inside one.
    let id = format!("a{}", "é".repeat(MAX_CALL_ID));
    let err = task.tool_finished(&id, CallOutcome::Success).unwrap_err();
    let shown = format!("a{}", "é".repeat((MAX_CALL_ID - 2) / 2));
    assert_eq!(shown.len(), MAX_CALL_ID - 1);
    match err {
        GuardError::UnknownCall { call, .. } => assert_eq!(call, shown),
        other => panic!("wanted UnknownCall, got {other:?}"),
    }
}
