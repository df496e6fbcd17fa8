//! Agent CLI streams as the real CLIs wrote them (Claude Code 2.1.332, Codex
//! 0.171.0, headless against tests/agent_mock.py), replayed in virtual time
//! (R5.10, R5.6, R4.3, R2.2). Fixtures and how they were made:
//! fixtures/agent/SOURCES.md.

use std::time::Duration;

use stallwarden_sources::agent::{AgentStream, Format};
use watchdog_core::{
    BackgroundKind, CallOutcome, Guard, ManualClock, Phase, Profile, RecordingSink, TaskHandle,
    TaskState,
};

fn fixture(path: &str) -> Vec<String> {
    let full = format!("{}/tests/fixtures/agent/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    text.lines().map(|l| format!("{l}\n")).collect()
}

/// Idle 2 s and execution 30 s, as `stallwarden run --stream` is used in
/// tests/real_agent_clis.rs.
fn setup() -> (Guard, RecordingSink, TaskHandle) {
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(rec.clone())
        .build();
    let profile = Profile::default()
        .idle(Duration::from_secs(2))
        .execution(Duration::from_secs(30))
        .heartbeat_interval(None);
    let task = guard.start("agent", profile).unwrap();
    (guard, rec, task)
}

fn line_with(lines: &[String], needle: &str) -> usize {
    lines
        .iter()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle}"))
}

fn state(task: &TaskHandle) -> TaskState {
    task.status().unwrap().state
}

// R5.10, R2.2: a foreground Bash call. Claude Code writes `task_started`
// (`is_backgrounded: false`) about 3 s into it and `task_notification`
// before the result: the call's own work, never a background task.
#[test]
fn claude_code_foreground_bash_is_the_calls_work_not_a_background_task() {
    let (guard, rec, task) = setup();
    let lines = fixture("claude-code/real_bash_sleep.jsonl");
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    let started = line_with(&lines, "\"subtype\":\"task_started\"");
    for l in &lines[..=started] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(task.last_call().unwrap().name, "Bash(sleep 4)");
    assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
    assert_eq!(state(&task), TaskState::Working);
    assert!(stream.background().is_empty());
    guard.advance(Duration::from_secs(4)); // silent, under execution
    for l in &lines[started + 1..] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(rec.types_for("agent"), ["started"]);
    assert_eq!(state(&task), TaskState::Working);
    assert_eq!(
        task.last_call().unwrap().outcome,
        Some(CallOutcome::Success)
    );
    let c = stream.counts();
    assert_eq!((c.tools_started, c.tools_finished, c.turns), (1, 1, 1));
    assert_eq!(refused(&task), []);
}

// R5.6, R4.3: `run_in_background` — the task is `monitoring` from its
// launch until Claude Code's `task_notification`, through the turn's end
// and the 5.7 s of silence `claude -p` spends waiting for the shell.
#[test]
fn claude_code_background_bash_makes_the_task_monitoring_until_its_end() {
    let (guard, rec, task) = setup();
    let lines = fixture("claude-code/real_background_bash.jsonl");
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    let result = line_with(&lines, "\"stop_reason\":\"end_turn\"");
    for l in &lines[..=result] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(state(&task), TaskState::Monitoring);
    let s = task.status().unwrap();
    assert_eq!(s.phase, Phase::Idle);
    assert_eq!(s.background.len(), 1);
    assert_eq!(s.background[0].kind, BackgroundKind::Command);
    assert!(s.background[0]
        .launch_id
        .as_deref()
        .is_some_and(|l| l.starts_with("toolu_mock_")));
    guard.advance(Duration::from_millis(5700)); // waiting for the shell
    assert_eq!(rec.types_for("agent"), ["started"]);
    let end = line_with(&lines, "\"subtype\":\"task_notification\"");
    for l in &lines[result + 1..=end] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(state(&task), TaskState::Working);
    for l in &lines[end + 1..] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(state(&task), TaskState::Working);
    assert_eq!(refused(&task), []);
    assert_eq!(stream.counts().turns, 2);
}

// R5.6, seed 002: a new session id (a new process) clears the record; the
// same session's second `init` (the notification turn) keeps it.
#[test]
fn claude_code_new_session_clears_the_background_record() {
    let (_guard, _rec, task) = setup();
    let lines = fixture("claude-code/real_background_bash.jsonl");
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    let result = line_with(&lines, "\"stop_reason\":\"end_turn\"");
    for l in &lines[..=result] {
        stream.feed(l.as_bytes());
    }
    // The same session's init again: kept.
    stream.feed(lines[0].as_bytes());
    assert_eq!(state(&task), TaskState::Monitoring);
    // Constructed: the real init line under another session id.
    let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    let old = v["session_id"].as_str().unwrap();
    let other = lines[0].replace(old, "00000000-0000-0000-0000-000000000000");
    stream.feed(other.as_bytes());
    assert_eq!(state(&task), TaskState::Working);
}

// R5.10: `compacting` holds the execution budget until the next event line
// (here 4 s of silence under a 2 s idle budget), then idle applies again.
#[test]
fn claude_code_compaction_holds_the_execution_budget_until_the_next_event() {
    let (guard, rec, task) = setup();
    let lines = fixture("claude-code/real_compact.jsonl");
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(lines[0].as_bytes());
    assert!(lines[0].contains("\"status\":\"compacting\""));
    assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
    assert_eq!(
        task.status().unwrap().last_step.as_deref(),
        Some("tool \"compacting\" still running")
    );
    guard.advance(Duration::from_secs(20));
    assert_eq!(rec.types_for("agent"), ["started"]);
    stream.feed(lines[1].as_bytes()); // status null: compaction done
    assert_eq!(task.status().unwrap().phase, Phase::Idle);
    for l in &lines[2..] {
        stream.feed(l.as_bytes());
    }
    guard.advance(Duration::from_secs(3));
    assert_eq!(rec.types_for("agent")[..2], ["started", "stalled"]);
}

// R5.10: Codex names its command, and the stall line can show it.
#[test]
fn codex_command_execution_is_named_by_its_command() {
    let (guard, rec, task) = setup();
    let lines = fixture("codex/real_exec_sleep.jsonl");
    let mut stream = AgentStream::new(Format::Codex, task.recorder());
    let started = line_with(&lines, "\"item.started\"");
    for l in &lines[..=started] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(
        task.last_call().unwrap().name,
        "command_execution(/bin/bash -lc 'sleep 4')"
    );
    guard.advance(Duration::from_secs(4));
    for l in &lines[started + 1..] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(rec.types_for("agent"), ["started"]);
    let c = stream.counts();
    assert_eq!((c.tools_started, c.tools_finished, c.turns), (1, 1, 1));
}

// R5.10, R5.3: a Codex `file_change` is written only as completed: it is
// recorded as a call that ran whole, gets no execution budget, and leaves
// the in-flight set alone (a command running beside it still holds).
#[test]
fn codex_file_change_completed_only_is_a_whole_call() {
    let (guard, rec, task) = setup();
    let mut stream = AgentStream::new(Format::Codex, task.recorder());
    stream.feed(br#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"sleep 9","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"a.txt","kind":"add"}],"status":"completed"}}
"#);
    assert_eq!(stream.in_flight(), 1);
    assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
    let last = task.last_call().unwrap();
    assert_eq!(
        (last.name.as_str(), last.outcome),
        ("file_change", Some(CallOutcome::Success))
    );
    guard.advance(Duration::from_secs(9));
    assert_eq!(rec.types_for("agent"), ["started"]);
    stream.feed(br#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"sleep 9","aggregated_output":"","exit_code":0,"status":"completed"}}
"#);
    assert_eq!(stream.in_flight(), 0);
    let c = stream.counts();
    assert_eq!(
        (c.tools_started, c.tools_finished, c.tools_whole),
        (1, 1, 1)
    );
    assert_eq!(refused(&task), []);
}

// R8.1, R5.10: a shown command is cut and cleaned whatever it holds: long,
// multibyte, escape sequences, newlines; the name stays within 256 bytes.
#[test]
fn shown_commands_are_cut_and_cleaned() {
    use stallwarden_sources::agent::{call_name, MAX_SHOWN_COMMAND};
    let long = "é".repeat(500);
    let n = call_name("Bash", Some(&long));
    assert!(n.len() <= 256, "{}", n.len());
    assert!(n.starts_with("Bash(éé") && n.ends_with("…)"), "{n}");
    assert_eq!(n.chars().filter(|c| *c == 'é').count(), MAX_SHOWN_COMMAND);
    let n = call_name("Bash", Some("printf '\u{1b}[2J'\nrm -rf /tmp/x\r"));
    assert_eq!(n, "Bash(printf '?[2J' rm -rf /tmp/x)");
    let n = call_name(&"ñ".repeat(200), Some("ls"));
    assert!(n.len() <= 256 && !n.contains('('), "{n}");
    assert_eq!(call_name("Bash", Some("   ")), "Bash");
    // Through the stream: the running call's name is the cleaned one.
    let (_guard, _rec, task) = setup();
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    stream.feed(br#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"echo \u001b]0;owned\u0007 && sleep 9"}}]}}
"#);
    assert_eq!(
        task.status().unwrap().last_step.as_deref(),
        Some("tool \"Bash(echo ?]0;owned? && sleep 9)\" still running")
    );
}

// R5.6: a background shell stopped by the agent's own `TaskStop` is
// retired by Claude Code's `task_notification` (`stopped`, both ids),
// before the stop call's result.
#[test]
fn claude_code_task_stop_retires_the_background_task() {
    let (_guard, _rec, task) = setup();
    let lines = fixture("claude-code/real_background_stop.jsonl");
    let mut stream = AgentStream::new(Format::ClaudeCode, task.recorder());
    let stop = line_with(&lines, "\"name\":\"TaskStop\"");
    for l in &lines[..=stop] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(state(&task), TaskState::Monitoring);
    let end = line_with(&lines, "\"status\":\"stopped\"");
    for l in &lines[stop + 1..=end] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(state(&task), TaskState::Working);
    assert!(stream.background().is_empty());
    for l in &lines[end + 1..] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(state(&task), TaskState::Working);
    assert_eq!(refused(&task), []);
}

// R5.10: Gemini CLI 0.61.0's real stream: `run_shell_command` named by its
// command holds the execution budget from `tool_use` to `tool_result`.
#[test]
fn gemini_shell_call_is_named_and_held() {
    let (guard, rec, task) = setup();
    let lines = fixture("gemini/real_shell_sleep.jsonl");
    let mut stream = AgentStream::new(Format::Gemini, task.recorder());
    let started = line_with(&lines, "\"type\":\"tool_use\"");
    for l in &lines[..=started] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(task.last_call().unwrap().name, "run_shell_command(sleep 4)");
    assert_eq!(task.status().unwrap().phase, Phase::Executing { tools: 1 });
    guard.advance(Duration::from_millis(4250));
    for l in &lines[started + 1..] {
        stream.feed(l.as_bytes());
    }
    assert_eq!(rec.types_for("agent"), ["started"]);
    let c = stream.counts();
    assert_eq!(
        (
            c.events,
            c.plain,
            c.tools_started,
            c.tools_finished,
            c.turns
        ),
        (6, 0, 1, 1, 1)
    );
}

/// What the task counted as refused (R10.6), by key: tool calls, background
/// reports and argument events alike.
fn refused(task: &TaskHandle) -> Vec<(&'static str, u64)> {
    task.status().unwrap().refused.into_iter().collect()
}
