//! The cost of stacks at a stall (R8.14, issue 44): the time from the
//! verdict to the cancel (the process sink's SIGTERM follows it at once)
//! with stacks on, for one and five suspects, native (`eu-stack`, or `gdb`)
//! and Python (`py-spy`), beside the same with stacks off. Real processes,
//! a real process tree sampled from `/proc`; the guard's clock is virtual
//! only so the verdict comes exactly when the bench asks. Not a test and
//! not criterion: nothing asserts; the median of the rounds is printed with
//! min and max. A tool that is not installed is said, and its rows show
//! what a run without it pays (nothing but the look for it).
//!
//! Run: `cargo bench -p stallwarden --bench stall_stacks`;
//! `STACKS_ROUNDS=7` (the default) picks the rounds per row.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use stallwarden::sinks::stacks::{Stacks, TOOL_BOUND};
use stallwarden::sources::procs::ProcessSampler;
use stallwarden::{Action, ActionKind, Delivery, Guard, ManualClock, Profile, Sink, SinkError};

/// Notes the instant the cancel is dispatched.
#[derive(Clone, Debug, Default)]
struct CancelAt(Arc<Mutex<Option<Instant>>>);

impl Sink for CancelAt {
    fn on_action(&self, action: &Action) -> Result<(), SinkError> {
        if matches!(action.kind, ActionKind::Cancel { .. }) {
            self.0.lock().get_or_insert_with(Instant::now);
        }
        Ok(())
    }

    fn delivery(&self) -> Delivery {
        Delivery::Inline
    }
}

/// Starts `n` copies of `program` in one new process group (under a
/// shell that waits for them when `n > 1`).
fn start(program: &str, n: usize) -> Child {
    let script = if n == 1 {
        format!("exec {program}")
    } else {
        let mut s = String::new();
        for _ in 0..n {
            s.push_str(program);
            s.push_str(" & ");
        }
        s.push_str("wait");
        s
    };
    Command::new("sh")
        .args(["-c", &script])
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the suspects")
}

/// One round: the time from the verdict to the cancel.
fn round(program: &str, n: usize, stacks: bool) -> Duration {
    let mut child = start(program, n);
    let pid = child.id();
    // Let the tree exec (a real process: a real wait, not a measurement).
    std::thread::sleep(Duration::from_millis(400));
    let cancel = CancelAt::default();
    let mut builder = Guard::builder().clock(ManualClock::new());
    if stacks {
        builder = builder.at_stall(Stacks::new(TOOL_BOUND));
    }
    let guard = builder.sink(cancel.clone()).build();
    let profile = Profile::default()
        .idle(Duration::from_secs(1))
        .heartbeat_interval(None);
    let task = guard.start_process("bench", profile, pid).unwrap();
    let _sampler = ProcessSampler::spawn(pid, Duration::from_secs(1), Some(task.recorder()));
    let t0 = Instant::now();
    guard.advance(Duration::from_secs(1));
    let took = cancel.0.lock().map_or(Duration::MAX, |at| at - t0);
    // SAFETY: killpg on the group this round started.
    unsafe { libc::killpg(pid as i32, libc::SIGKILL) };
    let _ = child.wait();
    task.finish_failed();
    took
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

fn main() {
    let rounds: usize = std::env::var("STACKS_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7)
        .max(1);
    let native = if on_path("eu-stack") {
        "eu-stack"
    } else if on_path("gdb") {
        "gdb"
    } else {
        "none installed"
    };
    let python = if on_path("py-spy") {
        "py-spy"
    } else {
        "not installed"
    };
    println!("verdict to cancel (SIGTERM), median of {rounds} (min..max):");
    let cases = [
        ("native", format!("native ({native})"), "sleep 600"),
        (
            "python",
            format!("python ({python})"),
            "python3 -c 'import time; time.sleep(600)'",
        ),
    ];
    for (kind, label, program) in &cases {
        if *kind == "python" && !on_path("python3") {
            println!("  python: SKIPPED (no python3)");
            continue;
        }
        for n in [1, 5] {
            for stacks in [false, true] {
                let mut times: Vec<Duration> =
                    (0..rounds).map(|_| round(program, n, stacks)).collect();
                times.sort();
                let ms = |d: Duration| d.as_secs_f64() * 1000.0;
                println!(
                    "  {label:<20} {n} suspect{} stacks {:<3}  {:>8.1} ms  ({:.1}..{:.1})",
                    if n == 1 { " " } else { "s" },
                    if stacks { "on" } else { "off" },
                    ms(times[times.len() / 2]),
                    ms(times[0]),
                    ms(times[times.len() - 1]),
                );
            }
        }
    }
}
