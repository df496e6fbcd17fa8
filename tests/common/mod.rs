//! Helpers shared by the end-to-end tests of the `stallguard` binary.
//! Each test file uses some of them, so the unused rest is allowed.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The built binary, run in `dir` (a fresh directory, so no
/// `./stallguard.toml` is picked up) with stdin closed.
pub fn stallguard(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stallguard"));
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

/// Waits for `child` with a bound, killing it if the bound passes: a hang
/// fails the test instead of stalling the suite.
pub fn wait_bounded(mut child: Child) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > BOUND {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "stallguard did not exit within {BOUND:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // A real process is being waited on.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `stallguard args` in `dir` to its end, within [`BOUND`].
pub fn run(dir: &Path, args: &[&str]) -> Output {
    let child = stallguard(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child)
}

/// What the run wrote to stderr.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
