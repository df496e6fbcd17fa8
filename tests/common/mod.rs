//! Helpers shared by the end-to-end tests of the `stallguard` binary.

use std::path::Path;
use std::process::{Command, Stdio};

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
