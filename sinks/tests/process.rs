//! The process sink against real processes, real process groups and real
//! signals (R3.5, R6.4, R10.2, R10.3). Guards run on the real clock with tiny
//! budgets; every wait is a bounded poll and every bound is generous, so the
//! tests assert order and outcome, never wall-clock timing. Where only a
//! cancel is needed the guard is on virtual time (`ManualClock`). Also: what
//! a kill report says, in its text and in the log (R8.6, R8.7), and the group
//! lookup and waits (`group_members`, `wait_group_gone`, `reap`) on real
//! children (R3.4, R8.6).

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use stallwarden_sinks::process::{
    group_members, reap, wait_group_gone, GroupSignal, KillOutcome, KillReport, ProcessSink, Reaped,
};
use watchdog_core::{
    Action, EventKind, Guard, ManualClock, Outcome, Profile, RecordingSink, Sink, SinkError,
    TaskHandle,
};

const PATIENCE: Duration = Duration::from_secs(20);

/// Kills the whole group when the test ends, pass or fail: no test leaves
/// processes behind.
struct GroupCleanup(u32);

impl Drop for GroupCleanup {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.0 as i32), Signal::SIGKILL);
    }
}

fn spawn_group(script: &str) -> (Child, GroupCleanup) {
    let child = Command::new("sh")
        .args(["-c", script])
        .process_group(0)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sh");
    let cleanup = GroupCleanup(child.id());
    (child, cleanup)
}

/// Live (non-zombie) members of `pgid`, read straight from /proc, so the
/// tests do not trust the code under test to check itself.
fn live_in_group(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields[2] == pgid.to_string() && fields[0] != "Z" && fields[0] != "X" {
            found.push(pid);
        }
    }
    found
}

fn poll_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10)); // a real process is being waited on
    }
}

fn profile(grace: Duration) -> Profile {
    Profile::default()
        .idle(Duration::from_millis(200))
        .grace_period(grace)
        .heartbeat_interval(None)
}

/// The runner side: waits on the child (reaping is the runner's job) and
/// settles the task with how it ended.
fn runner(mut child: Child, task: TaskHandle) -> thread::JoinHandle<std::process::ExitStatus> {
    thread::spawn(move || {
        let status = child.wait().expect("wait child");
        task.finish(Outcome::Cancelled, status.code(), status.signal())
            .expect("finish once");
        status
    })
}

// R3.5, R6.4: a cancel sends SIGTERM to the group; a command that honours it
// ends, the runner finishes the task, and no kill is needed.
#[test]
fn sigterm_ends_a_cooperative_group_without_a_kill() {
    let (child, _cleanup) = spawn_group("exec sleep 30");
    let pgid = child.id();
    let procs = ProcessSink::new();
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .sink(procs.clone())
        .sink(rec.clone())
        .build();
    // A long grace period: the finish arrives long before a kill could.
    let task = guard
        .start_process("sleep", profile(Duration::from_secs(60)), pgid)
        .unwrap();
    let status = runner(child, task).join().unwrap();

    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert!(rec.wait_for("sleep", "finished", PATIENCE));
    assert_eq!(
        rec.types_for("sleep"),
        ["started", "stalled", "cancelling", "finished"]
    );
    // The report is settled on the sink's thread right after the signal,
    // so it can trail the child's death: wait for it.
    let term = procs.wait_for(|r| r.signal == GroupSignal::Term, PATIENCE);
    assert!(term.is_some());
    let reports = procs.reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].signal, GroupSignal::Term);
    assert_eq!(reports[0].outcome, KillOutcome::Sent);
    assert_eq!(reports[0].pgid, pgid);
    assert!(live_in_group(pgid).is_empty());
}

// R8.9: a cancel's SIGTERM is followed by SIGCONT, so a stopped command
// runs its handler now instead of waiting, stopped, for the SIGKILL after
// the whole grace period.
#[test]
fn a_stopped_group_is_continued_after_sigterm_and_runs_its_handler() {
    let (child, _cleanup) = spawn_group("trap 'exit 7' TERM; kill -STOP $$; exit 0");
    let pgid = child.id();
    let state = || {
        std::fs::read_to_string(format!("/proc/{pgid}/stat"))
            .map(|s| s[s.rfind(')').unwrap() + 2..].starts_with('T'))
            .unwrap_or(false)
    };
    poll_until("the shell to stop itself", state);
    let procs = ProcessSink::new();
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .sink(procs.clone())
        .sink(rec.clone())
        .build();
    // A grace period far past the patience: only SIGCONT can end it in time.
    let task = guard
        .start_process("stopped", profile(Duration::from_secs(600)), pgid)
        .unwrap();
    let runner = runner(child, task);
    assert!(
        rec.wait_for("stopped", "finished", PATIENCE),
        "the stopped shell never ran its SIGTERM handler"
    );
    let status = runner.join().unwrap();
    assert_eq!(status.code(), Some(7), "{status:?}");
    assert!(procs
        .reports()
        .iter()
        .all(|r| r.signal == GroupSignal::Term));
}

// R3.5, R10.2 ("a command that ignores SIGTERM"), R10.3: SIGTERM is ignored,
// so after the grace period the kill action sends SIGKILL and the sink
// confirms the group is gone; the runner's finish comes after.
#[test]
fn sigkill_follows_the_grace_period_when_sigterm_is_ignored() {
    // `trap "" TERM` makes the shell and the sleep it starts ignore SIGTERM.
    let (child, _cleanup) = spawn_group("trap '' TERM; sleep 30; exit 0");
    let pgid = child.id();
    let procs = ProcessSink::new();
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .sink(procs.clone())
        .sink(rec.clone())
        .build();
    let task = guard
        .start_process("stubborn", profile(Duration::from_millis(300)), pgid)
        .unwrap();
    let status = runner(child, task).join().unwrap();

    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    let kill = procs
        .wait_for(|r| r.signal == GroupSignal::Kill, PATIENCE)
        .expect("a kill report");
    assert!(
        matches!(kill.outcome, KillOutcome::Confirmed { .. }),
        "{kill}"
    );
    let reports = procs.reports();
    assert_eq!(reports[0].signal, GroupSignal::Term, "{reports:?}");
    assert_eq!(reports[0].outcome, KillOutcome::Sent);
    assert!(rec.wait_for("stubborn", "finished", PATIENCE));
    assert_eq!(
        rec.types_for("stubborn"),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
    rec.assert_settled("stubborn");
    assert!(live_in_group(pgid).is_empty(), "{:?}", live_in_group(pgid));
}

// R10.2 ("one that forks grandchildren and exits"): the leader exits and is
// reaped at once while two grandchildren that ignore SIGTERM keep the
// group (and the output pipe) alive. The kill reaches them through the group,
// none is left, and the runner's finish (at EOF) arrives after the kill.
#[test]
fn grandchildren_of_an_exited_leader_are_killed_through_the_group() {
    let mut child = Command::new("sh")
        .args(["-c", "trap '' TERM; sleep 30 & sleep 30 & exit 0"])
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let pgid = child.id();
    let _cleanup = GroupCleanup(pgid);
    let mut stdout = child.stdout.take().unwrap();
    assert!(child.wait().unwrap().success()); // the leader is gone and reaped
    poll_until("two grandchildren in the group", || {
        live_in_group(pgid).len() == 2
    });

    let procs = ProcessSink::new();
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .sink(procs.clone())
        .sink(rec.clone())
        .build();
    let task = guard
        .start_process("forker", profile(Duration::from_millis(300)), pgid)
        .unwrap();
    let (eof_tx, eof_rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = stdout.read_to_end(&mut sink); // EOF once every writer is dead
        eof_tx.send(()).unwrap();
        task.finish(Outcome::Cancelled, None, Some(libc::SIGKILL))
            .unwrap();
    });

    let kill = procs
        .wait_for(|r| r.signal == GroupSignal::Kill, PATIENCE)
        .expect("a kill report");
    assert!(
        matches!(kill.outcome, KillOutcome::Confirmed { .. }),
        "{kill}"
    );
    assert!(live_in_group(pgid).is_empty(), "{:?}", live_in_group(pgid));
    eof_rx.recv_timeout(PATIENCE).expect("EOF after the kill");
    reader.join().unwrap();
    assert!(rec.wait_for("forker", "finished", PATIENCE));
    assert_eq!(
        rec.types_for("forker"),
        ["started", "stalled", "cancelling", "killed", "finished"]
    );
    let reports = procs.reports();
    assert_eq!(reports[0].outcome, KillOutcome::Sent, "{reports:?}");
}

fn cancel_now(pid: u32) -> (ProcessSink, TaskHandle, Guard) {
    let procs = ProcessSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(procs.clone())
        .build();
    let task = guard
        .start_process("target", profile(Duration::from_secs(60)), pid)
        .unwrap();
    guard.advance(Duration::from_millis(200));
    (procs, task, guard)
}

fn first_report(procs: &ProcessSink) -> stallwarden_sinks::process::KillReport {
    procs.wait_for(|_| true, PATIENCE).expect("a report")
}

// R6.4 safety: pid 1 is never signalled, whatever the runner says.
#[test]
fn pid_one_is_refused() {
    let (procs, _task, _guard) = cancel_now(1);
    let r = first_report(&procs);
    assert!(
        matches!(&r.outcome, KillOutcome::Refused { reason } if reason.contains("pid 1")),
        "{r}"
    );
}

// R6.4 safety: a command left in stallwarden's own group is refused, or the
// SIGTERM would hit the runner itself.
#[test]
fn a_pid_in_our_own_group_is_refused() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let (procs, _task, _guard) = cancel_now(child.id());
    let r = first_report(&procs);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        matches!(&r.outcome, KillOutcome::Refused { reason } if reason.contains("not a process group leader")),
        "{r}"
    );
}

// R6.4 safety (pid reuse): a live pid that does not lead its own group is
// refused and its group is left alone.
#[test]
fn a_live_pid_that_is_not_a_group_leader_is_refused() {
    let (mut child, _cleanup) = spawn_group("trap '' TERM; sleep 30 & wait");
    let pgid = child.id();
    let mut members = Vec::new();
    poll_until("the sleep in the group", || {
        members = live_in_group(pgid);
        members.len() == 2
    });
    let sleeper = *members.iter().find(|p| **p != pgid).unwrap();
    let (procs, _task, _guard) = cancel_now(sleeper);
    let r = first_report(&procs);
    assert!(
        matches!(&r.outcome, KillOutcome::Refused { reason } if reason.contains("not a process group leader")),
        "{r}"
    );
    assert_eq!(live_in_group(pgid).len(), 2, "nothing was signalled");
    let _ = killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL);
    let _ = child.wait();
}

// R3.5: a group that already exited is reported, not signalled.
#[test]
fn an_exited_group_is_reported_already_gone() {
    let (mut child, _cleanup) = spawn_group("exit 0");
    let pid = child.id();
    child.wait().unwrap();
    let (procs, _task, _guard) = cancel_now(pid);
    assert_eq!(first_report(&procs).outcome, KillOutcome::AlreadyGone);
}

/// A sink that never returns from an action until released.
#[derive(Debug)]
struct Hung(std::sync::Mutex<mpsc::Receiver<()>>);

impl Sink for Hung {
    fn on_action(&self, _: &Action) -> Result<(), SinkError> {
        let _ = self.0.lock().unwrap().recv();
        Ok(())
    }
}

// R6.2, R10.3: a cancel always reaches the process sink, even with a hung
// sink registered before it.
#[test]
fn a_hung_sink_does_not_keep_the_cancel_from_the_process_sink() {
    let (child, _cleanup) = spawn_group("exec sleep 30");
    let pgid = child.id();
    let (release, hold) = mpsc::channel();
    let procs = ProcessSink::new();
    let rec = RecordingSink::new();
    let guard = Guard::builder()
        .sink(Hung(std::sync::Mutex::new(hold)))
        .sink(procs.clone())
        .sink(rec.clone())
        .build();
    let task = guard
        .start_process("beside-hung", profile(Duration::from_secs(60)), pgid)
        .unwrap();
    let status = runner(child, task).join().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    assert_eq!(first_report(&procs).outcome, KillOutcome::Sent);
    assert!(rec
        .events()
        .iter()
        .any(|e| matches!(e.kind, EventKind::Cancelling { .. })));
    drop(release);
}

// --- What a kill report says ---

// R8.6/R3.4: an unconfirmed kill lists the pids still running, comma
// separated (kills `>` for `==` in the separator test of the report).
#[test]
fn an_unconfirmed_kill_lists_the_pids_left() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("build", Profile::default()).unwrap();
    let report = KillReport {
        task: task.id(),
        name: Arc::from("build"),
        pgid: 40,
        signal: GroupSignal::Kill,
        outcome: KillOutcome::Unconfirmed {
            left: vec![41, 42, 43],
        },
    };
    assert_eq!(
        report.to_string(),
        "task build: SIGKILL to process group 40: cleanup unconfirmed, still running: 41, 42, 43"
    );
}

// R6.4/R3.4: a kill that could not confirm the group gone, with no member
// pid left to name (the group still answers), says so rather than listing
// nothing (kills the `left.is_empty()` match guard replaced with `false`).
#[test]
fn an_unconfirmed_kill_with_no_pid_left_says_the_group_still_answers() {
    let guard = Guard::builder().clock(ManualClock::new()).build();
    let task = guard.start("build", Profile::default()).unwrap();
    let report = KillReport {
        task: task.id(),
        name: Arc::from("build"),
        pgid: 40,
        signal: GroupSignal::Kill,
        outcome: KillOutcome::Unconfirmed { left: vec![] },
    };
    assert_eq!(
        report.to_string(),
        "task build: SIGKILL to process group 40: cleanup unconfirmed, the group still answers"
    );
}

// R8.6: only an unconfirmed kill reads as unconfirmed.
#[test]
fn only_an_unconfirmed_kill_is_unconfirmed() {
    let report = |outcome| KillReport {
        task: watchdog_core::TaskId::from_raw(1),
        name: "k".into(),
        pgid: 4242,
        signal: GroupSignal::Kill,
        outcome,
    };
    assert!(report(KillOutcome::Unconfirmed { left: vec![4243] }).is_unconfirmed());
    for other in [
        KillOutcome::Sent,
        KillOutcome::AlreadyGone,
        KillOutcome::Confirmed {
            after: Duration::ZERO,
        },
        KillOutcome::Refused { reason: "r".into() },
        KillOutcome::Failed { error: "e".into() },
    ] {
        assert!(!report(other.clone()).is_unconfirmed(), "{other:?}");
    }
}

/// Every log line of this test binary, from a global `tracing` subscriber:
/// isolated sinks log on their own threads.
fn logs() -> String {
    use std::sync::{Mutex, OnceLock};
    #[derive(Clone)]
    struct Lines(&'static Mutex<Vec<u8>>);
    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    static LOG: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();
    let buf = *LOG.get_or_init(|| {
        let buf: &'static Mutex<Vec<u8>> = Box::leak(Box::default());
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || Lines(buf))
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        buf
    });
    String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
}

// R6.4, R8.7: a refused signal is logged as a warning that says why, not
// as a signal sent.
#[test]
fn a_refused_signal_is_logged_as_a_warning_with_its_reason() {
    logs();
    let procs = ProcessSink::new();
    let guard = Guard::builder()
        .clock(ManualClock::new())
        .sink(procs.clone())
        .build();
    let p = Profile::default()
        .idle(Duration::from_millis(200))
        .heartbeat_interval(None);
    let _task = guard.start_process("refused-one", p, 1).unwrap();
    guard.advance(Duration::from_millis(200));
    procs
        .wait_for(|_| true, Duration::from_secs(10))
        .expect("a report");
    let log = logs();
    let line = log
        .lines()
        .find(|l| l.contains("refused-one"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("signal refused"), "{line}");
    assert!(line.contains("pid 1 is never signalled"), "{line}");
}

// --- Groups and children, found and waited on ---

// R3.4: what is left of a group after a kill is found through /proc; this
// test process is a member of its own group (kills
// `group_members -> Ok(vec![])`).
#[test]
fn group_members_finds_this_process_in_its_group() {
    let me = std::process::id();
    let group = nix::unistd::getpgrp().as_raw() as u32;
    assert!(group_members(group).unwrap().contains(&me));
}

// R8.6: waiting for a group to be gone waits for it, within the bound: a
// group whose last member exits after a while is confirmed gone, not
// reported unconfirmed at the first look.
#[test]
fn a_group_that_ends_within_the_bound_is_confirmed_gone() {
    let mut child = std::process::Command::new("sleep")
        .arg("0.3")
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id();
    let waiter = std::thread::spawn(move || child.wait().unwrap());
    let gone = wait_group_gone(pgid, Duration::from_secs(30));
    assert!(matches!(gone, KillOutcome::Confirmed { .. }), "{gone:?}");
    assert!(waiter.join().unwrap().success());
}

// R6.4: `reap` waits up to its bound for a child that is still running and
// returns how it ended (kills `>=` for `<` in `reap`, which gave up with
// `Ok(None)` at once). A real child that runs for half a second; the
// bound is generous and no duration is asserted.
#[test]
fn reap_waits_within_its_bound_for_a_running_child() {
    let child = std::process::Command::new("sleep")
        .arg("0.5")
        .spawn()
        .unwrap();
    let pid = child.id();
    std::mem::forget(child); // a runner without a `Child` of its own
    assert_eq!(
        reap(pid, Duration::from_secs(60)).unwrap(),
        Some(Reaped::Exited(0))
    );
    // Reaped once: a second reap names the pid in its error.
    let err = reap(pid, Duration::ZERO).unwrap_err();
    assert!(err.to_string().contains(&pid.to_string()), "{err}");
}

// R8.6: pid 1 (and 0) are never waited on: they are refused as invalid
// before any waitpid, whose "not a child" would hide the caller's mistake.
#[test]
fn reap_refuses_pid_zero_and_one_as_invalid() {
    for pid in [0, 1] {
        let err = reap(pid, Duration::ZERO).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains(&format!("pid {pid}")), "{err}");
    }
}
