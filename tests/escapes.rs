//! Nothing escapes, nothing silent (R8.5, R8.6, R8.7), on the real binary
//! with real processes: a `setsid` daemon, a double fork, a `tee` behind
//! bash process substitution, a fifo writer. Each test learns the pids it
//! checks from files the command writes (never by name), and afterwards
//! checks that none of them is left running. Every wait is bounded.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{events, run, stallwarden, stderr, types, wait_bounded, BOUND};

/// The pid the command wrote to `file` in `dir`.
fn pid_in(dir: &Path, file: &str) -> u32 {
    let text = std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("the command did not write {file}: {e}"));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{file} holds {text:?}: {e}"))
}

/// True while `pid` is a live (not zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Asserts `pid` is gone, allowing it a bounded moment to exit (waited on
/// its pidfd, which is ready once it has exited, reaped or not); kills it
/// if not, so a failing test leaves nothing behind either.
fn assert_gone(pid: u32, what: &str) {
    if !common::wait::exits_within(pid, Duration::from_secs(5)) && alive(pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        panic!("{what} (pid {pid}) outlived stallwarden");
    }
}

/// The processes an event names, as (pid, name).
fn named(event: &Value) -> Vec<(u64, String)> {
    event["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("no processes in {event}"))
        .iter()
        .map(|p| {
            (
                p["pid"].as_u64().unwrap(),
                p["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn event<'a>(events: &'a [Value], ty: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} event in {:?}", types(events)))
}

/// Runs `stallwarden run --events FILE ARGS` in `dir`; returns how it
/// ended and the events it wrote.
fn run_with_events(dir: &Path, args: &[&str]) -> (Output, Vec<Value>) {
    let ev = dir.join("events.jsonl");
    let mut all = vec!["run", "--events", ev.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = run(dir, &all);
    (out, events(&ev))
}

/// Waits inside the command until `file` exists and is not empty.
fn await_file(file: &str) -> String {
    format!("while [ ! -s {file} ]; do sleep 0.02; done")
}

// R8.5, R8.6: a `setsid` daemon keeps the command's stdout open after it
// exits. stallwarden waits leak-timeout, names it as leaked (stderr and the
// `leaked` event), stops it as a leftover, and exits with the command's own
// status.
#[test]
fn setsid_daemon_holding_stdout_is_named_leaked_stopped_and_status_kept() {
    let dir = tempfile::tempdir().unwrap();
    let script = "setsid sleep 60 & echo $! > daemon.pid; echo started; exit 3";
    let (out, evs) = run_with_events(dir.path(), &["--", "sh", "-c", script]);
    let daemon = pid_in(dir.path(), "daemon.pid");
    assert_gone(daemon, "the setsid daemon");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "started\n");
    let err = stderr(&out);
    assert!(
        err.contains(&format!("still held open by sleep (pid {daemon})")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "stopping what the command left running: sleep (pid {daemon})"
        )),
        "{err}"
    );
    assert_eq!(
        named(event(&evs, "leaked")),
        [(u64::from(daemon), "sleep".into())]
    );
    let leftover = event(&evs, "leftover");
    assert_eq!(leftover["action"], "killed");
    assert!(named(leftover).contains(&(u64::from(daemon), "sleep".into())));
    let t = types(&evs);
    assert_eq!(t.last().map(String::as_str), Some("finished"), "{t:?}");
    assert_eq!(evs.last().unwrap()["exit_code"], 3);
}

// R8.6: a double-forked worker in a session of its own is silent; the stall
// cancels the command and the SIGTERM reaches the escaped worker too, not
// only the command's group. `on-leftover = keep` proves it was the cancel,
// not the cleanup afterwards, that stopped it.
#[test]
fn cancel_reaches_a_double_forked_worker_in_its_own_session() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "(setsid sh -c 'echo $$ > worker.pid; exec sleep 60' > /dev/null 2>&1 &); {}; exec sleep 60",
        await_file("worker.pid")
    );
    let (out, evs) = run_with_events(
        dir.path(),
        &[
            "--idle",
            "1s",
            "--grace",
            "1s",
            "--on-leftover",
            "keep",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    let worker = pid_in(dir.path(), "worker.pid");
    assert_gone(worker, "the double-forked worker");
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    let t = types(&evs);
    assert!(t.contains(&"stalled".to_owned()), "{t:?}");
    assert!(!t.contains(&"leftover".to_owned()), "{t:?}");
}

// R8.6: what the command leaves behind in another session, holding no pipe
// of ours, is still stopped after it ends (`on-leftover = kill`, the
// default), named on stderr and in `leftover`; its zombie is reaped by us.
#[test]
fn escaped_leftover_without_our_pipes_is_stopped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "(setsid sh -c 'echo $$ > worker.pid; exec sleep 60' > /dev/null 2>&1 &); {}",
        await_file("worker.pid")
    );
    let (out, evs) = run_with_events(dir.path(), &["--", "sh", "-c", &script]);
    let worker = pid_in(dir.path(), "worker.pid");
    assert_gone(worker, "the escaped worker");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!types(&evs).contains(&"leaked".to_owned()));
    let leftover = event(&evs, "leftover");
    assert_eq!(leftover["action"], "killed");
    assert_eq!(named(leftover), [(u64::from(worker), "sleep".into())]);
    assert!(stderr(&out).contains(&format!("sleep (pid {worker})")));
}

// R8.6: `on-leftover = keep` leaves the escaped process running but names
// it; the test stops it itself.
#[test]
fn on_leftover_keep_names_and_leaves_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "(setsid sh -c 'echo $$ > worker.pid; exec sleep 60' > /dev/null 2>&1 &); {}",
        await_file("worker.pid")
    );
    let (out, evs) = run_with_events(
        dir.path(),
        &["--on-leftover", "keep", "--", "sh", "-c", &script],
    );
    let worker = pid_in(dir.path(), "worker.pid");
    let still = alive(worker);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(still, "keep must leave pid {worker} running");
    assert_gone(worker, "the kept worker");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let leftover = event(&evs, "leftover").clone();
    assert_eq!(leftover["action"], "kept");
    assert_eq!(named(&leftover), [(u64::from(worker), "sleep".into())]);
    assert!(stderr(&out).contains("on-leftover = keep"));
}

// R8.5: a `tee` behind bash process substitution holds our stdout while a
// background job keeps its input open; the output still passes through, the
// tee is named as leaked, and both it and the job are stopped.
#[test]
fn tee_behind_process_substitution_is_leaked_and_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let script = "exec > >(exec tee log.txt); echo $! > tee.pid; \
                  (exec sleep 60) & echo $! > job.pid; echo hello";
    let (out, evs) = run_with_events(
        dir.path(),
        &["--leak-timeout", "500ms", "--", "bash", "-c", script],
    );
    let tee = pid_in(dir.path(), "tee.pid");
    let job = pid_in(dir.path(), "job.pid");
    assert_gone(tee, "tee");
    assert_gone(job, "the background job");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    assert!(named(event(&evs, "leaked")).contains(&(u64::from(tee), "tee".into())));
    let left: Vec<u64> = named(event(&evs, "leftover")).iter().map(|p| p.0).collect();
    assert!(
        left.contains(&u64::from(tee)) && left.contains(&u64::from(job)),
        "{left:?}"
    );
}

// R8.5, R8.6: a writer blocked opening a fifo nobody reads, in a session of
// its own and holding our stderr, neither hangs stallwarden nor survives it.
#[test]
fn fifo_writer_blocked_in_open_is_leaked_and_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "mkfifo f; setsid sh -c 'echo $$ > writer.pid; exec echo data > f' > /dev/null & {}",
        await_file("writer.pid")
    );
    let (out, evs) = run_with_events(dir.path(), &["--", "sh", "-c", &script]);
    let writer = pid_in(dir.path(), "writer.pid");
    assert_gone(writer, "the fifo writer");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(named(event(&evs, "leaked"))
        .iter()
        .any(|p| p.0 == u64::from(writer)));
    assert!(named(event(&evs, "leftover"))
        .iter()
        .any(|p| p.0 == u64::from(writer)));
}

// R8.7, R2.9: an EXTEND_TIMEOUT_USEC past max-deadline is refused out loud:
// one stderr line at the default verbosity and an `extension_refused` event
// with the requested and the allowed deadline.
#[test]
fn refused_extension_is_a_line_and_an_event() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\ndeadline = \"30s\"\nmax-deadline = \"40s\"\n",
    )
    .unwrap();
    let script = "import os, socket\n\
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
        s.sendto(b'EXTEND_TIMEOUT_USEC=3600000000', os.environ['NOTIFY_SOCKET'])\n\
        s.sendto(b'READY=1', os.environ['NOTIFY_SOCKET'])\n\
        import time; time.sleep(0.5)\n";
    let (out, evs) = run_with_events(dir.path(), &["--", "python3", "-c", script]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("extension refused"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("max-deadline 40s"), "{err}");
    let refused = event(&evs, "extension_refused");
    assert_eq!(refused["allowed_ms"], 40_000);
    assert!(
        refused["requested_ms"].as_u64().unwrap() >= 3_600_000,
        "{refused}"
    );
}

// R8.7: -v installs a tracing subscriber on stderr; the refusal the notify
// source logs as a warning shows there, and not without -v.
#[test]
fn dash_v_shows_what_sources_log() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\ndeadline = \"30s\"\nmax-deadline = \"40s\"\n",
    )
    .unwrap();
    let script = "import os, socket, time\n\
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
        s.sendto(b'EXTEND_TIMEOUT_USEC=3600000000', os.environ['NOTIFY_SOCKET'])\n\
        time.sleep(0.5)\n";
    let quiet = run(dir.path(), &["run", "--", "python3", "-c", script]);
    let loud = run(dir.path(), &["run", "-v", "--", "python3", "-c", script]);
    assert!(
        !stderr(&quiet).contains("EXTEND_TIMEOUT_USEC refused"),
        "{}",
        stderr(&quiet)
    );
    assert!(
        stderr(&loud).contains("EXTEND_TIMEOUT_USEC refused"),
        "{}",
        stderr(&loud)
    );
}

// R8.7: malformed sd_notify datagrams are counted and the count shows under
// -v at the end of the run.
#[test]
fn malformed_datagram_count_shows_under_dash_v() {
    let dir = tempfile::tempdir().unwrap();
    let script = "import os, socket, time\n\
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
        for d in [b'\\xff\\xfe', b'', b'WATCHDOG', b'WATCHDOG=1']:\n    s.sendto(d, os.environ['NOTIFY_SOCKET'])\n\
        time.sleep(0.5)\n";
    let out = run(dir.path(), &["run", "-v", "--", "python3", "-c", script]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains("malformed datagrams ignored"))
        .unwrap_or_else(|| panic!("no malformed count under -v: {err}"));
    assert!(line.contains("datagrams=4"), "{line}");
    assert!(line.contains("malformed=3"), "{line}");
    // R10.6: by reason, from the task, under the `notify.` keys.
    let line = err
        .lines()
        .find(|l| l.contains("inputs refused"))
        .unwrap_or_else(|| panic!("no refusal summary under -v: {err}"));
    assert!(
        line.contains("notify.empty 1, notify.no_assignment 1, notify.not_text 1"),
        "{line}"
    );
}

// R8.5, R8.6, R7.2: `leak-timeout` and `on-leftover` are config keys too
// (flags override them); a wrong value is refused with file, line and what
// was expected, and the command never starts.
#[test]
fn leftover_and_leak_keys_come_from_the_config_and_bad_values_are_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\nleak-timeout = \"200ms\"\non-leftover = \"keep\"\n",
    )
    .unwrap();
    let script = format!(
        "(setsid sh -c 'echo $$ > worker.pid; exec sleep 60' > /dev/null 2>&1 &); {}",
        await_file("worker.pid")
    );
    let (out, evs) = run_with_events(dir.path(), &["--", "sh", "-c", &script]);
    let worker = pid_in(dir.path(), "worker.pid");
    let kept = alive(worker);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert_gone(worker, "the kept worker");
    assert!(
        kept,
        "on-leftover = \"keep\" from the config was not applied"
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(event(&evs, "leftover")["action"], "kept");

    let check = run(dir.path(), &["check"]);
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        text.contains("leak-timeout") && text.contains("200ms"),
        "{text}"
    );
    assert!(
        text.contains("on-leftover") && text.contains("keep"),
        "{text}"
    );

    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\non-leftover = \"maybe\"\n",
    )
    .unwrap();
    let bad = run(dir.path(), &["run", "--", "sh", "-c", "touch ran"]);
    assert_eq!(bad.status.code(), Some(125));
    let err = stderr(&bad);
    assert!(err.contains("stallwarden.toml:2"), "{err}");
    assert!(err.contains("on-leftover") && err.contains("keep"), "{err}");
    assert!(!dir.path().join("ran").exists());
}

// R8.6, R5.5: a silent worker that escaped the command's group is sampled
// (stallwarden is its parent now) and named among the stall's suspects, on
// stderr and in the `stalled` event's children.
#[test]
fn a_stall_names_an_escaped_silent_worker_among_the_suspects() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "(setsid sh -c 'echo $$ > worker.pid; exec sleep 60' > /dev/null 2>&1 &); {}; exec sleep 60",
        await_file("worker.pid")
    );
    // Two strikes: samples come every 1.5 s, and a child is a suspect once
    // two samples show it idle, so by the second stall (6 s) it is named
    // even on a loaded machine.
    let (out, evs) = run_with_events(
        dir.path(),
        &[
            "--idle",
            "3s",
            "--terminate-after",
            "2",
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    let worker = pid_in(dir.path(), "worker.pid");
    assert_gone(worker, "the escaped worker");
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    let named_in_a_stall = evs.iter().filter(|e| e["type"] == "stalled").any(|e| {
        e["children"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["pid"] == u64::from(worker) && c["name"] == "sleep")
        })
    });
    assert!(named_in_a_stall, "{evs:?}");
    assert!(
        stderr(&out).contains(&format!("sleep[{worker}]")),
        "{}",
        stderr(&out)
    );
}

// R8.7: an events file that cannot be written (a full disk: /dev/full) is
// said once on stderr at the default verbosity; the command still runs and
// its status is kept; -v shows every failure.
#[test]
fn a_failing_events_sink_is_said_once_out_loud() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "--events",
        "/dev/full",
        "--",
        "sh",
        "-c",
        "echo hi; exit 5",
    ];
    let out = run(dir.path(), &args);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    let err = stderr(&out);
    assert_eq!(err.matches("events are being lost").count(), 1, "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let loud = run(dir.path(), &[&["-v"][..], &args].concat());
    assert!(
        stderr(&loud).matches("sink failed").count() >= 2,
        "{}",
        stderr(&loud)
    );
}

// R8.7: malformed sd_notify datagrams are counted on the task, so
// `describe` shows them (by reason) while the command runs.
#[test]
fn describe_shows_malformed_datagram_counts() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sg.sock");
    let script = "import os, socket, time\n\
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
        for d in [b'WATCHDOG', b'WATCHDOG=2', b'WATCHDOG=2']:\n    s.sendto(d, os.environ['NOTIFY_SOCKET'])\n\
        open('sent', 'w').close()\n\
        while not os.path.exists('stop'): time.sleep(0.05)\n";
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "1m", "--socket", sock.to_str().unwrap()])
        .args(["--", "python3", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Looks at the control socket until the counts show, between looks
    // waiting on stallwarden's pidfd (it ends, the looks end).
    let mut last = String::new();
    let shown = common::wait::until(child.id(), BOUND, Duration::from_millis(50), || {
        let out = run(
            dir.path(),
            &["describe", "--socket", sock.to_str().unwrap()],
        );
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        (dir.path().join("sent").exists() && last.contains("notify.bad_value 2"))
            .then(|| last.clone())
    });
    let Some(text) = shown else {
        std::fs::write(dir.path().join("stop"), "").unwrap();
        panic!("describe never showed the counts: {last}");
    };
    std::fs::write(dir.path().join("stop"), "").unwrap();
    let out = wait_bounded(child);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = text.lines().find(|l| l.contains("refused")).unwrap();
    assert!(line.contains("notify.no_assignment 1"), "{line}");
    assert!(line.contains("notify.bad_value 2"), "{line}");
}
