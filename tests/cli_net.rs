//! The `net` signal end to end (R5.11, R8.13): a loopback "download" that
//! receives a byte every 2 s is kept alive by `net` in `renewed-by` and
//! stopped without it; a stream that stopped sending is stopped at the
//! idle budget, its stall line naming the TCP peer. Real processes: a
//! Python server started by the test on 127.0.0.1, a Python client run
//! under the binary. Real time (the bytes' pace is the point), with
//! generous bounds.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{events, stallwarden, stderr, types, wait_within};

/// Listens on 127.0.0.1 (a free port, printed first); per connection,
/// `drip` sends one byte every 2 s on a fixed schedule, six times, then
/// closes; `silent` holds the connection open and sends nothing.
const SERVER: &str = r#"
import socket, sys, time
mode = sys.argv[1]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
print(s.getsockname()[1], flush=True)
held = []
while True:
    c, _ = s.accept()
    if mode == "silent":
        held.append(c)
        continue
    t0 = time.monotonic()
    for k in range(1, 7):
        time.sleep(max(0.0, t0 + 2 * k - time.monotonic()))
        try:
            c.sendall(b".")
        except OSError:
            break
    c.close()
"#;

/// Connects to the port in argv[1] and reads to the end, writing nothing;
/// exits 3 after exactly six bytes, so a run that completes shows the
/// command's own status.
const CLIENT: &str = r#"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
n = 0
while True:
    b = s.recv(64)
    if not b:
        break
    n += len(b)
sys.exit(3 if n == 6 else 1)
"#;

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(mode: &str) -> Server {
        let mut child = Command::new("python3")
            .args(["-c", SERVER, mode])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the server's port");
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the client against `server` under `--idle 5s`, with `renewed_by`
/// in the config when given; returns the output and the event types.
fn download(dir: &Path, server: &Server, renewed_by: Option<&str>) -> (Output, Vec<String>) {
    if let Some(kinds) = renewed_by {
        std::fs::write(
            dir.join("stallwarden.toml"),
            format!("[defaults]\nrenewed-by = {kinds}\n"),
        )
        .unwrap();
    }
    let ev = dir.join("events.jsonl");
    let child = stallwarden(dir)
        .args(["run", "--idle", "5s", "--events"])
        .arg(&ev)
        .args(["--", "python3", "-c", CLIENT, &server.port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_within(child, Duration::from_secs(60));
    (out, types(&events(&ev)))
}

/// The stall line on stderr.
fn stall_line(out: &Output) -> String {
    let err = stderr(out);
    err.lines()
        .find(|l| l.contains("budget") && l.contains("exceeded"))
        .unwrap_or_else(|| panic!("no stall line: {err}"))
        .to_owned()
}

const WITH_NET: &str = r#"["argument-delta", "output", "tool-call", "progress", "net"]"#;

// R5.11: a download receiving a byte every 2 s, silent on its outputs and
// using no CPU, outlives a 5 s idle budget for 12 s with `net` in
// renewed-by, and exits with its own status.
#[test]
fn a_slow_download_is_kept_alive_by_net() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start("drip");
    let (out, types) = download(dir.path(), &server, Some(WITH_NET));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!types.contains(&"stalled".to_owned()), "{types:?}");
    assert_eq!(types.last().map(String::as_str), Some("finished"));
}

// R5.11, R2.6: the same download without `net` in renewed-by is stopped
// at the idle budget: the signal is what kept it alive.
#[test]
fn the_same_download_without_net_is_stalled() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start("drip");
    let (out, types) = download(dir.path(), &server, None);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(types.contains(&"stalled".to_owned()), "{types:?}");
    assert!(
        stall_line(&out).contains("idle budget 5s exceeded"),
        "{}",
        stderr(&out)
    );
}

// R5.11, R8.13: with `net` in renewed-by, a stream whose server stopped
// sending (the connection open, nothing arriving) is stopped at the idle
// budget, and the stall line names the TCP peer it waits on.
#[test]
fn a_stalled_stream_is_stopped_naming_its_peer() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start("silent");
    let (out, types) = download(dir.path(), &server, Some(WITH_NET));
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(types.contains(&"stalled".to_owned()), "{types:?}");
    let line = stall_line(&out);
    let peer = format!("-> 127.0.0.1:{} ESTABLISHED", server.port);
    assert!(
        line.contains("idle budget 5s exceeded")
            && line.contains("python3[")
            && line.contains("TCP 127.0.0.1:")
            && line.contains(&peer),
        "{line}"
    );
}
