//! R5.12 end to end: loud hangs, each beside its busy twin, on real
//! processes through the real `stallwarden` binary.
//!
//! A loud hang is never silent but only repeats itself: it must run out of
//! its idle budget, exit 124 and name what repeats. Its twin prints as
//! often and as alike but reports new work: it runs to its own end. Budgets
//! are small, every wait is bounded by [`BOUND`], and nothing asserts on
//! wall time.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

mod common;
use common::{events, run, stderr, BOUND};

/// Runs `stallwarden run --idle IDLE --events events.jsonl -- sh -c
/// SCRIPT` in `dir` with `startup = 30s`, so a slow spawn on a loaded
/// machine is not the stall under test.
fn run_script(dir: &Path, idle: &str, script: &str) -> Output {
    std::fs::write(
        dir.join("stallwarden.toml"),
        "[defaults]\nstartup = \"30s\"\n",
    )
    .unwrap();
    run(
        dir,
        &[
            "run",
            "--idle",
            idle,
            "--events",
            "events.jsonl",
            "--",
            "sh",
            "-c",
            script,
        ],
    )
}

/// The stalled event's `repeating` field.
fn repeating(dir: &Path) -> serde_json::Value {
    events(&dir.join("events.jsonl"))
        .into_iter()
        .find(|e| e["type"] == "stalled")
        .map(|e| e["repeating"].clone())
        .unwrap_or_default()
}

fn assert_loud_hang(dir: &Path, out: &Output, shown: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(
        err.contains(&format!("exceeded: the output repeats \"{shown}")),
        "{err}"
    );
    let r = repeating(dir);
    assert_eq!(r["source"], "output", "{r}");
    assert!(r["shown"].as_str().unwrap().starts_with(shown), "{r}");
    assert!(r["count"].as_u64().unwrap() >= 2, "{r}");
}

fn assert_runs_to_its_end(out: &Output) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("exceeded"), "{err}");
}

/// A loopback HTTP server that is never ready: every request gets a 503.
fn never_ready_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    port
}

/// A port nothing listens on: bound, then let go.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

// apple/cups#5817's shape: a wait-for loop against a server that never
// gets ready prints the same line every second forever.
#[test]
fn a_wait_for_loop_against_a_server_never_ready_exits_124_naming_its_line() {
    let port = never_ready_server();
    let dir = tempfile::tempdir().unwrap();
    let script =
        format!("until curl -sf http://127.0.0.1:{port}/ready; do echo waiting...; sleep 1; done");
    let out = run_script(dir.path(), "5s", &script);
    assert_loud_hang(dir.path(), &out, "waiting...");
}

// Its busy twin: a progress line per second whose counter advances.
#[test]
fn a_progress_line_per_second_whose_counter_advances_runs_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_script(
        dir.path(),
        "3s",
        "for i in 1 2 3 4 5 6 7 8; do echo \"$(date +%T) progress $i/8\"; sleep 1; done",
    );
    assert_runs_to_its_end(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 8);
}

// A spinner turning over a frozen percent: each frame is a line ended by
// `\r`, and only the frame changes.
#[test]
fn a_spinner_over_a_frozen_percent_exits_124() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_script(
        dir.path(),
        "2s",
        r"while :; do for f in '|' / - '\'; do printf '\r[ 42%%] building %s' $f; sleep 0.2; done; done",
    );
    assert_loud_hang(dir.path(), &out, "[ 42%] building");
}

// Its busy twin: the same spinner over a percent that advances.
#[test]
fn a_spinner_over_an_advancing_percent_runs_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_script(
        dir.path(),
        "2s",
        r"for p in $(seq 1 25); do printf '\r[%3d%%] building %s' $p '|'; sleep 0.2; done; echo",
    );
    assert_runs_to_its_end(&out);
}

// apple/cups#2951's shape: each refused connect logged with a fresh
// timestamp and attempt number. A retry is not progress, even when its
// counter grows.
#[test]
fn a_retry_log_against_a_closed_port_exits_124() {
    let port = closed_port();
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "i=1; until curl -s http://127.0.0.1:{port}/; do \
         echo \"$(date '+%F %T') connect to 127.0.0.1:{port} refused (attempt $i), will retry in 1 seconds\"; \
         i=$((i+1)); sleep 0.5; done"
    );
    let out = run_script(dir.path(), "3s", &script);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(err.contains("exceeded: the output repeats \""), "{err}");
    assert!(err.contains("refused (attempt "), "{err}");
}

// Its busy twin: a timestamped log of rows processed.
#[test]
fn a_timestamped_log_of_rows_processed_runs_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_script(
        dir.path(),
        "2s",
        "for i in 1 2 3 4 5 6 7 8 9 10; do echo \"$(date '+%F %T') processed $((i*1000)) rows\"; sleep 0.5; done",
    );
    assert_runs_to_its_end(&out);
}

// The hidden behaviour of earlier issues: a healthy job printing
// `progress 3/5` at a steady pace is progress.
#[test]
fn a_job_printing_progress_n_of_5_at_a_steady_pace_is_progress() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_script(
        dir.path(),
        "3s",
        "for i in 1 2 3 4 5; do echo \"progress $i/5\"; sleep 2; done",
    );
    assert_runs_to_its_end(&out);
}

// A real test runner's verbose output at its own pace: each line names a
// new test, so it is never stopped.
#[test]
fn a_real_test_runners_verbose_output_at_its_pace_is_not_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let tests: String = (0..12)
        .map(|i| format!("    def test_case_{i:02}(self):\n        time.sleep(0.4)\n        self.assertTrue(True)\n"))
        .collect();
    std::fs::write(
        dir.path().join("test_slow.py"),
        format!("import time, unittest\n\nclass Slow(unittest.TestCase):\n{tests}"),
    )
    .unwrap();
    let out = run_script(dir.path(), "2s", "python3 -m unittest -v test_slow 2>&1");
    assert_runs_to_its_end(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("... ok").count(), 12, "{stdout}");
}

// The opt-out: `repeat` in renewed-by gives the old behaviour, and the
// same wait loop runs until its own end.
#[test]
fn repeat_in_renewed_by_keeps_a_repeating_job_alive() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\nstartup = \"30s\"\n\
         renewed-by = [\"argument-delta\", \"output\", \"tool-call\", \"progress\", \"repeat\"]\n",
    )
    .unwrap();
    let out = run(
        dir.path(),
        &[
            "run",
            "--idle",
            "2s",
            "--",
            "sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8; do echo waiting...; sleep 0.5; done",
        ],
    );
    assert_runs_to_its_end(&out);
}

// Under terminate-after = 2, strike 1 is a `stalled` event (a runner's cue
// to nudge its model), strike 2 the stop; both say what repeats.
#[test]
fn with_two_strikes_the_first_is_a_stalled_event_and_the_second_the_stop() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\nstartup = \"30s\"\nterminate-after = 2\n",
    )
    .unwrap();
    let out = run(
        dir.path(),
        &[
            "run",
            "--idle",
            "1s",
            "--events",
            "events.jsonl",
            "--",
            "sh",
            "-c",
            "while :; do echo 'Waiting for printer to become available.'; sleep 0.3; done",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    let stalls: Vec<_> = events(&dir.path().join("events.jsonl"))
        .into_iter()
        .filter(|e| e["type"] == "stalled")
        .collect();
    assert_eq!(stalls.len(), 2, "{stalls:?}");
    for (i, s) in stalls.iter().enumerate() {
        assert_eq!(s["strike"], i + 1);
        assert_eq!(
            s["repeating"]["shown"], "Waiting for printer to become available.",
            "{s}"
        );
    }
    assert!(err.contains("(strike 1 of 2)"), "{err}");
    assert!(err.contains("(strike 2 of 2)"), "{err}");
    let _ = BOUND;
}

/// The recorded Claude Code shapes of `bash_session.jsonl` (see
/// sources/tests/fixtures/agent/SOURCES.md): its init line, then for each
/// `(input, result)` its `tool_use` and `tool_result` lines with the ids a
/// real session gives each call, then its `result` line.
fn claude_session(calls: &[(String, String)]) -> String {
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sources/tests/fixtures/agent/claude-code/bash_session.jsonl"),
    )
    .unwrap();
    let lines: Vec<&str> = fixture.lines().collect();
    let (init, tool_use, tool_result, result) = (lines[0], lines[2], lines[3], lines[4]);
    let mut out = format!("{init}\n");
    for (i, (input, res)) in calls.iter().enumerate() {
        let id = format!("toolu_{i:04}");
        out += &tool_use
            .replace("toolu_1", &id)
            .replace("msg_2", &format!("msg_{}", 2 * i + 2))
            .replace("ls -la", input);
        out.push('\n');
        out += &tool_result
            .replace("toolu_1", &id)
            .replace("msg_3", &format!("msg_{}", 2 * i + 3))
            .replace(r"total 2\nREADME.md\nsrc\n", res);
        out.push('\n');
    }
    out + result + "\n"
}

/// Runs `session` through `stallwarden run --stream claude-code`, one line
/// every 0.15 s, with `idle = 2s`.
fn run_session(dir: &Path, session: &str) -> Output {
    std::fs::write(dir.join("session.jsonl"), session).unwrap();
    std::fs::write(
        dir.join("stallwarden.toml"),
        "[defaults]\nstartup = \"30s\"\nidle = \"2s\"\n",
    )
    .unwrap();
    run(
        dir,
        &[
            "run",
            "--stream",
            "claude-code",
            "--events",
            "events.jsonl",
            "--",
            "sh",
            "-c",
            "while IFS= read -r l; do printf '%s\\n' \"$l\"; sleep 0.15; done < session.jsonl",
        ],
    )
}

// qwen-code#5234's shape in a real recorded stream: the agent asks for the
// same call and gets the same result; every raw line differs in its ids.
#[test]
fn an_agent_repeating_one_call_with_the_same_result_exits_124_naming_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let calls: Vec<_> = (0..40)
        .map(|_| ("cat config.yaml".to_owned(), r"port: 8080\n".to_owned()))
        .collect();
    let out = run_session(dir.path(), &claude_session(&calls));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(
        err.contains("exceeded: Bash(cat config.yaml) returned the same result"),
        "{err}"
    );
    let r = repeating(dir.path());
    assert_eq!(r["source"], "tool-call", "{r}");
}

// Its busy twins: reading many files, and re-running one test command
// whose result improves, run to their end.
#[test]
fn an_agent_reading_many_files_runs_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let calls: Vec<_> = (0..15)
        .map(|i| {
            (
                format!("cat src/module_{i}.rs"),
                format!(r"pub mod m{i};\n"),
            )
        })
        .collect();
    let out = run_session(dir.path(), &claude_session(&calls));
    assert_runs_to_its_end(&out);
}

#[test]
fn an_agent_rerunning_one_test_command_with_improving_results_runs_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let calls: Vec<_> = (0..15)
        .map(|i| {
            (
                "pytest -q".to_owned(),
                format!(r"{} failed, {} passed in 0.{i}2s\n", 15 - i, 10 + i),
            )
        })
        .collect();
    let out = run_session(dir.path(), &claude_session(&calls));
    assert_runs_to_its_end(&out);
}

// `describe` says what repeats while the job still runs, before any stall.
#[test]
fn describe_says_what_repeats_while_the_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sw.sock");
    let child = common::stallwarden(dir.path())
        .args(["run", "--idle", "20s", "--socket"])
        .arg(&sock)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 60 ]; do echo 'waiting for db...'; i=$((i+1)); sleep 0.2; done",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let _guard = common::KillOnDrop(vec![pid]);
    let mut last = String::new();
    let text = common::wait::until(pid, BOUND, std::time::Duration::from_millis(100), || {
        let out = common::stallwarden(dir.path())
            .args(["describe", "sh", "--socket"])
            .arg(&sock)
            .output()
            .unwrap();
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        last.contains("repeating      the output repeats \"waiting for db...\"")
            .then(|| last.clone())
    })
    .unwrap_or_else(|| panic!("describe never said what repeats: {last}"));
    assert!(text.contains("times in"), "{text}");
    let out = common::wait_bounded(child);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
