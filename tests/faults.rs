//! Faults tried and survived (R10.2, R10.3): each test puts stallwarden in
//! front of one thing that goes wrong — a command that ignores SIGTERM, one
//! that leaves grandchildren behind, one that floods its output, one 1 GiB
//! line, binary output, a closed stdout, a SIGKILL from outside, a blocked
//! host runtime, a wall clock that jumps back, sinks that panic, fail or
//! hang — and checks it is survived: the right exit status, `finished` last,
//! output unaltered, memory bounded, no process left behind.
//!
//! Real processes and real time where a process is involved, with generous
//! bounds and bounded polls; timing logic in virtual time. Every process a
//! test starts is in a process group a [`GroupKiller`] SIGKILLs on drop, so
//! a failing test leaves nothing running.
//!
//! Long modes: `STALLWARDEN_FLOOD_SECS` (default 10) sets how long the flood
//! runs.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde_json::Value;
use stallwarden::sinks::process::{GroupSignal, KillOutcome, ProcessSink};

mod common;
use common::wait::{child_within, exits_within, until};
use common::{events, stallwarden, types, wait_bounded};
use stallwarden::{
    Action, Delivery, Event, EventKind, Guard, ManualClock, Outcome, Profile, RecordingSink, Sink,
    SinkError,
};

/// Generous bound for anything that should take a few seconds.
const BOUND: Duration = Duration::from_secs(60);
/// The memory stallwarden may use while copying any amount of output.
const MEMORY_BOUND_KIB: u64 = 64 * 1024;

// ---------------------------------------------------------------- helpers

/// SIGKILLs a process group on drop, so no test leaves processes behind.
struct GroupKiller(Option<u32>);

impl GroupKiller {
    fn none() -> Self {
        GroupKiller(None)
    }
    fn set(&mut self, pgid: u32) {
        assert!(pgid > 1, "refusing to watch process group {pgid}");
        self.0 = Some(pgid);
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // SAFETY: plain syscall; pgid > 1 was checked when it was set.
            unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
        }
    }
}

/// R3.8, R8.3: exactly one `finished`, and it is the last line.
fn assert_finished_last(evs: &[Value]) -> &Value {
    let t = types(evs);
    assert_eq!(t.first().map(String::as_str), Some("started"), "{t:?}");
    assert_eq!(t.last().map(String::as_str), Some("finished"), "{t:?}");
    assert_eq!(t.iter().filter(|x| *x == "finished").count(), 1, "{t:?}");
    evs.last().unwrap()
}

/// Looks at the events file until its `started` line shows the command's
/// pid, waiting on stallwarden's own process (`sg`) between looks.
fn started_pid(path: &Path, sg: u32) -> u32 {
    let started = || {
        events(path)
            .iter()
            .find(|e| e["type"] == "started")
            .and_then(|e| e["pid"].as_u64())
            .map(|pid| pid as u32)
    };
    until(sg, BOUND, Duration::from_millis(10), started)
        .unwrap_or_else(|| panic!("no started event in {path:?}"))
}

/// Live (non-zombie) members of process group `pgid`, read straight from
/// `/proc` so the tests do not trust the code under test to check itself.
fn live_in_group(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.get(2) == Some(&pgid.to_string().as_str())
            && !matches!(fields.first(), Some(&"Z") | Some(&"X"))
        {
            found.push(pid);
        }
    }
    found
}

/// Waits until group `pgid` has no live member, or the bound passes,
/// on each remaining member's pidfd in turn.
fn group_gone_within(pgid: u32, bound: Duration) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let left = live_in_group(pgid);
        let time_left = bound.saturating_sub(start.elapsed());
        if left.is_empty() || time_left.is_zero() {
            return left;
        }
        // A zombie member stays listed until reaped by its parent: look
        // again at least every 20 ms.
        exits_within(left[0], time_left.min(Duration::from_millis(20)));
    }
}

/// Peak resident memory of a live process, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Waits for stallwarden while sampling its peak memory; returns the exit
/// status and the highest `VmHWM` seen (0 if it exited before a sample).
fn wait_sampling_memory(mut child: Child) -> (std::process::ExitStatus, u64) {
    let pid = child.id();
    let start = Instant::now();
    let mut peak = 0;
    loop {
        // Read before try_wait: once reaped, /proc no longer has it.
        if let Some(kib) = peak_rss_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            return (status, peak);
        }
        if start.elapsed() > BOUND * 2 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("stallwarden did not exit within {:?}", BOUND * 2);
        }
        // The sampling period: ends early when stallwarden exits.
        exits_within(pid, Duration::from_millis(25));
    }
}

/// Reads a stream to its end in a thread of its own, checking each chunk
/// against `expected(offset, len)` (a memcmp, fast even in debug builds);
/// returns the byte count and the offset of the first mismatch, if any.
fn verify_stream(
    mut from: impl Read + Send + 'static,
    expected: impl Fn(u64, usize) -> Vec<u8> + Send + 'static,
) -> std::thread::JoinHandle<(u64, Option<u64>)> {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        let mut mismatch = None;
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("reading stallwarden's output: {e}"),
            };
            if mismatch.is_none() && buf[..n] != expected(total, n)[..] {
                mismatch = Some(total);
            }
            total += n as u64;
        }
        (total, mismatch)
    })
}

/// A profile on which only the test's own actions matter.
fn quiet(idle: Duration) -> Profile {
    Profile::default().idle(idle).heartbeat_interval(None)
}

fn spawn_group(script: &str) -> (Child, GroupKiller) {
    let child = Command::new("sh")
        .args(["-c", script])
        .process_group(0)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sh");
    let mut killer = GroupKiller::none();
    killer.set(child.id());
    (child, killer)
}

/// Waits until process `pid` runs `name` (its `exec` happened, so any
/// `trap` before it is in force), or the bound passes.
fn wait_exec(pid: u32, name: &str) {
    let runs = || {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim() == name)
            .then_some(())
    };
    assert!(
        until(pid, BOUND, Duration::from_millis(5), runs).is_some(),
        "process {pid} never became {name}"
    );
}

// ------------------------------------------------------ the CLI, end to end

// R3.5, R8.2, R10.2: a command whose whole tree ignores SIGTERM — the shell
// and a grandchild — is SIGKILLed after the grace period: exit 124,
// `killed` before `finished`, `finished` last, and nothing of the group is
// left running.
#[test]
fn a_tree_ignoring_sigterm_is_killed_whole_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let mut killer = GroupKiller::none();
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "1s", "--grace", "1s", "--events"])
        .arg(&ev)
        .args([
            "--",
            "sh",
            "-c",
            "trap '' TERM; (trap '' TERM; while :; do sleep 0.1; done) & \
             echo up; while :; do sleep 0.1; done",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    killer.set(started_pid(&ev, child.id()));
    let out = wait_bounded(child);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert_eq!(out.stdout, b"up\n");
    let evs = events(&ev);
    let t = types(&evs);
    let pos = |ty: &str| t.iter().position(|x| x == ty);
    assert!(pos("cancelling") < pos("killed"), "{t:?}");
    assert!(pos("killed").is_some(), "{t:?}");
    let finished = assert_finished_last(&evs);
    assert_eq!(finished["outcome"], "cancelled", "{finished}");
    assert_eq!(finished["signal"], 9, "{finished}");
    let pgid = killer.0.unwrap();
    let left = group_gone_within(pgid, Duration::from_secs(10));
    assert!(left.is_empty(), "group {pgid} still has {left:?}");
}

/// Runs `sh -c 'sleep 300 & sleep 300 & echo started; exit 0'` under
/// stallwarden; returns its output, its events and the command's pgid (the
/// caller's `killer` SIGKILLs the group whatever happens).
fn run_forking_command(killer: &mut GroupKiller) -> (Output, Vec<Value>, u32) {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "30s", "--events"])
        .arg(&ev)
        .args([
            "--",
            "sh",
            "-c",
            "sleep 300 & sleep 300 & echo started; exit 0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pgid = started_pid(&ev, child.id());
    killer.set(pgid);
    let out = wait_bounded(child);
    (out, events(&ev), pgid)
}

// R10.2, R8.1, R8.2: a command that forks grandchildren and exits. The
// grandchildren hold the output pipes open; stallwarden drains them for a
// bounded time (2 s, `DRAIN_AFTER_EXIT` in src/cli/run.rs) rather than
// hanging, exits with the command's own status, and delivers `finished`.
#[test]
fn a_command_that_forks_grandchildren_and_exits_does_not_hang_stallwarden() {
    let mut killer = GroupKiller::none();
    let (out, evs, _) = run_forking_command(&mut killer);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(out.stdout, b"started\n");
    let finished = assert_finished_last(&evs);
    assert_eq!(finished["outcome"], "completed", "{finished}");
    assert_eq!(finished["exit_code"], 0, "{finished}");
}

// R10.2, R10.3: after stallwarden exits, nothing of the command's process
// group is left running unwatched: once the leader exits, what is left of
// the group gets SIGTERM, then SIGKILL after the grace period.
#[test]
fn grandchildren_of_an_exited_command_are_not_left_behind() {
    let mut killer = GroupKiller::none();
    let (out, _, pgid) = run_forking_command(&mut killer);
    assert_eq!(out.status.code(), Some(0));
    let left = group_gone_within(pgid, Duration::from_secs(5));
    assert!(
        left.is_empty(),
        "after stallwarden exited, the command's group {pgid} still runs {left:?}"
    );
}

// R5.1, R10.2, R10.3: a command writing as fast as it can for 10 s. Every
// byte arrives in order (the stream is periodic, checked chunk by chunk),
// the count matches what the command says it wrote, no event is lost, and
// stallwarden's peak memory stays under 64 MiB.
#[test]
fn a_ten_second_output_flood_arrives_unaltered_in_flat_memory() {
    let secs: f64 = std::env::var("STALLWARDEN_FLOOD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    const PATTERN: &[u8] = b"0123456789abcdef\n";
    // 17 * 61681 bytes: about 1 MiB per write, a whole number of lines.
    let script = format!(
        "import sys, time\n\
         chunk = {PATTERN:?}.encode() * 61681\n\
         out = sys.stdout.buffer\n\
         end = time.monotonic() + {secs}\n\
         n = 0\n\
         while time.monotonic() < end:\n    out.write(chunk)\n    n += len(chunk)\n\
         out.flush()\n\
         sys.stderr.write('wrote %d\\n' % n)\n",
        PATTERN = std::str::from_utf8(PATTERN).unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    // The flood is one line written again and again: a loop by R5.12's
    // judgement, which would stop it at the idle budget. Each read renews,
    // as this test has always had it, with `repeat` in renewed-by; the
    // lines are still cut and judged all along.
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\nrenewed-by = [\"argument-delta\", \"output\", \"tool-call\", \"progress\", \"repeat\"]\n",
    )
    .unwrap();
    let ev = dir.path().join("events.jsonl");
    let mut killer = GroupKiller::none();
    let mut child = stallwarden(dir.path())
        .args(["run", "--idle", "5s", "--heartbeat", "1s", "--events"])
        .arg(&ev)
        .args(["--", "python3", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let periodic: Vec<u8> = PATTERN.repeat((1 << 20) / PATTERN.len() + 2);
    let stdout = verify_stream(child.stdout.take().unwrap(), move |off, len| {
        let at = (off % PATTERN.len() as u64) as usize;
        periodic[at..at + len].to_vec()
    });
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = Vec::new();
        stderr_pipe.read_to_end(&mut s).unwrap();
        String::from_utf8_lossy(&s).into_owned()
    });
    killer.set(started_pid(&ev, child.id()));
    let (status, peak_kib) = wait_sampling_memory(child);
    let (received, mismatch) = stdout.join().unwrap();
    let err = stderr.join().unwrap();
    eprintln!("flood: {received} bytes, stallwarden peaked at {peak_kib} KiB");
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(mismatch, None, "output altered at byte {mismatch:?}");
    let wrote: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("wrote "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the flooder did not report its count: {err}"));
    assert!(wrote > 0);
    assert_eq!(received, wrote, "bytes lost or added");
    assert!(peak_kib > 0, "no memory sample was taken");
    assert!(
        peak_kib < MEMORY_BOUND_KIB,
        "stallwarden peaked at {peak_kib} KiB copying {wrote} bytes"
    );
    let evs = events(&ev);
    let finished = assert_finished_last(&evs);
    assert_eq!(finished["outcome"], "completed", "{finished}");
    // Output flowed the whole time: no stall, and no heartbeat while it
    // flowed (R3.7). A heartbeat before the first byte (python3 starting
    // for over a second on a loaded machine) or after the last (its exit)
    // is R3.7's own: the stress run beside two CPU hogs met the first.
    let t = types(&evs);
    assert!(
        t.iter().all(|t| t != "stalled" && t != "cancelling"),
        "{t:?}"
    );
    for hb in evs.iter().filter(|e| e["type"] == "heartbeat") {
        let bytes = hb["total_bytes"].as_u64().unwrap();
        assert!(
            bytes == 0 || bytes == received,
            "a heartbeat while output flowed, at {bytes} of {received} bytes: {hb}"
        );
    }
}

// R5.1, R10.2: one 1 GiB line with no newline at all passes through whole,
// and stallwarden's memory stays bounded: it never buffers a line.
#[test]
fn one_gibibyte_line_without_a_newline_arrives_whole_in_bounded_memory() {
    const GIB: u64 = 1 << 30;
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let mut killer = GroupKiller::none();
    let mut child = stallwarden(dir.path())
        .args(["run", "--idle", "30s", "--events"])
        .arg(&ev)
        .args([
            "--",
            "sh",
            "-c",
            "head -c 1073741824 /dev/zero | tr '\\0' a",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let a_run = vec![b'a'; 1 << 20];
    let stdout = verify_stream(child.stdout.take().unwrap(), move |_, len| {
        a_run[..len].to_vec()
    });
    killer.set(started_pid(&ev, child.id()));
    let (status, peak_kib) = wait_sampling_memory(child);
    let (received, mismatch) = stdout.join().unwrap();
    eprintln!("1 GiB line: stallwarden peaked at {peak_kib} KiB");
    assert_eq!(status.code(), Some(0));
    assert_eq!(mismatch, None, "a byte other than 'a' at {mismatch:?}");
    assert_eq!(received, GIB, "bytes lost or added");
    assert!(peak_kib > 0, "no memory sample was taken");
    assert!(
        peak_kib < MEMORY_BOUND_KIB,
        "stallwarden peaked at {peak_kib} KiB on a 1 GiB line"
    );
    assert_finished_last(&events(&ev));
}

// R5.1, R8.1, R10.3: random binary output (invalid UTF-8, NULs, lone CRs,
// no final newline) on both streams is passed through byte for byte: the
// same bytes the command writes when run directly.
#[test]
fn random_binary_output_on_both_streams_is_byte_identical() {
    let script = "import random, sys\n\
                  sys.stdout.buffer.write(random.Random(20260101).randbytes(8 << 20))\n\
                  sys.stderr.buffer.write(random.Random(424242).randbytes(1 << 20))\n";
    let dir = tempfile::tempdir().unwrap();
    let direct = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(direct.status.success());
    assert_eq!(direct.stdout.len(), 8 << 20);
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "30s", "--", "python3", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let through = wait_bounded(child);
    assert_eq!(through.status.code(), Some(0));
    assert!(
        through.stdout == direct.stdout,
        "stdout altered: {} bytes in, {} out",
        direct.stdout.len(),
        through.stdout.len()
    );
    assert!(
        through.stderr == direct.stderr,
        "stderr altered: {} bytes in, {} out",
        direct.stderr.len(),
        through.stderr.len()
    );
}

// R8.2, R10.3: a command that closes its stdout but keeps running is still
// waited for — EOF on a pipe is not the end of the command — its stderr
// still passes through, and its own status (5) is stallwarden's.
#[test]
fn a_command_that_closes_stdout_is_still_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let mut killer = GroupKiller::none();
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "30s", "--events"])
        .arg(&ev)
        .args([
            "--",
            "sh",
            "-c",
            "echo before; exec >&-; sleep 2; echo still here >&2; exit 5",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    killer.set(started_pid(&ev, child.id()));
    let out = wait_bounded(child);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert_eq!(out.stdout, b"before\n");
    assert!(err.contains("still here"), "{err}");
    let evs = events(&ev);
    let finished = assert_finished_last(&evs);
    assert_eq!(finished["outcome"], "failed", "{finished}");
    assert_eq!(finished["exit_code"], 5, "{finished}");
}

// R8.2, R8.3: a command SIGKILLed by someone else exits 128+9 = 137 — a
// signal stallwarden did not send — with `finished` carrying signal 9 and
// no exit code, and no `cancelling` (stallwarden stopped nothing).
#[test]
fn a_command_killed_from_outside_exits_137() {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("events.jsonl");
    let mut killer = GroupKiller::none();
    let child = stallwarden(dir.path())
        .args(["run", "--idle", "60s", "--events"])
        .arg(&ev)
        .args(["--", "sh", "-c", "echo ready; exec sleep 300"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = started_pid(&ev, child.id());
    killer.set(pid);
    // SAFETY: plain syscall on the command's pid, which is > 1 (checked).
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let out = wait_bounded(child);
    let err = String::from_utf8_lossy(&out.stderr);
    // R8.16: ends with the command's SIGKILL, as `timeout` does.
    assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{err}");
    let evs = events(&ev);
    let finished = assert_finished_last(&evs);
    assert_eq!(finished["signal"], 9, "{finished}");
    assert!(finished.get("exit_code").is_none(), "{finished}");
    assert_eq!(finished["outcome"], "failed", "{finished}");
    assert!(!types(&evs).contains(&"cancelling".to_owned()), "{evs:?}");
}

// -------------------------------------------------------- library level

// R6.3: the host's runtime is a current-thread tokio runtime whose only
// thread is blocked — here, in a blocking wait on the very process being
// watched. The guard's driver and the process sink's thread still stall,
// SIGTERM and, since the command ignores SIGTERM, SIGKILL it, which is what
// unblocks the runtime.
#[test]
fn a_blocked_host_runtime_still_kills_a_silent_process() {
    let (mut child, _killer) = spawn_group("trap '' TERM; exec sleep 300");
    let pgid = child.id();
    wait_exec(pgid, "sleep");
    let procs = ProcessSink::new();
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .sink(procs.clone())
        .sink(rec.clone())
        .build();
    let profile = quiet(Duration::from_millis(300)).grace_period(Duration::from_millis(300));
    let task = guard.start_process("blocked", profile, pgid).unwrap();
    // Should the guard fail, this turns a hang into a failure.
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let backstop = std::thread::spawn(move || {
        if done_rx.recv_timeout(BOUND).is_err() {
            // SAFETY: plain syscall; pgid is the child's own group (> 1).
            unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
            return true;
        }
        false
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The runtime's one thread blocks in waitpid until the guard acts.
    let status = rt.block_on(async { child.wait().unwrap() });
    let _ = done_tx.send(());
    assert!(
        !backstop.join().unwrap(),
        "the backstop had to kill the process"
    );
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    task.finish(Outcome::Cancelled, status.code(), status.signal())
        .unwrap();
    let kill = procs
        .wait_for(|r| r.signal == GroupSignal::Kill, BOUND)
        .expect("a kill report");
    assert!(
        matches!(
            kill.outcome,
            KillOutcome::Confirmed { .. } | KillOutcome::AlreadyGone
        ),
        "{kill}"
    );
    // The driver may still be delivering when `finish` returns (its event
    // then goes out in the driver's drain, src/dispatch.rs).
    assert!(rec.wait_for("blocked", "finished", BOUND));
    assert_eq!(
        rec.types_for("blocked"),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
}

// R2.7: the machine's wall clock jumping back an hour (an NTP step, `date
// -s`) changes no verdict — the stall comes exactly at the budget of
// monotonic time — while the `at` labels of events follow the wall clock
// back, and `elapsed` does not.
#[test]
fn a_wall_clock_moving_backwards_changes_no_verdict_only_the_labels() {
    let clock = ManualClock::new();
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .clock(clock.clone())
        .sink(rec.clone())
        .build();
    let idle = Duration::from_secs(10);
    let task = guard.start("job", quiet(idle)).unwrap();
    guard.advance(Duration::from_secs(4));
    task.output(10, 1); // renewed at 4 s: the stall is due at 14 s
    clock.jump_wall(-3600);
    guard.advance(Duration::from_secs(9));
    assert_eq!(rec.types_for("job"), ["started"], "at {:?}", guard.now());
    guard.advance(Duration::from_secs(1));
    assert_eq!(
        rec.types_for("job"),
        ["started", "stalled", "cancelling"],
        "at {:?}",
        guard.now()
    );
    task.finish_completed();
    let evs = rec.events();
    let (started, stalled) = (&evs[0], &evs[1]);
    assert_eq!(stalled.elapsed, Duration::from_secs(14));
    assert!(
        matches!(stalled.kind, EventKind::Stalled { .. }),
        "{stalled:?}"
    );
    // The label moved back: 14 s later in monotonic time, 3586 s earlier
    // on the wall.
    let back = started.wall.duration_since(stalled.wall).unwrap();
    assert_eq!(back, Duration::from_secs(3600 - 14));
    rec.assert_settled("job");
}

/// Panics in every hook.
#[derive(Debug)]
struct Panicking(Delivery);
impl Sink for Panicking {
    fn on_event(&self, _: &Event) -> Result<(), SinkError> {
        panic!("sink bug");
    }
    fn on_action(&self, _: &Action) -> Result<(), SinkError> {
        panic!("sink bug in an action");
    }
    fn delivery(&self) -> Delivery {
        self.0
    }
}

/// Fails every call.
#[derive(Debug)]
struct Failing(Delivery, AtomicUsize);
impl Sink for Failing {
    fn on_event(&self, _: &Event) -> Result<(), SinkError> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Err(SinkError::new("disk full"))
    }
    fn on_action(&self, _: &Action) -> Result<(), SinkError> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Err(SinkError::new("disk full"))
    }
    fn delivery(&self) -> Delivery {
        self.0
    }
}

/// Never returns from its first call: it waits on a channel whose sender
/// the test holds until the end.
#[derive(Debug)]
struct Hanging(parking_lot::Mutex<Option<mpsc::Receiver<()>>>);
impl Sink for Hanging {
    fn on_event(&self, _: &Event) -> Result<(), SinkError> {
        if let Some(rx) = self.0.lock().take() {
            let _ = rx.recv();
        }
        Ok(())
    }
    fn on_action(&self, a: &Action) -> Result<(), SinkError> {
        let _ = a;
        if let Some(rx) = self.0.lock().take() {
            let _ = rx.recv();
        }
        Ok(())
    }
}

// R6.2, R10.2, R10.3: sinks that panic (inline and isolated), fail (inline
// and isolated) and hang forever, all registered before the process sink,
// keep neither SIGTERM nor SIGKILL from a real process that ignores SIGTERM.
#[test]
fn panicking_failing_and_hanging_sinks_never_keep_the_kill_from_a_process() {
    let (mut child, _killer) = spawn_group("trap '' TERM; exec sleep 300");
    let pgid = child.id();
    wait_exec(pgid, "sleep");
    let (hold, hung) = mpsc::channel::<()>();
    let failing_inline = Arc::new(Failing(Delivery::Inline, AtomicUsize::new(0)));
    let failing_isolated = Arc::new(Failing(Delivery::Isolated, AtomicUsize::new(0)));
    let procs = ProcessSink::new();
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .sink(Hanging(parking_lot::Mutex::new(Some(hung))))
        .sink(Panicking(Delivery::Inline))
        .sink(Panicking(Delivery::Isolated))
        .shared_sink(failing_inline.clone())
        .shared_sink(failing_isolated.clone())
        .sink(procs.clone())
        .sink(rec.clone())
        .build();
    let profile = quiet(Duration::from_millis(300)).grace_period(Duration::from_millis(300));
    let task = guard.start_process("faulty", profile, pgid).unwrap();
    let status = child_within(&mut child, BOUND).expect("the process was never killed");
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    task.finish(Outcome::Cancelled, status.code(), status.signal())
        .unwrap();
    let term = procs
        .wait_for(|r| r.signal == GroupSignal::Term, BOUND)
        .expect("SIGTERM report");
    assert_eq!(term.outcome, KillOutcome::Sent, "{term}");
    assert!(procs
        .wait_for(|r| r.signal == GroupSignal::Kill, BOUND)
        .is_some());
    // The driver may still be delivering when `finish` returns (its event
    // then goes out in the driver's drain, src/dispatch.rs).
    assert!(rec.wait_for("faulty", "finished", BOUND));
    assert_eq!(
        rec.types_for("faulty"),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
    // Everything reached the failing sinks too: 5 events and 2 actions.
    assert_eq!(failing_inline.1.load(Ordering::SeqCst), 7);
    let start = Instant::now();
    while failing_isolated.1.load(Ordering::SeqCst) < 7 {
        assert!(start.elapsed() < BOUND, "the isolated failing sink lagged");
        std::thread::yield_now();
    }
    drop(hold);
}

// R6.2: a sink that hangs makes `flush` (what a runner calls before it
// exits) report false within its bound instead of hanging the runner.
#[test]
fn flush_reports_a_hung_sink_instead_of_hanging() {
    let (hold, hung) = mpsc::channel::<()>();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(Hanging(parking_lot::Mutex::new(Some(hung))))
        .build();
    let task = guard.start("t", quiet(Duration::from_secs(1))).unwrap();
    task.finish_completed();
    assert!(!guard.flush(Duration::from_millis(200)));
    drop(hold);
    assert!(guard.flush(BOUND), "released, the sink drains");
}
