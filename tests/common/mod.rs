//! Helpers shared by the end-to-end tests of the `stallwarden` binary.
//! Each test file uses some of them, so the unused rest is allowed.
#![allow(dead_code)]

pub mod agents;
pub mod wait;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The built binary, run in `dir` (a fresh directory, so no
/// `./stallwarden.toml` is picked up) with stdin closed.
pub fn stallwarden(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stallwarden"));
    c.current_dir(dir).stdin(Stdio::null());
    c
}

/// The `--events` lines written to `path`, one JSON object each (R8.3);
/// none if the file was never written.
pub fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The `type` of each event, in order.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

/// Generous bound for a run that should take a few seconds.
pub const BOUND: Duration = Duration::from_secs(30);

/// Waits for `child` within [`BOUND`]; see [`wait_within`].
pub fn wait_bounded(child: Child) -> Output {
    wait_within(child, BOUND)
}

/// Waits for `child` (stallwarden) within `bound`; see [`finish_within`].
pub fn wait_within(child: Child, bound: Duration) -> Output {
    finish_within(child, bound, "stallwarden")
}

/// Waits for `child` (`what`, for the message) within `bound`, reading its
/// pipes all along (a big output must not block it); kills it if the bound
/// passes: a hang fails the test instead of stalling the suite.
pub fn finish_within(child: Child, bound: Duration, what: &str) -> Output {
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(bound) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) on the pid of our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{what} did not finish within {bound:?}");
        }
    }
}

/// Runs `stallwarden args` in `dir` to its end, within [`BOUND`].
pub fn run(dir: &Path, args: &[&str]) -> Output {
    let child = stallwarden(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child)
}

/// Reads a command's `pids A B ...` line from `out`, how the end-to-end
/// tests' scripts tell the pids they started; returns them in order.
pub fn read_pids(out: &mut impl std::io::BufRead) -> Vec<u32> {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.strip_prefix("pids ")
        .unwrap_or_else(|| panic!("no pids line, got {line:?}"))
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// Starts `cmd` with no signal ignored, whatever this test process
/// inherited. A run under `nohup` (HUP ignored) or as a background job of
/// a shell without job control (INT and QUIT ignored) hands its ignores
/// down, and a signal ignored at start stays ignored under stallwarden
/// (R8.9, as under `timeout` since 9.9): a test's signal, or its Ctrl-C on
/// a pty, would then never reach the command, and the wrapper would wait
/// out the command's budget. A local `nohup bash .ci/run` failed so.
pub fn with_default_signals(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let last = libc::SIGRTMAX();
    // SAFETY: between fork and exec the closure only calls signal(2),
    // which is async-signal-safe; KILL and STOP refuse it harmlessly.
    unsafe {
        cmd.pre_exec(move || {
            for sig in 1..=last {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
}

/// SIGKILLs the pids it holds on drop, so a failed test leaves no
/// process behind.
pub struct KillOnDrop(pub Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if pid > 1 {
                // SAFETY: plain syscall on a pid this test learned.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// The tasks a running `stallwarden run --socket SOCKET` shows through
/// `describe --json`; `None` while it does not answer with any.
pub fn describe_json(dir: &Path, socket: &Path) -> Option<Vec<Value>> {
    let out = stallwarden(dir)
        .args(["describe", "--json", "--socket"])
        .arg(socket)
        .output()
        .ok()?;
    match serde_json::from_slice(&out.stdout).ok()? {
        Value::Array(tasks) if !tasks.is_empty() => Some(tasks),
        _ => None,
    }
}

/// What the run wrote to stderr.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
