//! The tasks a Claude Code stream reports (`system` lines `task_started`,
//! `task_notification`, `background_tasks_changed`, `init`) and the
//! background record they feed (R5.6, R5.10). The real recordings are in
//! fixtures/agent (SOURCES.md); the other lines are hand-made in the shapes
//! of those recordings.

mod common;

use common::LogCapture;

use std::time::Duration;

use stallwarden_sources::agent::{AgentStream, Format};
use watchdog_core::{BackgroundKind, Guard, ManualClock, Profile, TaskHandle, TaskState};

fn fixture(path: &str) -> Vec<String> {
    let full = format!("{}/tests/fixtures/agent/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    text.lines().map(|l| format!("{l}\n")).collect()
}

fn setup() -> (Guard, TaskHandle) {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let profile = Profile::default()
        .idle(Duration::from_secs(2))
        .execution(Duration::from_secs(30))
        .heartbeat_interval(None);
    let task = guard.start("agent", profile).unwrap();
    (guard, task)
}

fn line_with(lines: &[String], needle: &str) -> usize {
    lines
        .iter()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle}"))
}

/// The background record as the stream holds it: (task, launch, kind).
fn background(stream: &AgentStream) -> Vec<(String, Option<String>, BackgroundKind)> {
    stream
        .background()
        .iter()
        .map(|t| (t.id.clone(), t.launch_id.clone(), t.kind))
        .collect()
}

fn refused(task: &TaskHandle) -> Vec<(&'static str, u64)> {
    task.status().unwrap().refused.into_iter().collect()
}

fn bash_calls(ids: &[&str]) -> String {
    let blocks: Vec<String> = ids
        .iter()
        .map(|id| {
            format!(r#"{{"type":"tool_use","id":"{id}","name":"Bash","input":{{"command":"sleep 30","description":"Wait"}}}}"#)
        })
        .collect();
    format!(
        r#"{{"type":"assistant","message":{{"role":"assistant","content":[{}]}},"parent_tool_use_id":null}}"#,
        blocks.join(",")
    ) + "\n"
}

fn task_started(task: &str, launch: &str, backgrounded: bool) -> String {
    format!(
        r#"{{"type":"system","subtype":"task_started","task_id":"{task}","tool_use_id":"{launch}","description":"Wait","is_backgrounded":{backgrounded},"task_type":"local_bash"}}"#
    ) + "\n"
}

fn task_notification(task: &str, launch: &str, status: &str) -> String {
    format!(
        r#"{{"type":"system","subtype":"task_notification","task_id":"{task}","tool_use_id":"{launch}","status":"{status}","summary":"Wait"}}"#
    ) + "\n"
}

fn tool_result(launch: &str) -> String {
    format!(
        r#"{{"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"{launch}","type":"tool_result","content":"ok","is_error":false}}]}}}}"#
    ) + "\n"
}

fn tasks_changed(tasks: &[(&str, &str)]) -> String {
    let tasks: Vec<String> = tasks
        .iter()
        .map(|(id, ty)| format!(r#"{{"task_id":"{id}","task_type":"{ty}","description":"Wait"}}"#))
        .collect();
    format!(
        r#"{{"type":"system","subtype":"background_tasks_changed","tasks":[{}]}}"#,
        tasks.join(",")
    ) + "\n"
}

// R5.6 on the real `run_in_background` recording: the launch row names its
// launching call as soon as `task_started` (`is_backgrounded: true`) comes,
// while that call is still in flight, and the stream's `background()` shows
// it (kills the issue-26 mutants of Tasks::started's `&&`s, which held such a
// launch as the call's own work, and of AgentStream::background).
#[test]
fn a_backgrounded_launch_is_recorded_with_its_call_while_the_call_runs() {
    let (_guard, task) = setup();
    let lines = fixture("claude-code/real_background_bash.jsonl");
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    let started = line_with(&lines, "\"subtype\":\"task_started\"");
    for l in &lines[..=started] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(stream.in_flight(), 1, "the Bash call has not returned");
    assert_eq!(
        background(&stream),
        [(
            "b9miywpi3".to_owned(),
            Some("toolu_mock_287804306921".to_owned()),
            BackgroundKind::Command
        )]
    );
    assert_eq!(stream.background(), &task.status().unwrap().background[..]);
}

// R5.6: `background_tasks_changed` is the complete list; each task's kind is
// read from its `task_type` (`local_bash` a command, a monitor, a workflow,
// anything else unknown). Hand-made types in Claude Code's naming (kills the
// issue-26 mutants that drop the `background_tasks_changed` arm, make
// Tasks::inventory a no-op or invert its filter, and force kind()'s guards).
#[test]
fn an_inventory_lists_every_task_with_the_kind_its_type_names() {
    let (_guard, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(
        tasks_changed(&[
            ("b1", "local_bash"),
            ("m1", "monitor_mcp"),
            ("w1", "local_workflow"),
            ("a1", "local_agent"),
        ])
        .as_bytes(),
    );
    let kinds: Vec<_> = background(&stream)
        .into_iter()
        .map(|(id, launch, kind)| (id, launch.is_some(), kind))
        .collect();
    let s = |id: &str| id.to_owned();
    assert_eq!(
        kinds,
        [
            (s("b1"), false, BackgroundKind::Command),
            (s("m1"), false, BackgroundKind::Monitor),
            (s("w1"), false, BackgroundKind::Workflow),
            (s("a1"), false, BackgroundKind::Unknown),
        ]
    );
    assert_eq!(task.status().unwrap().state, TaskState::Monitoring);
    stream.feed(tasks_changed(&[]).as_bytes());
    assert!(stream.background().is_empty());
    assert_eq!(refused(&task), []);
}

// R5.6: a task whose launching call is still in flight is that call's work:
// an inventory that lists it leaves it out and keeps the others (kills the
// issue-26 mutant of Tasks::inventory's `p.task == *id`).
#[test]
fn an_inventory_leaves_out_a_task_whose_call_is_still_in_flight() {
    let (_guard, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(bash_calls(&["toolu_1"]).as_bytes());
    stream.feed(task_started("b1", "toolu_1", false).as_bytes());
    stream.feed(tasks_changed(&[("b1", "local_bash"), ("b9", "local_bash")]).as_bytes());
    let ids: Vec<_> = background(&stream).into_iter().map(|t| t.0).collect();
    assert_eq!(ids, ["b9"]);
}

// R5.6: of two foreground shells in flight, one ends with its call and the
// other's call returns while it still runs (a shell moved to the
// background): only that one becomes a background task, under its own call
// (kills the issue-26 mutants of Tasks::started's `p.task != s.task`,
// Tasks::call_returned and its `p.launch == id`, and Tasks::ended's `&&`).
#[test]
fn only_the_task_that_outlives_its_call_moves_to_the_background() {
    let (_guard, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(bash_calls(&["toolu_1", "toolu_2"]).as_bytes());
    stream.feed(task_started("b1", "toolu_1", false).as_bytes());
    stream.feed(task_started("b2", "toolu_2", false).as_bytes());
    assert!(stream.background().is_empty());
    stream.feed(task_notification("b1", "toolu_1", "completed").as_bytes());
    stream.feed(tool_result("toolu_1").as_bytes());
    assert!(stream.background().is_empty(), "{:?}", background(&stream));
    assert_eq!(refused(&task), []);
    stream.feed(tool_result("toolu_2").as_bytes());
    assert_eq!(
        background(&stream),
        [(
            "b2".to_owned(),
            Some("toolu_2".to_owned()),
            BackgroundKind::Command
        )]
    );
    assert_eq!(task.status().unwrap().state, TaskState::Monitoring);
    stream.feed(task_notification("b2", "toolu_2", "completed").as_bytes());
    assert!(stream.background().is_empty());
    assert_eq!(refused(&task), []);
}

// R5.6: the turn's end abandons the calls still in flight and the tasks
// waiting on them, so the next inventory that lists such a task records it
// (kills the issue-26 mutant that makes Tasks::turn_end a no-op).
#[test]
fn after_the_turn_ends_a_listed_task_of_an_abandoned_call_is_recorded() {
    let (_guard, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(bash_calls(&["toolu_1"]).as_bytes());
    stream.feed(task_started("b1", "toolu_1", false).as_bytes());
    stream.feed(
        br#"{"type":"result","subtype":"success","is_error":false,"stop_reason":"end_turn"}
"#,
    );
    assert_eq!(stream.in_flight(), 0);
    stream.feed(tasks_changed(&[("b1", "local_bash")]).as_bytes());
    let ids: Vec<_> = background(&stream).into_iter().map(|t| t.0).collect();
    assert_eq!(ids, ["b1"]);
}

// R5.6: an `init` whose `session_id` is empty names no session: the record
// is kept, as for the same session again (kills the issue-26 mutant of
// claude_code::system's `!id.is_empty()` guard).
#[test]
fn an_init_with_an_empty_session_id_keeps_the_background_record() {
    let (_guard, task) = setup();
    let lines = fixture("claude-code/real_background_bash.jsonl");
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    let result = line_with(&lines, "\"stop_reason\":\"end_turn\"");
    for l in &lines[..=result] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(task.status().unwrap().state, TaskState::Monitoring);
    let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    let id = v["session_id"].as_str().unwrap();
    let empty = lines[0].replace(id, "");
    stream.feed(empty.as_bytes());
    assert_eq!(stream.background().len(), 1);
    assert_eq!(task.status().unwrap().state, TaskState::Monitoring);
    // A later init of the first session is still the same session.
    stream.feed(lines[0].as_bytes());
    assert_eq!(stream.background().len(), 1);
}

// R10.6, R8.7: a task report refused for naming no launching call is logged
// (`stallwarden run -v`) with the task's id, cut to 256 bytes on a character
// boundary (kills the issue-26 mutants of tasks::cut).
#[test]
fn a_refused_task_report_is_logged_with_its_task_id_cut_to_256_bytes() {
    let (_guard, task) = setup();
    let log = LogCapture::default();
    let long = format!("b{}", "é".repeat(200)); // 401 bytes
    tracing::subscriber::with_default(log.clone(), || {
        let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
        stream.feed(br#"{"type":"system","subtype":"task_started","task_id":"b7","task_type":"local_bash","is_backgrounded":true}
"#);
        let line = format!(
            r#"{{"type":"system","subtype":"task_notification","task_id":"{long}","status":"completed"}}"#
        ) + "\n";
        stream.feed(line.as_bytes());
    });
    assert_eq!(refused(&task), [("background.no_launch", 2)]);
    let log = log.0.lock().unwrap();
    assert!(
        log.contains("background task `b7` names no launching call"),
        "{log}"
    );
    let cut = format!("b{}", "é".repeat(127)); // 255 bytes: 256 would split an é
    assert!(
        log.contains(&format!("background task `{cut}` names")),
        "{log}"
    );
}
