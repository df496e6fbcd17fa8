//! Never blame the command for stallwarden's own limits (R8.16): each case
//! of issue 45 on real processes, driving the built `stallwarden`, side by
//! side with GNU `timeout` (/usr/bin/timeout) where it has the case. A
//! limit on stallwarden's own process (a file-size limit, few descriptors)
//! is set with setrlimit(2) between fork and exec of the wrapper, as
//! `ulimit` in a shell does; the command inherits it, as under `timeout`.
//!
//! The commands tell their pids in a file (`pid`) in the run's fresh
//! directory, since their stdout is what is being limited. Waits are
//! bounded through pidfds, never blind sleeps; the only sleeps are the
//! commands' own.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

mod common;
use common::{events, stallwarden, types, wait::exits_within, KillOnDrop, BOUND};

/// GNU coreutils' `timeout`, the reference.
const TIMEOUT: &str = "/usr/bin/timeout";

/// The status as a shell sees it: the code, or 128+N for signal N.
fn shell_status(s: ExitStatus) -> i32 {
    s.code()
        .or_else(|| s.signal().map(|n| 128 + n))
        .expect("exited or signalled")
}

/// Sets `resource` to `limit` (soft and hard) in the child before its
/// exec, as `ulimit` does in a subshell.
fn limit(cmd: &mut Command, resource: libc::__rlimit_resource_t, limit: u64) {
    // SAFETY: between fork and exec the closure only calls setrlimit(2),
    // which is async-signal-safe, on a struct on its own stack.
    unsafe {
        cmd.pre_exec(move || {
            let l = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(resource, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The pid a command wrote to `dir/pid` (`echo $$ > pid`), once there.
fn pid_in(dir: &Path, wrapper: u32) -> u32 {
    let file = dir.join("pid");
    common::wait::until(wrapper, BOUND, Duration::from_millis(50), || {
        std::fs::read_to_string(&file)
            .ok()
            .filter(|s| s.ends_with('\n'))
            .and_then(|s| s.trim().parse().ok())
    })
    .unwrap_or_else(|| panic!("the command never wrote its pid"))
}

/// Runs `wrapper_args... sh -c script` in `dir` with the file-size limit
/// at `bytes`, stdout to `dir/out` and stderr to this test; returns the
/// wrapper's status, its stderr and whether the command's pid was gone
/// by then (bounded).
fn under_file_size_limit(
    dir: &Path,
    mut cmd: Command,
    bytes: u64,
    script: &str,
) -> (ExitStatus, String, bool) {
    cmd.args(["sh", "-c", script]);
    common::with_default_signals(&mut cmd);
    limit(&mut cmd, libc::RLIMIT_FSIZE, bytes);
    let out = std::fs::File::create(dir.join("out")).unwrap();
    let child = cmd
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = pid_in(dir, child.id());
    let _cleanup = KillOnDrop(vec![pid]);
    let out = common::finish_within(child, BOUND, "the wrapper");
    let gone = exits_within(pid, Duration::from_secs(5));
    (out.status, common::stderr(&out), gone)
}

// ----------------------------------------------------------- file size

/// Writes 2000 bytes (past a 1 KiB limit on the wrapper's stdout), then
/// waits in silence.
const PAST_THE_LIMIT: &str = "echo $$ > pid; head -c 2000 /dev/zero; exec sleep 60";

// R8.16, R8.10: `( ulimit -f 1; stallwarden run --idle 2s -- ... > out )`:
// stallwarden's own write past the limit fails with EFBIG (said once, as a
// failing output), it never dies of SIGXFSZ, and the silent command is
// still stopped at the idle budget: 124 and the command gone, as under
// `timeout 2`.
#[test]
fn r8_16_a_file_size_limit_on_stdout_is_a_failing_output_not_our_death() {
    let t_dir = tempfile::tempdir().unwrap();
    let mut t = Command::new(TIMEOUT);
    t.arg("2");
    let (ts, _, t_gone) = under_file_size_limit(t_dir.path(), t, 1024, PAST_THE_LIMIT);
    assert_eq!(shell_status(ts), 124, "timeout");
    assert!(t_gone);

    let dir = tempfile::tempdir().unwrap();
    let mut s = stallwarden(dir.path());
    s.args(["run", "--idle", "2s", "--"]);
    let (ss, serr, gone) = under_file_size_limit(dir.path(), s, 1024, PAST_THE_LIMIT);
    assert_eq!(shell_status(ss), 124, "{serr}");
    assert!(gone, "the command outlived stallwarden: {serr}");
    assert_eq!(
        serr.matches("cannot write the command's stdout").count(),
        1,
        "{serr}"
    );
    assert!(serr.contains("File too large"), "{serr}");
    assert!(serr.contains("idle budget 2s exceeded"), "{serr}");
    // What fitted under the limit was written, nothing more.
    let out = std::fs::metadata(dir.path().join("out")).unwrap().len();
    assert_eq!(out, 1024);
}

// R8.16, R8.7: an `--events` file growing past the limit loses events
// (said once), never stallwarden: the command is stopped at its budget.
#[test]
fn r8_16_an_events_file_past_the_file_size_limit_is_said_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = stallwarden(dir.path());
    s.args(["run", "--idle", "2s", "--events", "ev.jsonl", "--"]);
    // Silent from the start: no output of the command is written at all.
    // The `started` line fits under 300 bytes, the `stalled` one does not.
    let (ss, serr, gone) =
        under_file_size_limit(dir.path(), s, 300, "echo $$ > pid; exec sleep 60");
    assert_eq!(shell_status(ss), 124, "{serr}");
    assert!(gone, "the command outlived stallwarden: {serr}");
    assert_eq!(serr.matches("events are being lost").count(), 1, "{serr}");
    assert!(serr.contains("File too large"), "{serr}");
    assert!(
        std::fs::metadata(dir.path().join("ev.jsonl"))
            .unwrap()
            .len()
            <= 300
    );
    // R8.16: whole lines or none: what the file holds parses line by line.
    let evs = events(&dir.path().join("ev.jsonl"));
    assert_eq!(types(&evs).first().map(String::as_str), Some("started"));
}

// R8.16: the command still meets its own file-size limit as it would
// without stallwarden: SIGXFSZ is back at its default for it, so `head`
// writing past the limit dies of it (the shell says 153), as under
// `timeout`.
#[test]
fn r8_16_the_command_keeps_its_own_sigxfsz() {
    let script = "echo $$ > pid; head -c 2000 /dev/zero > big; echo $?";
    let mut said = Vec::new();
    for wrapper in ["timeout", "stallwarden"] {
        let dir = tempfile::tempdir().unwrap();
        let cmd = if wrapper == "timeout" {
            let mut t = Command::new(TIMEOUT);
            t.arg("20");
            t
        } else {
            let mut s = stallwarden(dir.path());
            s.args(["run", "--idle", "20s", "--"]);
            s
        };
        let (status, err, _) = under_file_size_limit(dir.path(), cmd, 1024, script);
        assert_eq!(shell_status(status), 0, "{wrapper}: {err}");
        said.push(std::fs::read_to_string(dir.path().join("out")).unwrap());
    }
    assert_eq!(said, ["153\n", "153\n"]);
}

// ------------------------------------------------- stallwarden held up

/// Writes 20 000 lines as fast as the pipe takes them.
const TWENTY_THOUSAND: &str = "i=0; while [ $i -lt 20000 ]; do echo \"line $i\"; i=$((i+1)); done";

// R8.16: `stallwarden run --idle 2s -- GEN | (sleep 6; wc -l)`: a reader
// downstream that takes 6 s to start holds stallwarden's own write; bytes
// the command wrote that stallwarden has not passed on are progress, so
// all 20 000 lines arrive and the status is 0, as under `timeout 20`; no
// stall line blames the command for the pipe stallwarden holds.
#[test]
fn r8_16_a_slow_reader_downstream_is_not_the_commands_silence() {
    let dir = tempfile::tempdir().unwrap();
    let sw = env!("CARGO_BIN_EXE_stallwarden");
    for (wrapper, args) in [(TIMEOUT, "20"), (sw, "run --idle 2s --events ev.jsonl --")] {
        // The 6 s are the slow reader's own, the scenario itself.
        let script = format!(
            "{{ {wrapper} {args} sh -c '{TWENTY_THOUSAND}' 2>err; echo $? > rc; }} \
             | (sleep 6; wc -l)"
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        common::with_default_signals(&mut cmd);
        let out = common::finish_within(cmd.spawn().unwrap(), BOUND, "the pipeline");
        let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
        let rc = std::fs::read_to_string(dir.path().join("rc")).unwrap();
        let lines = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert_eq!(
            (rc.trim(), lines.as_str()),
            ("0", "20000"),
            "{wrapper}: {err}"
        );
        assert!(err.is_empty(), "{wrapper}: {err}");
    }
    let evs = events(&dir.path().join("ev.jsonl"));
    assert_eq!(types(&evs), ["started", "finished"], "{evs:?}");
}

// R8.16 with R5.12: output held up by a reader downstream counts as work
// only when it is work. A loop flooding one line (`yes waiting`) into a
// reader that never reads fills the pipes; the bytes stallwarden holds
// only repeat what it has seen, so the idle budget still runs out: 124,
// the stall line saying what repeats.
#[test]
fn r8_16_a_loop_held_up_by_a_slow_reader_is_still_a_loop() {
    let dir = tempfile::tempdir().unwrap();
    let sw = env!("CARGO_BIN_EXE_stallwarden");
    // The reader reads nothing for 8 s: the stall comes at 2 s; the run
    // ends once the reader goes (the bytes stallwarden holds are still
    // the reader's to take until then, R8.10).
    let script = format!("{{ {sw} run --idle 2s -- yes waiting 2>err; echo $? > rc; }} | sleep 8");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    common::with_default_signals(&mut cmd);
    cmd.process_group(0);
    let mut child = cmd.spawn().unwrap();
    let rc_file = dir.path().join("rc");
    let rc = common::wait::until(child.id(), BOUND, Duration::from_millis(50), || {
        let rc = std::fs::read_to_string(&rc_file).ok()?;
        (!rc.trim().is_empty()).then(|| rc.trim().to_owned())
    });
    // The pipeline's group, the reader that never reads included.
    // SAFETY: plain syscall on the group this test started.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap_or_default();
    assert_eq!(rc.as_deref(), Some("124"), "{err}");
    assert!(err.contains("the output repeats \"waiting\""), "{err}");
}

// R8.16, R3.10: stallwarden itself stopped (`kill -STOP`) for 3 s under
// `--idle 2s` while the command writes a line every 200 ms: what waits in
// the pipe when it runs again was written before the verdict and is read
// before judging; the time stallwarden did not run is not the command's
// silence. Four runs at once (the race after SIGCONT is between the
// verdict and the pump: on the old code 2 runs in 8 ended 124), each
// ending 0 with all 40 lines.
#[test]
fn r8_16_stallwarden_stopped_past_the_budget_does_not_stall_the_command() {
    let script = "echo start; for i in $(seq 40); do echo $i; sleep 0.2; done";
    let runs: Vec<_> = (0..4)
        .map(|n| {
            std::thread::spawn(move || {
                let dir = tempfile::tempdir().unwrap();
                let mut cmd = stallwarden(dir.path());
                cmd.args(["run", "--idle", "2s", "--", "sh", "-c", script])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                common::with_default_signals(&mut cmd);
                let mut child = cmd.spawn().unwrap();
                let _cleanup = KillOnDrop(vec![child.id()]);
                let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
                let mut first = String::new();
                std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
                assert_eq!(first, "start\n", "run {n}");
                // The scenario: stallwarden does not run for 3 s.
                let pid = child.id() as i32;
                // SAFETY: plain syscalls to our own child.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                std::thread::sleep(Duration::from_secs(3));
                unsafe { libc::kill(pid, libc::SIGCONT) };
                let mut rest = String::new();
                std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
                let out = common::finish_within(child, BOUND, "stallwarden");
                let err = common::stderr(&out);
                assert_eq!(out.status.code(), Some(0), "run {n}: {err}");
                assert_eq!(rest.lines().count(), 40, "run {n}: {err}");
                assert!(err.is_empty(), "run {n}: {err}");
            })
        })
        .collect();
    for r in runs {
        r.join().unwrap();
    }
}

// ------------------------------------------------------ may not kill

/// A program that makes itself root (it is setuid root), so a user
/// cannot signal it, ignores SIGTERM, says its pid and waits 60 s.
const UNKILLABLE_C: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    if (setuid(0) != 0) { perror("setuid"); return 3; }
    signal(SIGTERM, SIG_IGN);
    printf("pids %d\n", (int)getpid());
    fflush(stdout);
    for (int i = 0; i < 60; i++) sleep(1);
    return 0;
}
"#;

/// Builds [`UNKILLABLE_C`] as a setuid-root program in `dir` (made
/// readable by all), or says why it cannot be had here.
fn setuid_unkillable(dir: &Path) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: no setuid-root program can be made".into());
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        return Err("util-linux `setpriv` is not installed".into());
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let src = dir.join("unkillable.c");
    let bin = dir.join("unkillable");
    std::fs::write(&src, UNKILLABLE_C).unwrap();
    let cc = Command::new("cc")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .map_err(|e| format!("no C compiler: {e}"))?;
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o4755)).unwrap();
    Ok(bin)
}

// R8.16: a command that made itself root (a setuid program) ignores
// SIGTERM and refuses SIGKILL (EPERM) to stallwarden run as `nobody`:
// both refusals are said in plain words (no raw log lines), and
// stallwarden gives up once the SIGKILL after the grace period is refused:
// 137 at about idle + grace, as `timeout -k 1 1` gives 137 at 2 s, where
// it used to wait for the command's own end.
#[test]
fn r8_16_a_command_stallwarden_may_not_kill_is_said_and_given_up() {
    let dir = tempfile::tempdir().unwrap();
    let bin = match setuid_unkillable(dir.path()) {
        Ok(b) => b,
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let sw = env!("CARGO_BIN_EXE_stallwarden");
    let mut results = Vec::new();
    for wrapper in [
        &[TIMEOUT, "-k", "1", "1"][..],
        &[sw, "run", "--idle", "1s", "--grace", "1s", "--"][..],
    ] {
        // The command holds the wrapper's stdout and stderr open for a
        // minute: stderr goes to a file, and only the pids line is read.
        let err_path = dir.path().join("err");
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .args(wrapper)
            .arg(&bin)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&err_path).unwrap());
        common::with_default_signals(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let pids = common::read_pids(&mut stdout);
        let _cleanup = KillOnDrop(pids.clone());
        let status = common::wait::child_within(&mut child, BOUND);
        let err = std::fs::read_to_string(&err_path).unwrap();
        let Some(status) = status else {
            let _ = child.kill();
            panic!("{} did not end within {BOUND:?}: {err}", wrapper[0]);
        };
        // It was never stopped: still there once the wrapper is gone.
        assert!(!exits_within(pids[0], Duration::ZERO), "{}", wrapper[0]);
        results.push((shell_status(status), err));
    }
    assert_eq!(results[0].0, 137, "timeout: {}", results[0].1);
    let (status, err) = &results[1];
    assert_eq!(*status, 137, "{err}");
    assert!(
        err.contains("cannot stop the command: SIGTERM to its process group")
            && err.contains("cannot stop the command: SIGKILL to its process group")
            && err.contains("Operation not permitted")
            && err.contains("giving up"),
        "{err}"
    );
    assert!(
        !err.contains("ERROR") && !err.contains(" WARN "),
        "raw log lines: {err}"
    );
}

// ------------------------------------------------- few descriptors

/// A user id no account and no other test uses: the process limit counts
/// every task of the user, so another test's processes as `nobody` would
/// shift the limits at which this one's fail.
const LONE_UID: &str = "54321";

/// Runs `wrapper... true` with `resource` at `n`, as user [`LONE_UID`]
/// when `as_user` (root ignores the process limit); returns the status
/// and stderr.
fn true_under_limit(
    resource: libc::__rlimit_resource_t,
    n: u64,
    as_user: bool,
    wrapper: &[&str],
) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = if as_user {
        let mut c = Command::new("setpriv");
        c.args([
            &format!("--reuid={LONE_UID}"),
            &format!("--regid={LONE_UID}"),
            "--clear-groups",
            "--",
        ]);
        c.args(wrapper);
        c
    } else {
        let mut c = Command::new(wrapper[0]);
        c.args(&wrapper[1..]);
        c
    };
    cmd.arg("true")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    common::with_default_signals(&mut cmd);
    limit(&mut cmd, resource, n);
    let out = common::finish_within(cmd.spawn().unwrap(), BOUND, wrapper[0]);
    (shell_status(out.status), common::stderr(&out))
}

// R8.16: `( ulimit -n N; stallwarden run --idle 1s -- true )` for every N
// from 4 (below that the loader itself fails) to 24: a 0, or a 125 with a
// `stallwarden:` line saying the descriptors ran out; never the panic in
// the signal runtime's set-up (101) it gave at 6 and 7, never a 126
// blaming the command for stallwarden's own limit.
#[test]
fn r8_16_a_low_descriptor_limit_is_125_with_a_message_never_a_panic() {
    let sw = env!("CARGO_BIN_EXE_stallwarden");
    let mut seen = Vec::new();
    for n in 4..=24 {
        let (status, err) = true_under_limit(
            libc::RLIMIT_NOFILE,
            n,
            false,
            &[sw, "run", "--idle", "1s", "--"],
        );
        assert!(!err.contains("panicked"), "ulimit -n {n}: {err}");
        match status {
            0 => {}
            125 => assert!(
                err.starts_with("stallwarden: ") && err.contains("Too many open files"),
                "ulimit -n {n}: {err}"
            ),
            s => panic!("ulimit -n {n}: status {s}: {err}"),
        }
        seen.push(status);
    }
    assert!(seen.contains(&125) && seen.last() == Some(&0), "{seen:?}");
}

// R8.16: a fork that fails with EAGAIN (the user's process limit) is
// stallwarden's own failure to start the command: 125, as GNU `timeout`
// gives, never 126 ("cannot execute"). Run as a user of its own (root
// ignores the limit), at every limit from 1 to 16: stallwarden's own threads run out
// first at the lowest ones (125, "cannot start the watchdog"), then the
// fork (125, "cannot start true"), then a thread after the start (124,
// the command stopped: R8.9), then nothing.
#[test]
fn r8_16_a_fork_failing_with_eagain_is_125_as_under_timeout() {
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("SKIPPED: util-linux `setpriv` is not installed");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: not root: cannot run as another user");
        return;
    }
    let (t_status, _) = true_under_limit(libc::RLIMIT_NPROC, 1, true, &[TIMEOUT, "10"]);
    assert_eq!(t_status, 125, "timeout");
    let sw = env!("CARGO_BIN_EXE_stallwarden");
    let mut fork_failed = false;
    for n in 1..=16 {
        let (status, err) = true_under_limit(
            libc::RLIMIT_NPROC,
            n,
            true,
            &[sw, "run", "--idle", "1s", "--"],
        );
        assert!(!err.contains("panicked"), "nproc {n}: {err}");
        assert!(
            matches!(status, 0 | 124 | 125),
            "nproc {n}: status {status}: {err}"
        );
        if err.contains("cannot start true: Resource temporarily unavailable") {
            assert_eq!(status, 125, "nproc {n}: {err}");
            fork_failed = true;
        }
    }
    assert!(fork_failed, "no limit made the fork itself fail");
}

// ------------------------------------------------- death by a signal

// R8.16: a command that died of a signal ends stallwarden with the same
// signal, as GNU `timeout` re-raises it on itself: a parent that checks
// WIFSIGNALED sees the death, not an exit of 128+N; with no core file of
// the wrapper's own (SIGSEGV), and with `finished` written before.
#[test]
fn r8_16_a_command_that_died_of_a_signal_ends_stallwarden_with_it() {
    for sig in [libc::SIGTERM, libc::SIGUSR1, libc::SIGSEGV, libc::SIGKILL] {
        let script = format!("kill -{sig} $$");
        let dir = tempfile::tempdir().unwrap();
        let mut t = Command::new(TIMEOUT);
        t.args(["20", "sh", "-c", &script]);
        common::with_default_signals(&mut t);
        let t_out = common::finish_within(
            t.stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
            BOUND,
            "timeout",
        );
        assert_eq!(t_out.status.signal(), Some(sig), "timeout, signal {sig}");

        let mut s = stallwarden(dir.path());
        s.args(["run", "--events", "ev.jsonl", "--", "sh", "-c", &script]);
        common::with_default_signals(&mut s);
        let out = common::finish_within(
            s.stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
            BOUND,
            "stallwarden",
        );
        let err = common::stderr(&out);
        assert_eq!(out.status.signal(), Some(sig), "signal {sig}: {err}");
        assert!(!out.status.core_dumped(), "signal {sig}: a core of our own");
        let evs = events(&dir.path().join("ev.jsonl"));
        let last = evs.last().unwrap();
        assert_eq!(
            (&last["type"], &last["signal"]),
            (&"finished".into(), &sig.into())
        );
    }
}

// ------------------------------------------------- closed outputs

/// Runs `wrapper... sh -c script` with descriptor `fd` closed (`>&-`);
/// returns the status and stderr (empty when stderr is the closed one).
fn with_closed(fd: i32, wrapper: &[&str], script: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(wrapper[0]);
    cmd.args(&wrapper[1..])
        .args(["sh", "-c", script])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    common::with_default_signals(&mut cmd);
    // SAFETY: close(2) between fork and exec is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::close(fd);
            Ok(())
        });
    }
    let out = common::finish_within(cmd.spawn().unwrap(), BOUND, wrapper[0]);
    (shell_status(out.status), common::stderr(&out))
}

// R8.16, R8.10: the command's output to a stdout or stderr closed at the
// start (`>&-`) is lost: never a 0 as if it had been written (under
// `timeout` the command's own write fails: 1 or 2); stdout's loss is said
// once. A command that writes nothing there keeps its 0.
#[test]
fn r8_16_output_to_a_closed_stdout_or_stderr_is_not_a_success() {
    let sw = env!("CARGO_BIN_EXE_stallwarden");
    let stallwarden = [sw, "run", "--idle", "20s", "--"];
    let timeout = [TIMEOUT, "20"];

    let (t, _) = with_closed(1, &timeout, "echo hi");
    assert_eq!(t, 1, "timeout, stdout closed");
    let (s, err) = with_closed(1, &stallwarden, "echo hi");
    assert_eq!(s, 1, "{err}");
    assert_eq!(
        err.matches("cannot write the command's stdout: Bad file descriptor")
            .count(),
        1,
        "{err}"
    );

    let (t, _) = with_closed(2, &timeout, "echo hi >&2");
    assert_ne!(t, 0, "timeout, stderr closed");
    let (s, _) = with_closed(2, &stallwarden, "echo hi >&2");
    assert_eq!(s, 1);

    for fd in [1, 2] {
        assert_eq!(with_closed(fd, &timeout, "true").0, 0);
        let (s, err) = with_closed(fd, &stallwarden, "true");
        assert_eq!(s, 0, "fd {fd}: {err}");
    }
}

// R8.16, R8.11: `--no-pty` overrides a config's `pty = true`; the last of
// `--pty` and `--no-pty` wins.
#[test]
fn r8_16_no_pty_overrides_the_configs_pty() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\npty = true\n",
    )
    .unwrap();
    let probe = "[ -t 1 ] && echo tty || echo pipe";
    for (flags, want) in [
        (&[][..], "tty"),
        (&["--no-pty"][..], "pipe"),
        (&["--no-pty", "--pty"][..], "tty"),
        (&["--pty", "--no-pty"][..], "pipe"),
    ] {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "sh", "-c", probe]);
        let out = common::run(dir.path(), &args);
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(said.trim(), want, "{flags:?}: {}", common::stderr(&out));
    }
}

// ------------------------------------------------- plain errors

// R8.16, R7.2: a config's `on-input-wait = 1` lists the words it takes
// (`stall`, `pause`), as `on-leftover = 1` does (`kill`, `keep`), where
// serde's derive said "wanted string or table"; `terminate-after = "1"`
// and `1.0` are refused in a typed file, with what to write.
#[test]
fn r8_16_config_mistakes_say_what_to_write() {
    let dir = tempfile::tempdir().unwrap();
    for (line, says) in [
        ("on-input-wait = 1", "expected `stall` or `pause`"),
        ("on-input-wait = \"wait\"", "expected `stall` or `pause`"),
        ("on-leftover = 1", "expected `kill` or `keep`"),
        (
            "terminate-after = \"1\"",
            "\"1\" is not a bare integer: write 1",
        ),
        (
            "terminate-after = 1.0",
            "1.0 is not a bare integer: write 1",
        ),
    ] {
        std::fs::write(
            dir.path().join("stallwarden.toml"),
            format!("[defaults]\n{line}\n"),
        )
        .unwrap();
        let out = common::run(dir.path(), &["check"]);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(125), "{line}: {err}");
        assert!(err.contains("stallwarden.toml:2:"), "{line}: {err}");
        assert!(err.contains(says), "{line}: {err}");
    }
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\non-input-wait = \"pause\"\nterminate-after = 3\n",
    )
    .unwrap();
    assert_eq!(common::run(dir.path(), &["check"]).status.code(), Some(0));
}

// R8.16: `list --socket` against a server that accepts and never answers
// says it timed out (after the client's 5 s), not "Resource temporarily
// unavailable".
#[test]
fn r8_16_a_control_socket_that_never_answers_is_said_to_time_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deaf.sock");
    // Bound and listening: the connect succeeds, no answer ever comes.
    let _deaf = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let out = common::run(dir.path(), &["list", "--socket", path.to_str().unwrap()]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("timed out after 5s"), "{err}");
    assert!(!err.contains("temporarily unavailable"), "{err}");
}

// ------------------------------------------------- why silent

// R8.13, R8.16: for `sh -c 'sleep N | cat'` the `cat` reading the pipe is
// described in every run: at the verdict's fresh look, a process that
// started since the last periodic sample counts its whole CPU as its
// delta, so it is a suspect like its `sh` (it used to be listed as a
// child of `sh` and never described in 6 runs of 10 on a loaded machine).
// Six runs at once, which is load too.
#[test]
fn r8_16_the_cat_of_sleep_pipe_cat_is_always_described() {
    let runs: Vec<_> = (0..6)
        .map(|n| {
            std::thread::spawn(move || {
                let dir = tempfile::tempdir().unwrap();
                let out = common::run(
                    dir.path(),
                    &["run", "--idle", "1s", "--", "sh", "-c", "sleep 30 | cat"],
                );
                let err = common::stderr(&out);
                assert_eq!(out.status.code(), Some(124), "run {n}: {err}");
                let line = err.lines().next().unwrap_or_default();
                let described = line.split("; ").any(|s| {
                    s.starts_with("cat[") && s.contains("reading a pipe written by sleep[")
                });
                assert!(described, "run {n}: the cat is not described: {line}");
            })
        })
        .collect();
    for r in runs {
        r.join().unwrap();
    }
}

// R8.13, R8.16: a process whose peer closed its connection (CLOSE_WAIT)
// while it waits on something else (here a sleep; a futex in the codex
// incident) is named with the dead connection, not only as "sleeping".
#[test]
fn r8_16_a_dead_connection_is_named_whatever_the_suspect_waits_on() {
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    // The peer: accepts one connection and closes it at once.
    let peer = std::thread::spawn(move || drop(server.accept()));
    let dir = tempfile::tempdir().unwrap();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port}; exec sleep 30");
    let out = common::run(
        dir.path(),
        &["run", "--idle", "2s", "--", "bash", "-c", &script],
    );
    peer.join().unwrap();
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(124), "{err}");
    let line = err.lines().next().unwrap_or_default();
    assert!(line.contains("sleeping (nanosleep)"), "{line}");
    assert!(
        line.contains("holds a dead connection: TCP 127.0.0.1:")
            && line.contains(&format!("-> 127.0.0.1:{port} CLOSE_WAIT")),
        "{line}"
    );
}
