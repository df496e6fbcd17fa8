//! Why it is silent (R8.13, R3.1): the stall line and the `stalled` event
//! name, for each suspect, what it is blocked on, from a fresh look at the
//! task's tree taken at the verdict, the command itself included. Real
//! commands, real sockets on loopback, real FIFOs; budgets of 2 s.

mod common;

use std::net::TcpListener;
use std::process::Stdio;

use common::{events, stallwarden, stderr, wait_bounded};
use serde_json::Value;

/// Runs `cmd` under stallwarden with a 2 s idle budget and events to a
/// file; returns the stall line and the `stalled` event.
fn stall_of(dir: &std::path::Path, cmd: &[&str]) -> (String, Value) {
    let ev = dir.join("events.jsonl");
    let child = stallwarden(dir)
        .args(["run", "--idle", "2s", "--events"])
        .arg(&ev)
        .arg("--")
        .args(cmd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains("budget") && l.contains("exceeded"))
        .unwrap_or_else(|| panic!("no stall line: {err}"))
        .to_owned();
    let stalled = events(&ev)
        .into_iter()
        .find(|e| e["type"] == "stalled")
        .expect("a stalled event");
    (line, stalled)
}

fn blocked_of<'a>(stalled: &'a Value, name: &str) -> Vec<&'a str> {
    stalled["children"]
        .as_array()
        .expect("children in the stalled event")
        .iter()
        .filter(|c| c["name"] == name)
        .filter_map(|c| c["blocked_on"].as_str())
        .collect()
}

#[test]
fn a_command_with_no_children_stuck_in_recv_is_its_own_suspect() {
    let dir = tempfile::tempdir().unwrap();
    // The server accepts nothing and sends nothing: the connection sits in
    // the backlog, established, silent (a dead stream).
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let script =
        format!("import socket; s = socket.create_connection(('127.0.0.1', {port})); s.recv(1)");
    let (line, stalled) = stall_of(dir.path(), &["python3", "-c", &script]);
    assert!(!line.contains("suspects: none"), "{line}");
    let want = format!("-> 127.0.0.1:{port} ESTABLISHED");
    assert!(
        line.contains("python3[")
            && line.contains(": reading TCP 127.0.0.1:")
            && line.contains(&want),
        "{line}"
    );
    let b = blocked_of(&stalled, "python3");
    assert!(b.iter().any(|b| b.contains(&want)), "{stalled}");
    drop(server);
}

#[test]
fn a_reader_of_a_fifo_nobody_writes_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("feed");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let (line, _) = stall_of(dir.path(), &["cat", fifo.to_str().unwrap()]);
    assert!(
        line.contains(&format!(
            "opening the FIFO {}, which no process has open at the other end",
            fifo.display()
        )),
        "{line}"
    );
}

#[test]
fn a_shell_waiting_on_its_child_and_a_pipe_reader_are_both_named() {
    let dir = tempfile::tempdir().unwrap();
    let (line, stalled) = stall_of(dir.path(), &["sh", "-c", "sleep 30 | cat; true"]);
    assert!(line.contains(": waiting for child sleep["), "{line}");
    assert!(
        line.contains(": reading a pipe written by sleep["),
        "{line}"
    );
    assert!(line.contains(": sleeping (nanosleep)"), "{line}");
    assert!(
        blocked_of(&stalled, "cat")
            .iter()
            .any(|b| b.starts_with("reading a pipe written by sleep[")),
        "{stalled}"
    );
}

#[test]
fn a_busy_silent_command_is_named_not_none() {
    let dir = tempfile::tempdir().unwrap();
    let (line, _) = stall_of(dir.path(), &["sh", "-c", "while :; do :; done"]);
    assert!(!line.contains("suspects: none"), "{line}");
    assert!(line.contains("suspects: sh["), "{line}");
}

#[test]
fn a_flock_waiter_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock");
    let held = std::fs::File::create(&path).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    let (line, _) = stall_of(dir.path(), &["flock", path.to_str().unwrap(), "true"]);
    assert!(
        line.contains(&format!(
            ": waiting for a lock (flock) on the file {}",
            path.display()
        )),
        "{line}"
    );
}
