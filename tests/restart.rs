//! Restart with backoff (R8.15) on real processes: a worker that stalls
//! twice and then works runs to its end through two restarts with the
//! planned delays; restarts spent end the run with 124; a signal during a
//! backoff ends it at once; `list` and `describe` show the restarts. The
//! backoff schedule itself is a pure function tested in src/cli/restart.rs.
//! Budgets of 1-2 s, delays of a few hundred ms, generous bounds.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{events, stallwarden, stderr, types, wait_bounded, BOUND};
use serde_json::Value;

/// A worker that counts its starts in `count` and, for the first
/// `stalls` of them, prints one line and hangs; after that it prints
/// `then`'s output and runs `then`.
fn worker(dir: &std::path::Path, stalls: u32, then: &str) -> String {
    let count = dir.join("starts");
    format!(
        "n=$(( $(cat {c} 2>/dev/null || echo 0) + 1 )); echo $n > {c}; echo start $n; \
         if [ $n -le {stalls} ]; then exec sleep 600; fi; {then}",
        c = count.display()
    )
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

// R8.15: two stalls, two restarts with delays 300 ms then 600 ms (doubled),
// then the worker does its work and exits 0: the run exits 0.
#[test]
fn a_worker_that_stalls_twice_then_works_runs_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "1s", "--restart", "on-stall"])
        .args(["--restart-delay", "300ms", "--events"])
        .arg(&ev)
        .args(["--", "sh", "-c", &worker(dir.path(), 2, "echo done")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "start 1\nstart 2\nstart 3\ndone\n"
    );
    let events = events(&ev);
    assert_eq!(
        types(&events),
        [
            "started",
            "stalled",
            "cancelling",
            "finished",
            "started",
            "restarted",
            "stalled",
            "cancelling",
            "finished",
            "started",
            "restarted",
            "finished"
        ]
    );
    let restarts = of_type(&events, "restarted");
    assert_eq!(restarts[0]["restart"], 1);
    assert_eq!(restarts[0]["delay_ms"], 300);
    assert_eq!(restarts[1]["restart"], 2);
    assert_eq!(restarts[1]["delay_ms"], 600);
    let last_stall = restarts[0]["last_stall"].as_str().unwrap();
    assert!(
        last_stall.starts_with("idle budget 1s exceeded"),
        "{last_stall}"
    );
    // The last run finished by itself; the ones before were stopped.
    let finished = of_type(&events, "finished");
    assert_eq!(finished[2]["outcome"], "completed");
    assert_eq!(finished[0]["outcome"], "cancelled");
    // Each restart waited at least its delay after the run before ended
    // (a lower bound only: the machine may be slow, never fast).
    let at = |e: &Value| humantime::parse_rfc3339(e["at"].as_str().unwrap()).unwrap();
    let started = of_type(&events, "started");
    for (i, want) in [(0, 300), (1, 600)] {
        let gap = at(started[i + 1]).duration_since(at(finished[i])).unwrap();
        assert!(
            gap >= Duration::from_millis(want - 5),
            "restart {} came {gap:?} after the stop",
            i + 1
        );
    }
    assert!(
        err.contains("restarting the command in 300ms (restart 1 of 3)")
            && err.contains("restarting the command in 600ms (restart 2 of 3)"),
        "{err}"
    );
}

// R8.15: a worker that exits by itself after a restart ends the run with
// its own status.
#[test]
fn a_restarted_worker_that_fails_gives_its_own_status() {
    let dir = tempfile::tempdir().unwrap();
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "1s", "--restart", "on-stall"])
        .args(["--restart-delay", "100ms", "--"])
        .args(["sh", "-c", &worker(dir.path(), 1, "exit 3")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}

// R8.15: restarts spent, the stall ends the run as any stop: 124.
#[test]
fn restarts_spent_give_124() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let config = dir.path().join("stallwarden.toml");
    // From the config file, as a user would set it.
    std::fs::write(
        &config,
        "[defaults]\nrestart = \"on-stall\"\nrestart-delay = \"100ms\"\nmax-restarts = 1\n",
    )
    .unwrap();
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "1s", "--events"])
        .arg(&ev)
        .args(["--", "sh", "-c", &worker(dir.path(), 99, "true")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    let events = events(&ev);
    assert_eq!(of_type(&events, "started").len(), 2);
    assert_eq!(of_type(&events, "restarted").len(), 1);
    assert!(
        err.contains("stallwarden: not restarting: all 1 restarts are spent"),
        "{err}"
    );
}

// R8.15, R8.9: SIGTERM during a backoff of a minute ends the run at once,
// as it would have ended the command: 128 + 15.
#[test]
fn sigterm_during_a_backoff_ends_the_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = stallwarden(dir.path());
    cmd.args(["run", "--idle", "1s", "--restart", "on-stall"])
        .args(["--restart-delay", "1m", "--"])
        .args(["sh", "-c", &worker(dir.path(), 99, "true")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    common::with_default_signals(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let backoff = line.contains("restarting the command in 1m");
        seen.push(line);
        if backoff {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.contains("restarting")),
        "{seen:?}"
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let out = common::wait_within(child, BOUND);
    assert_eq!(out.status.code(), Some(143), "{rest:?}");
    assert!(
        rest.iter()
            .any(|l| l == "stallwarden: SIGTERM during the backoff: not restarting"),
        "{rest:?}"
    );
    // One run only: nothing started after the signal.
    let starts = std::fs::read_to_string(dir.path().join("starts")).unwrap();
    assert_eq!(starts.trim(), "1");
}

// R8.15: `list` and `describe` show the restart count and the last stall
// while the restarted run works.
#[test]
fn list_and_describe_show_the_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ctl.sock");
    let stop = dir.path().join("stop");
    // The second run works (a line every 200 ms) until `stop` appears.
    let then = format!(
        "while [ ! -e {} ]; do echo working; sleep 0.2; done",
        stop.display()
    );
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "2s", "--restart", "on-stall"])
        .args(["--restart-delay", "100ms", "--socket"])
        .arg(&socket)
        .args(["--", "sh", "-c", &worker(dir.path(), 1, &then)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait (bounded) for the restarted run's snapshot.
    let describe = || {
        let tasks = common::describe_json(dir.path(), &socket)?;
        tasks[0].get("restarts").is_some().then_some(tasks)
    };
    let snap = common::wait::until(pid, BOUND, Duration::from_millis(100), describe)
        .expect("a snapshot with restarts");
    assert_eq!(snap[0]["restarts"], 1);
    assert!(snap[0]["last_stall"]
        .as_str()
        .unwrap()
        .starts_with("idle budget 2s exceeded"));
    let text = stallwarden(dir.path())
        .args(["describe", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("  restarts       1\n"), "{text}");
    assert!(
        text.contains("  last stall     idle budget 2s exceeded"),
        "{text}"
    );
    let list = stallwarden(dir.path())
        .args(["list", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("working (restart 1)"), "{list}");
    std::fs::write(&stop, "").unwrap();
    let out = wait_bounded(child);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

// R8.15, R8.9: a signal that reaches the command while the stall stops it
// (in its grace period) means "end", not "bring it back": no restart.
#[test]
fn a_signal_during_the_stop_is_not_answered_with_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // Ignores SIGTERM, so the stop waits out the grace; SIGINT ends it.
    let then = "trap '' TERM; while :; do sleep 0.1; done";
    let mut cmd = stallwarden(dir.path());
    cmd.args([
        "run",
        "--idle",
        "1s",
        "--grace",
        "20s",
        "--restart",
        "on-stall",
    ])
    .args(["--restart-delay", "100ms", "--"])
    .args(["sh", "-c", &worker(dir.path(), 0, then)])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    common::with_default_signals(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        if line.unwrap().contains("stopping the command") {
            break;
        }
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let out = common::wait_within(child, BOUND);
    assert_eq!(out.status.code(), Some(124), "{rest:?}");
    assert!(!rest.iter().any(|l| l.contains("restarting")), "{rest:?}");
    let starts = std::fs::read_to_string(dir.path().join("starts")).unwrap();
    assert_eq!(starts.trim(), "1");
}
