//! Runs a command that ignores SIGTERM under a guard with a process sink:
//! the guard stalls it, sends SIGTERM to its process group, and after the
//! grace period SIGKILL, then confirms the group is gone (R3.5, R6.4).
//!
//! `cargo run --example process_kill`

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::time::Duration;

use stallwarden_sinks::process::{GroupSignal, ProcessSink};
use watchdog_core::{Guard, Outcome, Profile};

fn main() {
    // Its own process group, so the group can be signalled as a whole.
    let mut child = Command::new("sh")
        .args(["-c", "trap '' TERM; echo 'ignoring SIGTERM'; sleep 30"])
        .process_group(0)
        .spawn()
        .expect("spawn sh");
    let procs = ProcessSink::new();
    let guard = Guard::builder().sink(procs.clone()).build();
    let profile = Profile::default()
        .idle(Duration::from_millis(500))
        .grace_period(Duration::from_millis(500))
        .heartbeat_interval(None);
    let task = guard
        .start_process("stubborn", profile, child.id())
        .expect("start task");

    // The runner's job: wait on (reap) the child, then settle the task.
    let status = child.wait().expect("wait");
    task.finish(Outcome::Cancelled, status.code(), status.signal())
        .expect("finish");
    println!("command ended: {status}");

    let _ = procs.wait_for(|r| r.signal == GroupSignal::Kill, Duration::from_secs(10));
    for report in procs.reports() {
        println!("{report}");
    }
}
