//! A real Prometheus server scrapes the fleet example and holds the numbers
//! it produced (R6.8): the stall counter and the live-tasks-by-state gauge,
//! with no task label. Debian's `prometheus` binary, a config written here,
//! loopback only, bounded in time. Without `prometheus` on PATH the test
//! says SKIPPED and passes; `.ci/run` installs it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::wait::until;

/// How long anything here may take on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(120);

/// Kills and reaps a child we started when the test ends, pass or fail.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn on_path(bin: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(bin))
        .find(|p| p.is_file())
}

/// A loopback port free right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// The fleet example, built by the cargo running this test.
fn fleet_example() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--example", "fleet"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build --example fleet");
    assert!(status.success(), "cargo build --example fleet failed");
    let deps = std::env::current_exe().expect("test binary path");
    let profile_dir = deps.parent().and_then(Path::parent).expect("target dir");
    profile_dir.join("examples").join("fleet")
}

/// One GET over a plain TcpStream (HTTP/1.0, so the server closes); the
/// body of a 200, or None while the server is not answering.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200")
        .then(|| body.to_owned())
        .or_else(|| head.starts_with("HTTP/1.0 200").then(|| body.to_owned()))
}

/// The value of an instant PromQL query with one result, once Prometheus
/// has it.
fn query(port: u16, promql: &str) -> Option<f64> {
    let encoded: String = promql
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = get(port, &format!("/api/v1/query?query={encoded}"))?;
    let json: Value = serde_json::from_str(&body).ok()?;
    let result = json["data"]["result"].as_array()?;
    let [one] = result.as_slice() else {
        return None;
    };
    one["value"][1].as_str()?.parse().ok()
}

/// Asks `promql` until it equals `want`, or panics naming the last value;
/// between asks it waits on Prometheus' own process (`prom`).
fn wait_for(prom: u32, port: u16, promql: &str, want: f64) {
    let mut last = None;
    let held = until(prom, PATIENCE, Duration::from_millis(250), || {
        last = query(port, promql);
        (last == Some(want)).then_some(())
    });
    if held.is_none() {
        panic!("Prometheus never held {promql} = {want}; last answer {last:?}");
    }
}

// R6.8: a real Prometheus server scraping a real runner holds the stall
// counter and the state gauge the runner produced, and no series has a
// task label.
#[test]
fn prometheus_scrapes_the_fleet_and_holds_its_numbers() {
    let Some(prometheus) = on_path("prometheus") else {
        println!("SKIPPED: no `prometheus` on PATH (apt-get install prometheus)");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let fleet_port = free_port();
    let prom_port = free_port();
    let report = dir.path().join("report.json");

    let fleet = Command::new(fleet_example())
        .env(
            "STALLWARDEN_METRICS_ADDR",
            format!("127.0.0.1:{fleet_port}"),
        )
        .env("FLEET_REPORT", &report)
        .env("FLEET_HOLD_SECS", PATIENCE.as_secs().to_string())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the fleet example");
    let fleet_pid = fleet.id();
    let _fleet = Reaped(fleet);

    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: fleet\n    static_configs:\n      \
             - targets: ['127.0.0.1:{fleet_port}']\n"
        ),
    )
    .expect("write prometheus.yml");
    let prom = Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let prom_pid = prom.id();
    let _prom = Reaped(prom);

    // The example writes its numbers once its turns are done.
    let written = || {
        let text = std::fs::read_to_string(&report).ok()?;
        text.ends_with('\n')
            .then(|| serde_json::from_str::<Value>(&text).expect("the report is JSON"))
    };
    let produced: Value = until(fleet_pid, PATIENCE, Duration::from_millis(100), written)
        .expect("the fleet wrote no report");
    let stalls = produced["stalls"].as_u64().expect("stalls") as f64;
    assert!(stalls > 0.0, "the fleet must stall: {produced}");

    wait_for(prom_pid, prom_port, "sum(stallwarden_stalls_total)", stalls);
    for state in ["working", "stalled", "cancelling"] {
        let want = produced["tasks"][state].as_u64().expect("state count") as f64;
        wait_for(
            prom_pid,
            prom_port,
            &format!("sum(stallwarden_tasks{{state=\"{state}\"}}) or vector(0)"),
            want,
        );
    }
    // Bounded labels: nothing Prometheus stored from the fleet has `task`.
    wait_for(
        prom_pid,
        prom_port,
        "count({__name__=~\"stallwarden_.+\", task!=\"\"}) or vector(0)",
        0.0,
    );
    wait_for(
        prom_pid,
        prom_port,
        "count(count by (profile) (stallwarden_stalls_total))",
        2.0,
    );
}
