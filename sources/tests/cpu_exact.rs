//! The `cpu` signal is exact (R5.11): its first sample is taken at the
//! start, and a child that lives and exits between two samples counts
//! through its parent's reaped-children times. Real processes; the test
//! steps the tree through its stdin and waits on its stdout, never a sleep.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use stallwarden_sources::procs::{ProcTable, ProcessSampler};
use watchdog_core::ChildProbe;

#[test]
fn a_child_that_lived_between_two_samples_counts_through_its_parent() {
    // The shell waits for a line, runs a child that burns 300 ms of CPU
    // and exits, says "done", and waits again.
    let mut sh = Command::new("sh")
        .args([
            "-c",
            "read go; python3 -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass'; echo done; read stop",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = sh.id();
    let mut table = ProcTable::new();
    let first = table.sample(pid).unwrap();
    assert!(first.cpu_delta_ms.is_none());
    let mut stdin = sh.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let mut out = BufReader::new(sh.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done");
    let second = table.sample(pid).unwrap();
    assert!(
        second.children.is_empty(),
        "the child is gone: {:?}",
        second.children
    );
    let delta = second.cpu_delta_ms.unwrap();
    assert!(
        delta >= 250,
        "the child's 300 ms count through the shell's cutime: {delta} ms"
    );
    let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
    let _ = sh.wait();
}

#[test]
fn the_first_sample_is_taken_before_spawn_returns() {
    let mut sleep = Command::new("sleep").arg("30").spawn().unwrap();
    let sampler = ProcessSampler::spawn(std::process::id(), Duration::from_secs(60), None).unwrap();
    // No wait: the baseline exists at once, so CPU used before the start
    // is never taken for progress later.
    let children = sampler.children().expect("a first sample at the start");
    assert!(children.iter().any(|c| c.pid == sleep.id()));
    sleep.kill().unwrap();
    sleep.wait().unwrap();
}
