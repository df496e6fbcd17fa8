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

/// Whether `tool` is on PATH; says SKIPPED (with `why`) when it is not.
fn have(tool: &str, why: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(tool).is_file()));
    if !found {
        eprintln!("SKIPPED: {tool} is not installed ({why})");
    }
    found
}

/// The report line of a stack, `stallwarden: stack of NAME[PID] (TOOL): ...`.
fn stack_line(err: &str) -> &str {
    err.lines()
        .find(|l| l.starts_with("stallwarden: stack of"))
        .unwrap_or_else(|| panic!("no stack line: {err}"))
}

// R8.14: a Python program stuck in socket.recv on a loopback server that
// never answers: the stall report names the file and line of the recv
// call (py-spy), and the event holds the whole dump.
#[test]
fn a_python_stall_names_the_line_of_its_recv() {
    if !have("py-spy", "pip install py-spy") || !have("python3", "Debian's python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let script = dir.path().join("client.py");
    std::fs::write(
        &script,
        format!(
            "import socket\n\
             \n\
             def wait_for_reply(sock):\n\
             \x20   return sock.recv(1)\n\
             \n\
             sock = socket.create_connection(('127.0.0.1', {port}))\n\
             print('connected', flush=True)\n\
             wait_for_reply(sock)\n"
        ),
    )
    .unwrap();
    let (out, events) = run_with_events(
        dir.path(),
        &["--idle", "2s", "--", "python3", script.to_str().unwrap()],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    let line = stack_line(&err);
    let want = format!("(py-spy): wait_for_reply ({}:4)", script.display());
    assert!(line.contains(&want), "{line}");
    let stacks = stalled(&events)["stacks"]
        .as_array()
        .expect("stacks")
        .clone();
    assert_eq!(stacks[0]["source"], "py-spy");
    assert_eq!(stacks[0]["status"], "ok");
    assert!(
        stacks[0]["output"].as_str().unwrap().contains("Thread "),
        "{}",
        stacks[0]
    );
    // The stack came before the stop.
    let at = |needle: &str| err.find(needle).unwrap();
    assert!(at("stallwarden: stack of") < at("stopping the command"));
    drop(server);
}

// R8.14: a C program stuck in read is named by its function (eu-stack, or
// gdb where eu-stack is not installed), the C file compiled here.
#[test]
fn a_native_stall_names_its_function() {
    if !have("cc", "a C compiler") || !(have("eu-stack", "elfutils") || have("gdb", "gdb")) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("stuck.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <unistd.h>\n\
         static int wait_for_input(int fd) { char b; return (int)read(fd, &b, 1); }\n\
         int main(void) { int p[2]; if (pipe(p)) return 1; puts(\"waiting\"); fflush(stdout);\n\
         return wait_for_input(p[0]); }\n",
    )
    .unwrap();
    let exe = dir.path().join("stuck");
    let cc = std::process::Command::new("cc")
        .args(["-g", "-O0", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let (out, events) = run_with_events(dir.path(), &["--idle", "1s", "--", exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    let line = stack_line(&err);
    assert!(
        line.contains("): wait_for_input (") && line.contains("stuck.c:3)"),
        "{line}"
    );
    let stacks = &stalled(&events)["stacks"];
    assert_eq!(
        stacks[0]["frames"][0].as_str().unwrap().split(' ').next(),
        Some("wait_for_input")
    );
}

// R8.14: no stack tool on PATH: the report says so in a word, and the stop
// comes on time (no wait for a tool that is not there).
#[test]
fn a_missing_stack_tool_is_said_and_the_stall_is_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("no-tools");
    std::fs::create_dir(&empty).unwrap();
    let ev = dir.path().join("events.jsonl");
    let child = stallwarden(dir.path())
        .env("PATH", &empty)
        .args(["run", "--idle", "1s", "--events"])
        .arg(&ev)
        .args(["--", "/bin/sleep", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("stallwarden: no stack of sleep[")
                && l.ends_with("]: eu-stack and gdb not installed")),
        "{err}"
    );
    let events = events(&ev);
    let stalled = stalled(&events);
    assert_eq!(
        stalled["stacks"][0]["status"],
        "eu-stack and gdb not installed"
    );
    // The command (which dies at the SIGTERM) ended soon after the stall:
    // a generous bound on a real run, far below a tool's 3 s.
    let finished = events.iter().find(|e| e["type"] == "finished").unwrap();
    let gap = finished["elapsed_ms"].as_u64().unwrap() - stalled["elapsed_ms"].as_u64().unwrap();
    assert!(gap < 2_500, "the command ended {gap} ms after the stall");
}

// R8.14: `--no-stacks` takes none.
#[test]
fn no_stacks_takes_none() {
    let dir = tempfile::tempdir().unwrap();
    let (out, events) = run_with_events(
        dir.path(),
        &["--idle", "1s", "--no-stacks", "--", "sleep", "60"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(stalled(&events).get("stacks").is_none());
    assert!(!err.contains("stack"), "{err}");
}

// R8.14: `describe` shows what was taken at the latest stall: the
// on-stall run (and the stacks) in its text, all of it in --json.
#[test]
fn describe_shows_the_latest_stall_report() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ctl.sock");
    // Two strikes: the first stall reports, the second stops.
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "2s", "--terminate-after", "2"])
        .args(["--on-stall", "echo hi", "--socket"])
        .arg(&socket)
        .args(["--", "sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let describe = || {
        let tasks = common::describe_json(dir.path(), &socket)?;
        tasks[0].get("stall_report").is_some().then_some(tasks)
    };
    let snap = common::wait::until(
        pid,
        common::BOUND,
        std::time::Duration::from_millis(100),
        describe,
    )
    .expect("a snapshot with the stall's report");
    assert_eq!(snap[0]["stall_report"]["on_stall"]["output"], "hi\n");
    assert_eq!(snap[0]["stall_report"]["on_stall"]["status"], "exit 0");
    let text = stallwarden(dir.path())
        .args(["describe", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    // The run may have reached its second strike meanwhile: then the
    // socket is gone and there is nothing to read.
    if !text.is_empty() {
        assert!(
            text.contains("  on-stall       exit 0 (3 bytes of output)\n"),
            "{text}"
        );
    }
    let out = wait_bounded(child);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
}
