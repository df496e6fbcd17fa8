//! Background-task records (R5.6) and the `monitoring` state they put the
//! owner in (R4.3).

use stallwarden_sources::background::{
    BackgroundError, BackgroundRecord, EndNotice, EndStatus, Provenance, RowOp, SessionBoundary,
    MAX_ID, MAX_PER_OWNER,
};
use watchdog_core::{
    BackgroundKind, BackgroundTask, Guard, ManualClock, Profile, TaskHandle, TaskState,
};

fn owner() -> (Guard, TaskHandle) {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("turn", Profile::default()).unwrap();
    (guard, task)
}

fn state(task: &TaskHandle) -> TaskState {
    task.status().unwrap().state
}

fn pushed(task: &TaskHandle) -> (Vec<BackgroundTask>, bool) {
    let s = task.status().unwrap();
    (s.background, s.unnamed_background)
}

#[test]
fn a_launch_makes_the_owner_monitoring_until_it_ends() {
    let (guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    assert_eq!(state(&task), TaskState::Working);
    bg.launch("bash_1", "toolu_1", BackgroundKind::Command)
        .unwrap();
    assert_eq!(state(&task), TaskState::Monitoring);
    assert!(guard.is_busy());
    let (tasks, unnamed) = pushed(&task);
    assert_eq!(
        tasks,
        [BackgroundTask {
            id: "bash_1".into(),
            launch_id: Some("toolu_1".into()),
            kind: BackgroundKind::Command,
        }]
    );
    assert!(!unnamed);
    bg.end("bash_1", "toolu_1").unwrap();
    assert_eq!(state(&task), TaskState::Working);
    assert!(bg.is_empty());
}

#[test]
fn an_end_needs_both_the_task_id_and_the_launch_id() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    bg.launch("bash_1", "toolu_1", BackgroundKind::Command)
        .unwrap();
    bg.launch("bash_2", "toolu_2", BackgroundKind::Monitor)
        .unwrap();
    // The right task with another call's launch id: not retired.
    assert_eq!(
        bg.end("bash_1", "toolu_2"),
        Err(BackgroundError::LaunchMismatch {
            task: "bash_1".into(),
            launch: "toolu_2".into()
        })
    );
    // A launch id naming no recorded task: not retired either.
    assert_eq!(
        bg.end("bash_9", "toolu_1"),
        Err(BackgroundError::UnknownTask("bash_9".into()))
    );
    assert_eq!(pushed(&task).0.len(), 2);
    bg.end("bash_1", "toolu_1").unwrap();
    assert_eq!(pushed(&task).0.len(), 1);
    assert_eq!(state(&task), TaskState::Monitoring);
}

#[test]
fn an_inventory_replaces_the_record_keeping_launch_ids_and_taking_its_kinds() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    bg.launch("a", "toolu_a", BackgroundKind::Unknown).unwrap();
    bg.launch("b", "toolu_b", BackgroundKind::Command).unwrap();
    let problems = bg.inventory([
        ("a", BackgroundKind::Workflow),
        ("c", BackgroundKind::Monitor),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        pushed(&task).0,
        [
            BackgroundTask {
                id: "a".into(),
                launch_id: Some("toolu_a".into()),
                kind: BackgroundKind::Workflow,
            },
            BackgroundTask {
                id: "c".into(),
                launch_id: None,
                kind: BackgroundKind::Monitor,
            },
        ]
    );
    // "c" came from the inventory with no launch id: an end cannot verify it.
    assert!(matches!(
        bg.end("c", "toolu_c"),
        Err(BackgroundError::LaunchMismatch { .. })
    ));
    // An empty inventory says nothing runs any more.
    assert!(bg.inventory([]).is_empty());
    assert_eq!(state(&task), TaskState::Working);
}

#[test]
fn a_kill_result_retires_by_task_id() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    bg.launch("bash_1", "toolu_1", BackgroundKind::Command)
        .unwrap();
    assert_eq!(
        bg.kill_result("bash_2"),
        Err(BackgroundError::UnknownTask("bash_2".into()))
    );
    bg.kill_result("bash_1").unwrap();
    assert!(pushed(&task).0.is_empty());
    assert_eq!(state(&task), TaskState::Working);
}

#[test]
fn ids_longer_than_256_bytes_are_refused() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    let ok = "x".repeat(256);
    let long = "x".repeat(257);
    bg.launch(&ok, "toolu_1", BackgroundKind::Command).unwrap();
    assert_eq!(
        bg.launch(&long, "toolu_2", BackgroundKind::Command),
        Err(BackgroundError::IdTooLong(257))
    );
    assert_eq!(
        bg.launch("", "toolu_2", BackgroundKind::Command),
        Err(BackgroundError::EmptyId)
    );
    let problems = bg.inventory([
        (long.as_str(), BackgroundKind::Command),
        (ok.as_str(), BackgroundKind::Command),
    ]);
    assert_eq!(problems, [BackgroundError::IdTooLong(257)]);
    assert_eq!(bg.tasks().len(), 1);
    // R5.6: the inventory names a task that runs: it cannot be stored, so
    // the owner runs it unnamed (still monitoring) until a later inventory.
    assert!(bg.has_unnamed());
    assert!(pushed(&task).1);
    bg.inventory([(ok.as_str(), BackgroundKind::Command)]);
    assert!(!bg.has_unnamed());
}

/// An id whose byte `limit` falls inside a two-byte character: one ASCII
/// byte, then `é` (2 bytes) repeated past the limit.
fn id_cut_mid_char(limit: usize) -> String {
    let mut id = String::from("a");
    while id.len() <= limit + 8 {
        id.push('é');
    }
    id
}

// R6.5-style hygiene: an unknown id in an error is cut to MAX_ID bytes, on
// a character boundary, never past it and never panicking mid-character
// (kills the mutants of the cut's bound and its boundary walk).
#[test]
fn unknown_background_ids_are_cut_on_a_char_boundary() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    let long = id_cut_mid_char(MAX_ID);
    let Err(BackgroundError::UnknownTask(shown)) = bg.kill_result(&long) else {
        panic!("an unknown id must be refused");
    };
    assert_eq!(
        shown.len(),
        MAX_ID - 1,
        "cut back to the boundary below {MAX_ID}"
    );
    assert!(long.starts_with(&shown));

    let ascii = "b".repeat(MAX_ID + 10);
    let Err(BackgroundError::UnknownTask(shown)) = bg.kill_result(&ascii) else {
        panic!("an unknown id must be refused");
    };
    assert_eq!(shown.len(), MAX_ID);

    let short = "bg_short";
    assert_eq!(
        bg.kill_result(short),
        Err(BackgroundError::UnknownTask(short.into()))
    );

    bg.launch("bg_1", "call_1", BackgroundKind::Command)
        .unwrap();
    let wrong = "c".repeat(MAX_ID + 1);
    let Err(BackgroundError::LaunchMismatch { task: t, launch }) = bg.end("bg_1", &wrong) else {
        panic!("a wrong launch id must be refused");
    };
    assert_eq!((t.as_str(), launch.len()), ("bg_1", MAX_ID));
}

// R5.6, seed 002: a subagent's launch is the subagent's own work (its call
// holds the execution budget), not the owner's background record.
#[test]
fn a_subagents_launch_is_not_recorded() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    let sub = Provenance::Subagent {
        parent_tool_use_id: Some("toolu_task_1"),
    };
    assert_eq!(
        bg.launch_from("b1", "toolu_2", BackgroundKind::Command, sub),
        Err(BackgroundError::SubagentLaunch {
            task: "b1".into(),
            parent: "toolu_task_1".into(),
        })
    );
    assert!(bg.is_empty());
    assert_eq!(state(&task), TaskState::Working);
    bg.launch_from("b2", "toolu_3", BackgroundKind::Command, Provenance::Agent)
        .unwrap();
    assert_eq!(state(&task), TaskState::Monitoring);
}

// R5.6, seed 002: a new session (a new process) clears the record; /clear
// keeps the shells it did not end.
#[test]
fn a_new_session_clears_the_record_and_clear_keeps_it() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    bg.launch("b1", "toolu_1", BackgroundKind::Command).unwrap();
    bg.session(SessionBoundary::Clear);
    assert_eq!(state(&task), TaskState::Monitoring);
    assert_eq!(bg.tasks().len(), 1);
    bg.session(SessionBoundary::New);
    assert!(bg.is_empty());
    assert_eq!(state(&task), TaskState::Working);
    // The unnamed mark goes with it.
    bg.inventory([("", BackgroundKind::Unknown)]);
    assert!(bg.has_unnamed());
    bg.session(SessionBoundary::New);
    assert!(!bg.has_unnamed());
    assert_eq!(state(&task), TaskState::Working);
}

// R5.6, seed 002: an end row retires only as one ended notification naming
// both ids; a running status, a remove op, or two notifications in one row
// retire nothing.
#[test]
fn an_end_row_retires_only_one_ended_notification_naming_both_ids() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    bg.launch("b1", "toolu_1", BackgroundKind::Command).unwrap();
    bg.launch("b2", "toolu_2", BackgroundKind::Command).unwrap();
    let b1 = EndNotice {
        task: "b1",
        launch: "toolu_1",
        status: EndStatus::Completed,
    };
    let b2 = EndNotice {
        task: "b2",
        launch: "toolu_2",
        status: EndStatus::Completed,
    };
    let running = EndNotice {
        status: EndStatus::from_wire("running"),
        ..b1
    };
    assert_eq!(
        bg.end_row(RowOp::Enqueue, &[running]),
        Err(BackgroundError::NotAnEnd("the status is not an end"))
    );
    assert_eq!(
        bg.end_row(RowOp::Remove, &[b1]),
        Err(BackgroundError::NotAnEnd("a remove operation"))
    );
    assert_eq!(
        bg.end_row(RowOp::Enqueue, &[b1, b2]),
        Err(BackgroundError::NotAnEnd(
            "more than one notification in one row"
        ))
    );
    assert!(bg.end_row(RowOp::Enqueue, &[]).is_err());
    assert_eq!(bg.tasks().len(), 2);
    // The wrong launch id: still both ids needed.
    let crossed = EndNotice {
        launch: "toolu_2",
        ..b1
    };
    assert!(bg.end_row(RowOp::Enqueue, &[crossed]).is_err());
    assert_eq!(bg.tasks().len(), 2);
    for status in ["completed", "failed", "stopped", "killed"] {
        assert!(EndStatus::from_wire(status).is_end(), "{status}");
    }
    bg.end_row(RowOp::Enqueue, &[b1]).unwrap();
    bg.end_row(
        RowOp::Enqueue,
        &[EndNotice {
            status: EndStatus::from_wire("killed"),
            ..b2
        }],
    )
    .unwrap();
    assert!(bg.is_empty());
    assert_eq!(state(&task), TaskState::Working);
}

#[test]
fn past_64_tasks_a_new_id_runs_unnamed_until_an_inventory_clears_it() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    for i in 0..MAX_PER_OWNER {
        bg.launch(
            &format!("bg_{i}"),
            &format!("call_{i}"),
            BackgroundKind::Command,
        )
        .unwrap();
    }
    assert_eq!(
        bg.launch("bg_64", "call_64", BackgroundKind::Command),
        Err(BackgroundError::Full("bg_64".into()))
    );
    let (tasks, unnamed) = pushed(&task);
    assert_eq!(tasks.len(), MAX_PER_OWNER);
    assert!(!tasks.iter().any(|t| t.id == "bg_64"));
    assert!(unnamed);
    // Re-launching a recorded id is not a new id: no error.
    bg.launch("bg_0", "call_0b", BackgroundKind::Monitor)
        .unwrap();

    // Ends and kill results do not clear the flag: the unnamed task is
    // still running as far as anyone knows.
    for i in 1..MAX_PER_OWNER {
        bg.kill_result(&format!("bg_{i}")).unwrap();
    }
    bg.end("bg_0", "call_0b").unwrap();
    assert_eq!(pushed(&task), (vec![], true));
    assert_eq!(state(&task), TaskState::Monitoring);
    assert!(!bg.is_empty());

    // An inventory is the complete list: it clears the flag.
    assert!(bg
        .inventory([("bg_64", BackgroundKind::Command)])
        .is_empty());
    assert!(!pushed(&task).1);
    assert_eq!(bg.tasks()[0].launch_id, None);
    assert!(bg.inventory([]).is_empty());
    assert_eq!(state(&task), TaskState::Working);
}

#[test]
fn an_inventory_past_64_items_sets_the_unnamed_flag() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    let ids: Vec<String> = (0..70).map(|i| format!("bg_{i}")).collect();
    let problems = bg.inventory(ids.iter().map(|id| (id.as_str(), BackgroundKind::Unknown)));
    assert_eq!(problems.len(), 6);
    assert!(problems
        .iter()
        .all(|p| matches!(p, BackgroundError::Full(_))));
    assert_eq!(pushed(&task), (bg.tasks().to_vec(), true));
    assert_eq!(bg.tasks().len(), MAX_PER_OWNER);
}

// R5.6: `has_unnamed` says whether a task past the cap runs unnamed, and a
// complete inventory within the cap clears it (kills `has_unnamed -> bool`).
#[test]
fn has_unnamed_follows_the_cap_and_the_inventory() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    assert!(!bg.has_unnamed());
    for i in 0..MAX_PER_OWNER {
        bg.launch(
            &format!("bg_{i}"),
            &format!("call_{i}"),
            BackgroundKind::Command,
        )
        .unwrap();
    }
    assert!(!bg.has_unnamed(), "at the cap, every task is named");
    let over = bg.launch("bg_over", "call_over", BackgroundKind::Command);
    assert_eq!(over, Err(BackgroundError::Full("bg_over".into())));
    assert!(bg.has_unnamed());
    assert!(!bg.is_empty());
    assert!(bg.inventory([("bg_0", BackgroundKind::Command)]).is_empty());
    assert!(!bg.has_unnamed(), "a complete inventory clears the mark");
}

// R10.6: every report the record does not apply is an error to the caller
// and counted once on the owner, by `background.` key, whichever method
// refused it (a nested launch or end is not counted twice).
#[test]
fn refused_reports_are_counted_on_the_owner_by_key() {
    let (_guard, task) = owner();
    let mut bg = BackgroundRecord::new(task.recorder());
    assert_eq!(
        bg.launch("", "toolu_1", BackgroundKind::Command),
        Err(BackgroundError::EmptyId)
    );
    let sub = Provenance::Subagent {
        parent_tool_use_id: None,
    };
    assert!(bg
        .launch_from("b1", "toolu_2", BackgroundKind::Command, sub)
        .is_err());
    bg.launch("b2", "toolu_3", BackgroundKind::Command).unwrap();
    let done = EndNotice {
        task: "b2",
        launch: "toolu_other",
        status: EndStatus::Completed,
    };
    assert!(bg.end_row(RowOp::Enqueue, &[done]).is_err());
    assert!(bg.end_row(RowOp::Remove, &[done]).is_err());
    assert!(bg.kill_result("nope").is_err());
    let long = "x".repeat(300);
    assert_eq!(
        bg.inventory([(long.as_str(), BackgroundKind::Command)])
            .len(),
        1
    );
    let refused: Vec<_> = task.status().unwrap().refused.into_iter().collect();
    assert_eq!(
        refused,
        [
            ("background.empty_id", 1),
            ("background.id_too_long", 1),
            ("background.launch_mismatch", 1),
            ("background.not_an_end", 1),
            ("background.subagent_launch", 1),
            ("background.unknown_task", 1),
        ]
    );
}

// R5.6: the status words of an end notification read as what they say: the
// progress words as running, an unknown word as other, neither an end (kills
// the issue-26 mutant that drops EndStatus::from_wire's running arm).
#[test]
fn status_words_read_as_their_status() {
    let read = |words: &[&str]| -> Vec<EndStatus> {
        words.iter().map(|w| EndStatus::from_wire(w)).collect()
    };
    use EndStatus::*;
    assert_eq!(read(&["completed", "success"]), [Completed, Completed]);
    assert_eq!(read(&["failed", "error"]), [Failed, Failed]);
    assert_eq!(
        read(&["stopped", "killed", "cancelled"]),
        [Stopped, Stopped, Stopped]
    );
    assert_eq!(
        read(&["running", "pending", "paused"]),
        [Running, Running, Running]
    );
    assert_eq!(read(&["queued", "", "Completed"]), [Other, Other, Other]);
    assert!(!Running.is_end() && !Other.is_end());
}
