//! `stallwarden run --stream FORMAT` on replayed agent CLI recordings
//! (R5.10, R2.2, R5.3, R4.1, R8.1–R8.3).
//!
//! A child `sh` replays a fixture from sources/tests/fixtures/agent/ at real
//! pace: it prints lines and sleeps between them (the only sleeps; the test
//! itself only waits with a bound). Budgets are small (idle 1 s) and the
//! silences a few seconds, so every verdict is far from its threshold.

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::Duration;

mod common;
use common::{events, stallwarden, stderr, types};

/// Generous bound for a run of a few seconds.
const BOUND: Duration = Duration::from_secs(60);

/// Waits for `child` within [`BOUND`], reading its pipes all along.
fn wait_bounded(child: Child) -> Output {
    common::wait_within(child, BOUND)
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sources/tests/fixtures/agent")
        .join(name)
}

/// A `sh -c` script that prints `file`'s first `head` lines, stays silent
/// for `secs` seconds, then prints the rest.
fn replay(file: &Path, head: usize, secs: u32) -> String {
    let f = file.display();
    format!(
        "head -n {head} '{f}'; sleep {secs}; tail -n +{} '{f}'",
        head + 1
    )
}

/// Runs `stallwarden run ARGS -- sh -c SCRIPT` in a directory whose
/// stallwarden.toml sets idle = "1s", execution = "10m", and startup =
/// "30s" so a slow spawn on a loaded machine is not a stall (and `extra`).
fn run_replay(extra: &str, args: &[&str], script: &str) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        format!("[defaults]\nidle = \"1s\"\nexecution = \"10m\"\nstartup = \"30s\"\n{extra}"),
    )
    .unwrap();
    let child = stallwarden(dir.path())
        .arg("run")
        .args(args)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (wait_bounded(child), dir)
}

// Done-when (R5.10, R2.2): a recorded Claude Code session whose Bash call is
// silent for 3 s runs to its end under idle = 1s, execution = 10m, and its
// stdout is byte for byte the child's.
#[test]
fn silent_bash_call_under_the_execution_budget_runs_to_its_end() {
    let file = fixture("claude-code/bash_session.jsonl");
    // Line 3 is the Bash tool_use; its tool_result comes 3 s later.
    let (out, dir) = run_replay(
        "",
        &["--stream", "claude-code", "--events", "events.jsonl"],
        &replay(&file, 3, 3),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, std::fs::read(&file).unwrap());
    assert!(!stderr(&out).contains("exceeded"), "{}", stderr(&out));
    // R8.3: no stall in the events either.
    let kinds = types(&events(&dir.path().join("events.jsonl")));
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("started"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("finished"),
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k == "stalled"), "{kinds:?}");
}

// Done-when (R5.10, R2.1): the same session hanging 3 s between tools (after
// the tool_result, nothing in flight) exits 124 naming the idle budget.
#[test]
fn hang_between_tools_exits_124_naming_the_idle_budget() {
    let file = fixture("claude-code/bash_session.jsonl");
    let (out, _dir) = run_replay("", &["--stream", "claude-code"], &replay(&file, 4, 3));
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("idle budget 1s exceeded"),
        "{}",
        stderr(&out)
    );
}

// R5.10: without a stream format the silent tool call looks like any
// silence and is stopped; the stream is what makes the difference.
#[test]
fn without_stream_the_same_silent_tool_call_is_a_stall() {
    let file = fixture("claude-code/bash_session.jsonl");
    let (out, _dir) = run_replay("", &[], &replay(&file, 3, 3));
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
}

// R5.10, R7: the profile's `stream` key picks the format; `--stream none`
// turns it off again.
#[test]
fn profile_stream_key_sets_the_format_and_the_flag_overrides_it() {
    let file = fixture("codex/exec_sample.jsonl");
    // Line 4 is Codex's item.started of a command_execution.
    let script = replay(&file, 4, 3);
    let (out, _dir) = run_replay("stream = \"codex\"\n", &[], &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, std::fs::read(&file).unwrap());
    let (out, _dir) = run_replay("stream = \"codex\"\n", &["--stream", "none"], &script);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
}

// R5.10 on Gemini CLI's stream-json shapes.
#[test]
fn gemini_tool_call_holds_the_execution_budget() {
    let file = fixture("gemini/schema_session.jsonl");
    let (out, _dir) = run_replay("", &["--stream", "gemini"], &replay(&file, 3, 3));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, std::fs::read(&file).unwrap());
}

// R5.10, R7.2: a bad `stream` value names the file, line and key; the
// command never runs.
#[test]
fn bad_stream_value_is_a_config_error_with_its_place() {
    let (out, _dir) = run_replay("stream = \"cursor\"\n", &[], "echo ran");
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("stallwarden.toml:5"), "{err}");
    assert!(err.contains("stream"), "{err}");
    assert!(err.contains("claude-code"), "{err}");
    assert!(out.stdout.is_empty());
}

// R5.10, R8.1: garbage lines, a line that is not valid UTF-8, a 64 MiB line
// and a last line without a newline pass through unchanged between events.
#[test]
fn garbage_and_a_huge_line_pass_through_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    let mut bytes = b"plain text\n{\"type\":\"mystery\"}\n\xff\xfe not utf-8\n{broken\n".to_vec();
    bytes.extend(std::fs::read(fixture("claude-code/bash_session.jsonl")).unwrap());
    bytes.push(b'{');
    bytes.extend(std::iter::repeat_n(b'x', 64 << 20));
    bytes.extend(b"\"}\nno newline at the end");
    std::fs::write(&input, &bytes).unwrap();
    let script = format!("cat '{}'", input.display());
    let (out, _dir) = run_replay("", &["--stream", "claude-code"], &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout == bytes, "stdout differs from the child's");
}

// R5.10, R4.1: `describe` shows the agent's tool and how long it has run
// while the call is silent.
#[test]
fn describe_shows_the_running_tool_and_its_age() {
    let file = fixture("claude-code/bash_session.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sg.sock");
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\nidle = \"1s\"\nexecution = \"10m\"\n",
    )
    .unwrap();
    let child = stallwarden(dir.path())
        .args(["run", "--stream", "claude-code", "--socket"])
        .arg(&sock)
        .args(["--", "sh", "-c", &replay(&file, 3, 4)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Looks at the control socket until describe shows the tool, between
    // looks waiting on stallwarden's pidfd (it ends, the looks end).
    let mut last = String::new();
    let text = common::wait::until(child.id(), BOUND, Duration::from_millis(100), || {
        let out = stallwarden(dir.path())
            .args(["describe", "sh", "--socket"])
            .arg(&sock)
            .output()
            .unwrap();
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        last.contains("Bash(ls -la) (toolu_1), running for")
            .then(|| last.clone())
    })
    .unwrap_or_else(|| panic!("describe never showed the tool: {last}"));
    assert!(text.contains("executing 1 tool\n"), "{text}");
    let out = wait_bounded(child);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

// R5.10, R8.1: a tool call that outlives the execution budget is stopped,
// and the stall line names the agent's tool.
#[test]
fn tool_call_past_the_execution_budget_is_named_in_the_stall_line() {
    let file = fixture("claude-code/bash_session.jsonl");
    let (out, _dir) = run_replay(
        "[profile.short]\nexecution = \"1s\"\n",
        &["--stream", "claude-code", "-p", "short"],
        &replay(&file, 3, 10),
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("execution budget 1s exceeded"), "{err}");
    assert!(err.contains("tool \"Bash(ls -la)\" still running"), "{err}");
}

// R5.10, seed 000: Qwen Code's silent shell call under the execution budget.
#[test]
fn qwen_silent_shell_call_runs_to_its_end() {
    let file = fixture("qwen/schema_session.jsonl");
    let (out, _dir) = run_replay("", &["--stream", "qwen"], &replay(&file, 2, 3));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, std::fs::read(&file).unwrap());
}

// R7.3, R5.10: `check` shows each profile's stream format.
#[test]
fn check_shows_each_profiles_stream_format() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\nidle = \"1s\"\n[profile.agent]\nstream = \"qwen\"\n",
    )
    .unwrap();
    let out = stallwarden(dir.path()).arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("stream "))
        .unwrap_or("");
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["stream", "none", "qwen"],
        "{text}"
    );
}

// R10.6, R8.7: what the agent stream refuses (an empty call id, a result
// for a call never started) is counted on the task under `tools.` keys and
// shown, by key, at the end of a `-v` run; without `-v`, nothing.
#[test]
fn stream_refusals_are_counted_on_the_task_and_shown_under_dash_v() {
    let script = r#"printf '%s\n' '{"type":"tool_use","tool_id":"","tool_name":"grep"}' '{"type":"tool_result","tool_id":"never","status":"success"}' '{"type":"result","status":"success"}'"#;
    let (loud, _dir) = run_replay("", &["-v", "--stream", "gemini"], script);
    assert_eq!(loud.status.code(), Some(0), "{}", stderr(&loud));
    let err = stderr(&loud);
    let line = err
        .lines()
        .find(|l| l.contains("inputs refused"))
        .unwrap_or_else(|| panic!("no refusal summary under -v: {err}"));
    assert!(
        line.contains("tools.empty_id 1, tools.unknown_call 1"),
        "{line}"
    );
    let (quiet, _dir) = run_replay("", &["--stream", "gemini"], script);
    assert_eq!(quiet.status.code(), Some(0), "{}", stderr(&quiet));
    assert!(
        !stderr(&quiet).contains("inputs refused"),
        "{}",
        stderr(&quiet)
    );
}
