//! A drop-in you can trust (R8.8, R8.9, R8.10): each scenario runs under GNU
//! `timeout` (/usr/bin/timeout) and under the built `stallwarden`, on real
//! processes, and asserts the same exit status (as a shell sees it: the
//! code, or 128+N for a death by signal N) and the same fate of every
//! process, checked by pid. stallwarden's own extras (the stall line, the
//! `--events` lines) are asserted on top. Where stallwarden does better on
//! purpose (R8.6 stops what the command left running, where `timeout`
//! leaves it to init), the comparison runs with `--on-leftover keep`, and
//! the better fate is asserted separately.
//!
//! The commands tell their pids on their first stdout line (`pids A B`);
//! the test reads that line, which is also how it knows the command runs
//! before it sends a signal. Waits are bounded through pidfds (poll on
//! process exit), never a sleep; the only sleeps are the commands' own.
//! Every pid a test learns is SIGKILLed on drop, so nothing is left behind.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{events, stallwarden, types, wait::exits_within, KillOnDrop, BOUND};

/// GNU coreutils' `timeout`, the reference.
const TIMEOUT: &str = "/usr/bin/timeout";

/// Which wrapper runs the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wrapper {
    Timeout,
    Stallwarden,
}

/// One wrapped run in a fresh directory: the wrapper, its stdout as lines,
/// its stderr in a file (a leftover may hold a pipe open for a minute).
struct Run {
    wrapper: Wrapper,
    dir: tempfile::TempDir,
    child: Child,
    stdout: Option<BufReader<ChildStdout>>,
    pids: Vec<u32>,
}

impl Run {
    /// Starts `script` under `sh -c` in `wrapper`: `timeout 600` (or
    /// `timeout_args`) or `stallwarden run ARGS`, with stdout piped to this
    /// test unless `stdout` says otherwise.
    fn start(
        wrapper: Wrapper,
        timeout_args: &[&str],
        sg_args: &[&str],
        script: &str,
        stdout: Option<Stdio>,
    ) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = match wrapper {
            Wrapper::Timeout => {
                let mut c = Command::new(TIMEOUT);
                c.current_dir(dir.path()).stdin(Stdio::null());
                c.args(if timeout_args.is_empty() {
                    &["600"][..]
                } else {
                    timeout_args
                });
                c
            }
            Wrapper::Stallwarden => {
                let mut c = stallwarden(dir.path());
                let ev = dir.path().join("events.jsonl");
                c.args(["run", "--events", ev.to_str().unwrap()])
                    .args(sg_args);
                c.arg("--");
                c
            }
        };
        cmd.args(["sh", "-c", script]);
        common::with_default_signals(&mut cmd);
        let err = std::fs::File::create(dir.path().join("stderr")).unwrap();
        let piped = stdout.is_none();
        cmd.stdout(stdout.unwrap_or_else(Stdio::piped))
            .stderr(Stdio::from(err));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {wrapper:?}: {e}"));
        let stdout = piped.then(|| BufReader::new(child.stdout.take().unwrap()));
        Run {
            wrapper,
            dir,
            child,
            stdout,
            pids: Vec::new(),
        }
    }

    /// Reads the command's `pids A B ...` line; returns the pids.
    fn pids(&mut self) -> Vec<u32> {
        let pids = common::read_pids(self.stdout.as_mut().expect("stdout piped"));
        self.pids.extend(&pids);
        pids
    }

    /// Sends `sig` to the wrapper.
    fn signal(&self, sig: i32) {
        // SAFETY: plain syscall to our own child.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// Waits (bounded) for the wrapper to exit; returns its status and
    /// what it wrote to stderr. Killed and failed past [`BOUND`].
    fn finish(&mut self) -> (ExitStatus, String) {
        if !exits_within(self.child.id(), BOUND) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "the {:?} wrapper did not exit within {BOUND:?}: {}",
                self.wrapper,
                self.stderr()
            );
        }
        let status = self.child.wait().unwrap();
        (status, self.stderr())
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// The rest of stdout, to its end (only where nothing holds it open).
    fn rest(&mut self) -> String {
        let mut s = String::new();
        self.stdout
            .as_mut()
            .expect("stdout piped")
            .read_to_string(&mut s)
            .unwrap();
        s
    }

    fn events(&self) -> Vec<Value> {
        events(&self.dir.path().join("events.jsonl"))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        drop(KillOnDrop(std::mem::take(&mut self.pids)));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status as a shell sees it: the code, or 128+N for signal N.
fn shell_status(s: ExitStatus) -> i32 {
    s.code()
        .or_else(|| s.signal().map(|n| 128 + n))
        .expect("exited or signalled")
}

/// Whether each pid still runs once the wrapper has exited. What a wrapper
/// stops was signalled before it exited, so it is gone within moments; 2 s
/// is the bound for that.
fn fates(pids: &[u32]) -> Vec<bool> {
    pids.iter()
        .map(|&p| !exits_within(p, Duration::from_secs(2)))
        .collect()
}

/// The `/proc` state of each pid, for failure messages.
fn states(pids: &[u32]) -> String {
    pids.iter()
        .map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat"));
            let state: String = stat.map_or("gone".into(), |s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .chars()
                    .take(12)
                    .collect()
            });
            format!("{p}: {state}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn event<'a>(events: &'a [Value], ty: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == ty)
        .unwrap_or_else(|| panic!("no {ty} in {:?}", types(events)))
}

fn named_pids(event: &Value) -> Vec<u64> {
    event["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("no processes in {event}"))
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect()
}

// ------------------------------------------------------------------ R8.8

/// The command exits 0 after 0.5 s, leaving a child that ignores SIGTERM;
/// the idle budget (2 s) runs out during the leftover grace (5 s).
const EXIT_0_LEFTOVER: &str = "echo hi >&2; (trap '' TERM; exec sleep 60) >/dev/null 2>&1 & \
     echo \"pids $!\"; sleep 0.5; exit 0";

// R8.8: a command that exited by itself keeps its 0: the leftover grace has
// its own timer and the idle budget no longer judges. Same status and fate
// as `timeout` with `--on-leftover keep`; by default (R8.6) the leftover is
// stopped, named, and the status still 0.
#[test]
fn r8_8_a_finished_command_keeps_its_0_through_the_leftover_grace() {
    let sg = ["--idle", "2s", "--grace", "5s"];
    let mut t = Run::start(Wrapper::Timeout, &["2"], &[], EXIT_0_LEFTOVER, None);
    let pids = t.pids();
    let (ts, _) = t.finish();
    let t_fate = fates(&pids);

    let keep = [&sg[..], &["--on-leftover", "keep"]].concat();
    let mut k = Run::start(Wrapper::Stallwarden, &[], &keep, EXIT_0_LEFTOVER, None);
    let kpids = k.pids();
    let (ks, kerr) = k.finish();
    assert_eq!(shell_status(ks), shell_status(ts), "{kerr}");
    assert_eq!(shell_status(ks), 0, "{kerr}");
    assert_eq!(fates(&kpids), t_fate, "fates differ from timeout's");
    assert_eq!(t_fate, [true], "the leftover runs on under timeout");

    let mut s = Run::start(Wrapper::Stallwarden, &[], &sg, EXIT_0_LEFTOVER, None);
    let spids = s.pids();
    let (ss, serr) = s.finish();
    assert_eq!(shell_status(ss), 0, "{serr}");
    assert_eq!(fates(&spids), [false], "R8.6: the leftover is stopped");
    let evs = s.events();
    assert!(!types(&evs).contains(&"cancelling".to_owned()), "{evs:?}");
    assert!(!serr.contains("budget"), "no stall line: {serr}");
    assert_eq!(named_pids(event(&evs, "leftover")), [u64::from(spids[0])]);
    let last = evs.last().unwrap();
    assert_eq!(
        (&last["type"], &last["outcome"], &last["exit_code"]),
        (&"finished".into(), &"completed".into(), &0.into()),
        "{last}"
    );
}

/// The command exits 3 after 1 s, leaving a child that holds its stdout.
const EXIT_3_LEAK: &str = "echo hi >&2; sleep 60 & echo \"pids $!\"; sleep 1; exit 3";

// R8.8, R8.5: the leak wait (3 s) outlasts the idle budget (1.5 s) and
// still the command's 3 is the status, as under `timeout`.
#[test]
fn r8_8_a_finished_command_keeps_its_3_through_the_leak_wait() {
    let sg = ["--idle", "1.5s", "--leak-timeout", "3s"];
    let mut t = Run::start(Wrapper::Timeout, &["10"], &[], EXIT_3_LEAK, None);
    let pids = t.pids();
    let (ts, _) = t.finish();
    let t_fate = fates(&pids);

    let keep = [&sg[..], &["--on-leftover", "keep"]].concat();
    let mut k = Run::start(Wrapper::Stallwarden, &[], &keep, EXIT_3_LEAK, None);
    let kpids = k.pids();
    let (ks, kerr) = k.finish();
    assert_eq!(shell_status(ks), shell_status(ts), "{kerr}");
    assert_eq!(shell_status(ks), 3, "{kerr}");
    assert_eq!(fates(&kpids), t_fate);

    let mut s = Run::start(Wrapper::Stallwarden, &[], &sg, EXIT_3_LEAK, None);
    let spids = s.pids();
    let (ss, serr) = s.finish();
    assert_eq!(shell_status(ss), 3, "{serr}");
    assert_eq!(fates(&spids), [false], "R8.6: the holder is stopped");
    let evs = s.events();
    assert_eq!(named_pids(event(&evs, "leaked")), [u64::from(spids[0])]);
    assert!(!types(&evs).contains(&"cancelling".to_owned()), "{evs:?}");
    let last = evs.last().unwrap();
    assert_eq!(
        (&last["outcome"], &last["exit_code"]),
        (&"failed".into(), &3.into())
    );
}

// ------------------------------------------------------------------ R8.9

/// A command with a background child; the command itself execs `sleep`.
/// The child tells the pids once it runs (its own from /proc/self/stat),
/// so the shell's SIGINT/SIGQUIT ignoring for background jobs is in place,
/// and half a second later: `timeout` 9.1 exits at once, leaving the
/// command, on a signal that arrives before its `fork` has returned in the
/// parent, which a busy machine can delay past the child's first line.
const TWO_SLEEPS: &str = "(read -r me _ < /proc/self/stat; sleep 0.5; echo \"pids $$ $me\"; \
     exec sleep 60) & exec sleep 60";

// R8.9, R8.2: HUP, INT, QUIT and TERM sent to the wrapper reach the
// command's group; the status is 128+N, as `timeout` gives, and every
// process ends as under `timeout` (a shell's background child ignores INT
// and QUIT, under both). stallwarden itself never dies of the signal while
// the command runs: it writes `finished`, then, as the command died of
// it, ends with the same signal, as `timeout` does (R8.16).
#[test]
fn r8_9_hup_int_quit_term_reach_the_group_as_under_timeout() {
    for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM] {
        let mut t = Run::start(Wrapper::Timeout, &[], &[], TWO_SLEEPS, None);
        let tpids = t.pids();
        t.signal(sig);
        let (ts, _) = t.finish();
        let t_fate = fates(&tpids);

        let sg = ["--idle", "1m", "--on-leftover", "keep"];
        let mut s = Run::start(Wrapper::Stallwarden, &[], &sg, TWO_SLEEPS, None);
        let spids = s.pids();
        s.signal(sig);
        let (ss, serr) = s.finish();
        assert_eq!(shell_status(ss), shell_status(ts), "signal {sig}: {serr}");
        assert_eq!(shell_status(ss), 128 + sig, "signal {sig}: {serr}");
        assert_eq!(
            ss.signal(),
            Some(sig),
            "R8.16: ends with the command's {sig}"
        );
        assert_eq!(
            fates(&spids),
            t_fate,
            "signal {sig}: fates differ: {}",
            states(&[&tpids[..], &spids[..]].concat())
        );
        let evs = s.events();
        let last = evs.last().unwrap();
        assert_eq!(
            (&last["type"], &last["signal"]),
            (&"finished".into(), &sig.into())
        );
        assert!(!types(&evs).contains(&"cancelling".to_owned()));
    }
}

// R8.9: a command that ignores SIGHUP outlives it, and so does its
// wrapper, which exits with the command's own status, as `timeout` does.
#[test]
fn r8_9_a_hup_the_command_ignores_leaves_both_running() {
    // Half a second before the first line, as in TWO_SLEEPS.
    let script = "trap '' HUP; sleep 0.5; echo \"pids $$\"; sleep 2; exit 4";
    let mut t = Run::start(Wrapper::Timeout, &[], &[], script, None);
    t.pids();
    t.signal(libc::SIGHUP);
    let (ts, _) = t.finish();

    let mut s = Run::start(Wrapper::Stallwarden, &[], &["--idle", "1m"], script, None);
    s.pids();
    s.signal(libc::SIGHUP);
    let (ss, serr) = s.finish();
    assert_eq!(shell_status(ss), shell_status(ts), "{serr}");
    assert_eq!(ss.code(), Some(4), "{serr}");
    assert_eq!(s.events().last().unwrap()["exit_code"], 4);
}

// R8.9: USR1, USR2, ALRM and the real-time signals reach the group too. The reference here is
// coreutils 9.10's `timeout`, which forwards every terminating signal; the
// 9.1 installed on Debian 12 dies of USR1 itself and leaves the command
// running under init, so only stallwarden runs.
#[test]
fn r8_9_usr1_usr2_alrm_realtime_reach_the_group() {
    for sig in [
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGRTMIN() + 3,
    ] {
        let sg = ["--idle", "1m"];
        let mut s = Run::start(Wrapper::Stallwarden, &[], &sg, TWO_SLEEPS, None);
        let spids = s.pids();
        s.signal(sig);
        let (ss, serr) = s.finish();
        assert_eq!(shell_status(ss), 128 + sig, "signal {sig}: {serr}");
        assert_eq!(ss.signal(), Some(sig), "R8.16: signal {sig}: {serr}");
        assert_eq!(fates(&spids), [false, false], "signal {sig}");
        assert_eq!(s.events().last().unwrap()["signal"], sig);
    }
}

// R8.9: a stopped command gets SIGCONT after the cancel's SIGTERM and runs
// its handler at once, as under `timeout` (124 both); stallwarden's grace
// period (1 h) is never waited out, no SIGKILL is sent, and the stall line
// names the idle budget.
#[test]
fn r8_9_a_stopped_command_runs_its_sigterm_handler_on_a_cancel() {
    let script = "trap 'echo handled; exit 7' TERM; echo \"pids $$\"; kill -STOP $$; exit 0";
    let mut t = Run::start(Wrapper::Timeout, &["1"], &[], script, None);
    t.pids();
    let (ts, _) = t.finish();
    let t_out = t.rest();

    let sg = ["--idle", "1s", "--grace", "1h"];
    let mut s = Run::start(Wrapper::Stallwarden, &[], &sg, script, None);
    let spids = s.pids();
    let (ss, serr) = s.finish();
    let s_out = s.rest();
    assert_eq!(shell_status(ss), shell_status(ts), "{serr}");
    assert_eq!(shell_status(ss), 124, "{serr}");
    assert_eq!((t_out.as_str(), s_out.as_str()), ("handled\n", "handled\n"));
    assert_eq!(fates(&spids), [false]);
    assert!(serr.contains("idle budget 1s exceeded"), "{serr}");
    let evs = s.events();
    assert!(!types(&evs).contains(&"killed".to_owned()), "{evs:?}");
    assert_eq!(evs.last().unwrap()["exit_code"], 7);
}

/// A command that exits 0 at once, leaving a child on its stdout and a
/// helper that sends SIGTERM to the wrapper ($PPID) a second later, while
/// the wrapper waits for the leak or the leftover.
const SIGNAL_IN_AFTERMATH: &str = "(trap '' TERM; exec sleep 60) & echo \"pids $!\"; sg=$PPID; \
     (trap '' TERM; sleep 1; kill -TERM $sg) >/dev/null 2>&1 & exit 0";

// R8.9, R8.5: a signal during the leak wait (1 h) ends it at once; the
// status stays the command's 0, and the child lives on as under `timeout`
// (`--on-leftover keep`).
#[test]
fn r8_9_a_signal_ends_the_leak_wait_at_once() {
    let mut t = Run::start(Wrapper::Timeout, &[], &[], SIGNAL_IN_AFTERMATH, None);
    let tpids = t.pids();
    let (ts, _) = t.finish();
    let t_fate = fates(&tpids);

    let sg = ["--leak-timeout", "1h", "--on-leftover", "keep"];
    let mut s = Run::start(Wrapper::Stallwarden, &[], &sg, SIGNAL_IN_AFTERMATH, None);
    let spids = s.pids();
    let (ss, serr) = s.finish();
    assert_eq!(shell_status(ss), shell_status(ts), "{serr}");
    assert_eq!(ss.code(), Some(0), "{serr}");
    assert_eq!(fates(&spids), t_fate);
    assert_eq!(t_fate, [true]);
    assert!(serr.contains("SIGTERM after the command exited"), "{serr}");
    let types = types(&s.events());
    assert_eq!(types.last().unwrap(), "finished", "{types:?}");
    assert!(types.contains(&"leaked".to_owned()), "{types:?}");
}

// R8.9, R8.6: a signal during the leftover grace (1 h) ends it at once:
// the leftover, which ignores SIGTERM, is killed (where `timeout` leaves
// it running), and the status stays the command's 0.
#[test]
fn r8_9_a_signal_ends_the_leftover_grace_at_once() {
    // Nothing holds the pipes here: no leak wait, the leftovers at once.
    let script =
        SIGNAL_IN_AFTERMATH.replace("exec sleep 60) &", "exec sleep 60) >/dev/null 2>&1 &");
    let sg = ["--grace", "1h"];
    let mut s = Run::start(Wrapper::Stallwarden, &[], &sg, &script, None);
    let spids = s.pids();
    let (ss, serr) = s.finish();
    assert_eq!(ss.code(), Some(0), "{serr}");
    assert_eq!(fates(&spids), [false], "the leftover was not killed");
    let evs = s.events();
    assert!(named_pids(event(&evs, "leftover")).contains(&u64::from(spids[0])));
    assert_eq!(evs.last().unwrap()["outcome"], "completed");
}

// R8.9: when a thread it needs cannot be had after the command started
// (injected through the hidden STALLWARDEN_TEST_FAIL), stallwarden kills the
// command's group, says why and exits 124, never 125 ("did not start") and
// never with the command left running. `timeout` has no threads to lose;
// its guarantee is the same: no command outlives it unwatched.
#[test]
fn r8_9_no_thread_after_the_start_stops_the_command_not_125() {
    for (point, says) in [
        ("waiter", "cannot wait for the command"),
        ("pump", "cannot copy the command's stdout"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ev = dir.path().join("events.jsonl");
        let child = stallwarden(dir.path())
            .env("STALLWARDEN_TEST_FAIL", point)
            .args(["run", "--events", ev.to_str().unwrap(), "--"])
            .args(["sh", "-c", "sleep 60 & exec sleep 60"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = common::wait_bounded(child);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(124), "{point}: {err}");
        assert!(err.contains(says), "{point}: {err}");
        let evs = events(&ev);
        let pid = evs[0]["pid"].as_u64().unwrap() as u32;
        let _cleanup = KillOnDrop(vec![pid]);
        assert!(
            exits_within(pid, Duration::from_secs(10)),
            "{point}: still runs"
        );
        assert!(types(&evs).contains(&"cancelling".to_owned()), "{point}");
        assert_eq!(evs.last().unwrap()["outcome"], "cancelled", "{point}");
    }
}

// ----------------------------------------------------------------- R8.10

// R8.10: `yes | head -1`: when the reader goes, the command dies of SIGPIPE
// at once and the status is 141, as under `timeout`; so for `seq`.
#[test]
fn r8_10_a_reader_that_goes_away_ends_the_command_with_141() {
    for script in ["exec yes", "exec seq 1 50000000"] {
        let mut statuses = Vec::new();
        for w in [Wrapper::Timeout, Wrapper::Stallwarden] {
            let mut r = Run::start(w, &[], &["--idle", "1m"], script, None);
            let mut line = String::new();
            r.stdout.as_mut().unwrap().read_line(&mut line).unwrap();
            assert!(!line.is_empty(), "{w:?}: no output");
            // The reader goes away, as `head -1` does.
            drop(r.stdout.take());
            let (status, err) = r.finish();
            statuses.push((shell_status(status), err));
        }
        assert_eq!(statuses[0].0, 141, "timeout: {script}");
        assert_eq!(statuses[1].0, 141, "{script}: {}", statuses[1].1);
    }
}

// R8.10: output to a full disk (/dev/full): the failure is said once and
// the run exits 1, as under `timeout` (where the command itself fails to
// write and exits 1), never 0.
#[test]
fn r8_10_a_full_disk_is_said_once_and_never_exits_0() {
    for script in ["echo hi", "exec head -c 5M /dev/urandom"] {
        let full = || {
            let f = std::fs::OpenOptions::new().write(true).open("/dev/full");
            Some(Stdio::from(f.unwrap()))
        };
        let mut t = Run::start(Wrapper::Timeout, &[], &[], script, full());
        let (ts, _) = t.finish();
        let mut s = Run::start(Wrapper::Stallwarden, &[], &[], script, full());
        let (ss, serr) = s.finish();
        assert_eq!(shell_status(ts), 1, "timeout: {script}");
        assert_eq!(shell_status(ss), shell_status(ts), "{script}: {serr}");
        assert_eq!(
            serr.matches("cannot write the command's stdout").count(),
            1,
            "{script}: {serr}"
        );
        assert!(serr.contains("No space left on device"), "{serr}");
    }
}

// R8.10: the same for stderr: when the reader of the wrapper's stderr goes
// away, the command's stderr breaks and it dies of SIGPIPE, 141, as under
// `timeout`.
#[test]
fn r8_10_a_stderr_reader_that_goes_away_ends_the_command_with_141() {
    let dir = tempfile::tempdir().unwrap();
    let mut statuses = Vec::new();
    for w in [Wrapper::Timeout, Wrapper::Stallwarden] {
        let mut cmd = match w {
            Wrapper::Timeout => {
                let mut c = Command::new(TIMEOUT);
                c.current_dir(dir.path()).stdin(Stdio::null()).arg("600");
                c
            }
            Wrapper::Stallwarden => {
                let mut c = stallwarden(dir.path());
                c.args(["run", "--idle", "1m", "--"]);
                c
            }
        };
        let mut child = cmd
            .args(["sh", "-c", "exec yes >&2"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _cleanup = KillOnDrop(vec![child.id()]);
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert_eq!(line, "y\n", "{w:?}");
        drop(err);
        assert!(exits_within(child.id(), BOUND), "{w:?} did not end");
        statuses.push(shell_status(child.wait().unwrap()));
    }
    assert_eq!(statuses, [141, 141]);
}
