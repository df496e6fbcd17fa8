//! R8.9, R8.6: a signal that reaches stallwarden after the command exited
//! but before the waiter's news of the exit did belongs to the aftermath:
//! it ends the leftover grace at once, as one sent a moment later would.
//! Forwarded to the command's group instead (the command being gone), it
//! would reach only the leftovers, which here ignore it, and stallwarden
//! would wait out the whole grace.
//!
//! The window is real but short (a busy CI machine once hit it in
//! `against_timeout::r8_9_a_signal_ends_the_leftover_grace_at_once`); the
//! hidden `slow-waiter` fail point widens it to 3 s so that this test hits
//! it every time: the test sends SIGTERM once the command is a zombie.

use std::io::BufReader;
use std::process::Stdio;
use std::time::Duration;

mod common;
use common::{events, stallwarden, types, wait::exits_within, KillOnDrop};

/// Starts a child that ignores SIGTERM, with no hold on the pipes, tells
/// its pid and the command's, and exits 0.
const SCRIPT: &str = "(trap '' TERM; exec sleep 60) >/dev/null 2>&1 & echo \"pids $! $$\"; exit 0";

#[test]
fn r8_9_a_signal_between_the_exit_and_the_news_of_it_ends_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let mut child = stallwarden(dir.path())
        .env("STALLWARDEN_TEST_FAIL", "slow-waiter")
        .args(["run", "--events", ev.to_str().unwrap(), "--grace", "1h"])
        .args(["--", "sh", "-c", SCRIPT])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pids = common::read_pids(&mut BufReader::new(child.stdout.as_mut().unwrap()));
    let (leftover, command) = (pids[0], pids[1]);
    let _cleanup = KillOnDrop(vec![leftover]);

    // The command has exited (a zombie the waiter has not looked at yet).
    assert!(exits_within(command, common::BOUND), "the command runs on");
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);

    let out = common::wait_bounded(child);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("SIGTERM after the command exited: not waiting any longer"),
        "{err}"
    );
    assert!(
        exits_within(leftover, Duration::from_secs(2)),
        "the leftover was not killed: {err}"
    );
    let evs = events(&ev);
    let left = evs.iter().find(|e| e["type"] == "leftover");
    let left = left.unwrap_or_else(|| panic!("no leftover in {:?}", types(&evs)));
    assert_eq!(left["action"], "killed", "{left}");
    let last = evs.last().unwrap();
    assert_eq!(last["outcome"], "completed", "{last}");
    assert_eq!(last["exit_code"], 0, "{last}");
}
