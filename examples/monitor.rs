//! A side-agent monitor watching a real command (R6.6).
//!
//! Runs a command (by default a small shell script that looks like a database
//! migration stuck on a lock) under a guard with the rule-based monitor, and
//! prints each observation the main agent would receive, on stderr, as it
//! arrives. The command's own output passes through to stdout unchanged.
//!
//! ```text
//! cargo run --example monitor
//! cargo run --example monitor -- sh -c 'for i in 1 2 3 4 5; do echo tick $i; sleep 1; done'
//! ```

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use parking_lot::Mutex;
use stallwarden_sinks::monitor::{monitored, MonitorSink, MonitorTarget, OutputTail};
use watchdog_core::{Guard, Outcome, Profile};

const DEMO: &str = r#"
echo "connecting to postgres://app:Sup3rS3cret@db.internal/app"
for i in 1 2 3 4; do echo "applying migration $i/6"; sleep 1; done
echo "waiting for table metadata lock on users"
sleep 5
echo "ERROR: lock wait timeout exceeded; try restarting transaction"
exit 1
"#;

/// Keeps the last 64 KiB of output and counts every byte, so the monitor
/// knows exactly what is new even when a line repeats.
#[derive(Default)]
struct Tail {
    inner: Mutex<(Vec<u8>, u64)>,
}

impl Tail {
    const CAP: usize = 64 * 1024;

    fn push(&self, bytes: &[u8]) {
        let mut t = self.inner.lock();
        t.0.extend_from_slice(bytes);
        t.1 += bytes.len() as u64;
        let excess = t.0.len().saturating_sub(Self::CAP);
        t.0.drain(..excess);
    }
}

impl OutputTail for Tail {
    fn snapshot(&self) -> Vec<u8> {
        self.inner.lock().0.clone()
    }
    fn total_bytes(&self) -> Option<u64> {
        Some(self.inner.lock().1)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let argv: Vec<String> = if args.is_empty() {
        vec!["sh".into(), "-c".into(), DEMO.into()]
    } else {
        args
    };
    let shown = if argv.len() == 3 && argv[2] == DEMO {
        "./migrate.sh".to_owned()
    } else {
        argv.join(" ")
    };

    let monitor = MonitorSink::rule_based().build()?;
    let guard = Guard::builder().sink(monitor.clone()).build();

    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    let task = guard.start_process("command", monitored(Profile::default()), child.id())?;
    let tail = Arc::new(Tail::default());
    let mut target = MonitorTarget::new(shown, Arc::clone(&tail));
    if let Ok(dir) = std::env::current_dir() {
        target = target.cwd(dir);
    }
    monitor.watch(task.id(), target);

    // Print observations as they come, until told to stop.
    let (stop, stopped) = mpsc::channel::<()>();
    let printer = {
        let monitor = monitor.clone();
        std::thread::spawn(move || loop {
            for o in monitor.drain_observations() {
                eprintln!("[monitor] {o}");
            }
            if stopped.recv_timeout(Duration::from_millis(200)).is_ok() {
                return;
            }
        })
    };

    // Pass output through unchanged, feeding the tail and the guard.
    let mut stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let mut buf = [0u8; 8192];
    loop {
        let n = stdout.read(&mut buf)?;
        if n == 0 {
            break;
        }
        std::io::stdout().write_all(&buf[..n])?;
        tail.push(&buf[..n]);
        task.output(
            n as u64,
            buf[..n].iter().filter(|&&b| b == b'\n').count() as u64,
        );
    }
    let status = child.wait()?;
    let outcome = if status.success() {
        Outcome::Completed
    } else {
        Outcome::Failed
    };
    task.finish(outcome, status.code(), None)?;

    // The final summary should reach the main agent before the result does.
    guard.flush(Duration::from_secs(5));
    monitor.flush(Duration::from_secs(5));
    let _ = stop.send(());
    let _ = printer.join();
    for o in monitor.drain_observations() {
        eprintln!("[monitor] {o}");
    }
    std::process::exit(status.code().unwrap_or(1));
}
