//! The real agent CLIs `.ci/run` installs (npm packages in
//! `target/agent-clis`, or the directory `STALLWARDEN_AGENT_CLIS` names) and
//! the scripted model server they are run against (tests/agent_mock.py,
//! on 127.0.0.1 only).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long the mock may take to start listening.
const START_BOUND: Duration = Duration::from_secs(60);

/// The installed CLI `name` (`claude`, `codex`, `gemini`), or why a test
/// of it is skipped: it is not installed, or `python3` (for the mock) is
/// not on PATH.
pub fn cli_bin(name: &str) -> Result<PathBuf, String> {
    let dir = std::env::var_os("STALLWARDEN_AGENT_CLIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/agent-clis"));
    let bin = dir.join("node_modules/.bin").join(name);
    if !bin.exists() {
        return Err(format!(
            "{name} is not installed at {} (`.ci/run` installs it with npm)",
            bin.display()
        ));
    }
    if Command::new("python3")
        .arg("--version")
        .output()
        .map_or(true, |o| !o.status.success())
    {
        return Err("python3 (for tests/agent_mock.py) is not on PATH".into());
    }
    Ok(bin)
}

/// The mock model server, killed (by its own pid) when dropped.
pub struct Mock {
    child: Child,
    /// The loopback port it listens on.
    pub port: u16,
    /// Its stderr: one line per request it answered.
    log: tempfile::NamedTempFile,
}

impl Mock {
    /// Starts tests/agent_mock.py with `script` and waits for its port.
    pub fn start(script: &str) -> Mock {
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agent_mock.py"))
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("python3 runs");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(START_BOUND)
            .expect("the mock printed its port");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("mock said {line:?}"));
        Mock { child, port, log }
    }

    /// What it answered so far, one request a line.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
