//! What runs at a stall before the stop (R8.14): the user's `on-stall`
//! command, bounded in time and output, its run kept in the `stalled`
//! event and said on stderr. Real commands, real process groups; budgets
//! of 1-2 s and generous bounds on the whole run.

mod common;

use std::process::Stdio;

use common::{events, stallwarden, stderr, wait_bounded};
use serde_json::Value;

/// Runs `stallwarden run ARGS` with events to a file; returns stderr and
/// the events.
fn run_with_events(dir: &std::path::Path, args: &[&str]) -> (std::process::Output, Vec<Value>) {
    let ev = dir.join("events.jsonl");
    let child = stallwarden(dir)
        .arg("run")
        .arg("--events")
        .arg(&ev)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child);
    (out, events(&ev))
}

fn stalled(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["type"] == "stalled")
        .expect("a stalled event")
}

// R8.14: the hook runs before the SIGTERM (the command is still alive for
// it), with the pid, group, suspects and stall line in its environment;
// its output is in the `stalled` event and its end on stderr.
#[test]
fn on_stall_output_is_kept_in_the_stalled_event() {
    let dir = tempfile::tempdir().unwrap();
    let hook = r#"echo "pid=$STALLWARDEN_PID pgid=$STALLWARDEN_PGID"
echo "suspects=$STALLWARDEN_SUSPECTS"
echo "stall=$STALLWARDEN_STALL"
kill -0 "$STALLWARDEN_PID" && echo "still alive""#;
    let (out, events) = run_with_events(
        dir.path(),
        &[
            "--idle",
            "2s",
            "--on-stall",
            hook,
            "--",
            "sh",
            "-c",
            "echo working; exec sleep 60",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    let pid = events[0]["pid"].as_u64().expect("started has the pid");
    let run = &stalled(&events)["on_stall"];
    assert_eq!(run["status"], "exit 0", "{run}");
    let output = run["output"].as_str().unwrap();
    assert!(
        output.contains(&format!("pid={pid} pgid={pid}\n")),
        "{output}"
    );
    assert!(output.contains(&format!("suspects={pid}\n")), "{output}");
    assert!(
        output.contains("stall=stallwarden: idle budget 2s exceeded"),
        "{output}"
    );
    assert!(
        output.contains("still alive\n"),
        "the hook ran after the stop: {output}"
    );
    // The stall line, then the hook's end, then the stop.
    let at = |needle: &str| {
        err.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in {err}"))
    };
    assert!(at("idle budget 2s exceeded") < at("on-stall command done"));
    assert!(at("on-stall command done") < at("stopping the command"));
}

// R8.14: a hook that hangs is cut at its bound, its whole process group
// killed, said in one line, and the stop goes on.
#[test]
fn a_hanging_on_stall_command_is_cut_at_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("hook.pid");
    let config = dir.path().join("stallwarden.toml");
    // From the config file, as a user would set it.
    std::fs::write(
        &config,
        format!(
            "[defaults]\non-stall = \"echo started; sleep 600 & echo $! > {}; wait\"\non-stall-timeout = \"1s\"\n",
            pidfile.display()
        ),
    )
    .unwrap();
    let (out, events) = run_with_events(
        dir.path(),
        &["--idle", "1s", "--", "sh", "-c", "exec sleep 60"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    let run = &stalled(&events)["on_stall"];
    assert_eq!(run["status"], "timed out after 1s (killed)", "{run}");
    assert_eq!(run["output"], "started\n");
    assert!(
        err.contains("stallwarden: on-stall command failed: timed out after 1s (killed)"),
        "{err}"
    );
    // Its background child went with its group.
    let hook_child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        common::wait::exits_within(hook_child as u32, common::BOUND),
        "the hook's child {hook_child} outlived its bound"
    );
}

// R8.14: a hook that fails says how; the stop is as without it.
#[test]
fn a_failing_on_stall_command_is_said_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (out, events) = run_with_events(
        dir.path(),
        &[
            "--idle",
            "1s",
            "--on-stall",
            "echo no luck >&2; exit 3",
            "--",
            "sleep",
            "60",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    let run = &stalled(&events)["on_stall"];
    assert_eq!(run["status"], "exit 3");
    assert_eq!(run["output"], "no luck\n");
    assert!(
        err.contains("stallwarden: on-stall command failed: exit 3 (8 bytes of output)"),
        "{err}"
    );
    assert_eq!(
        common::types(&events),
        ["started", "stalled", "cancelling", "finished"]
    );
}
