//! R8.11 on real processes: `--pty` for runtimes that buffer a pipe, byte
//! for byte through the pty, and the order of stdout and stderr kept when
//! stallwarden's own are one open file (`> log 2>&1`, `2>&1 | cat`).
//!
//! The children pace themselves (Python's `time.sleep`, `sh`'s `sleep`);
//! the tests only wait for them, with a bound.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::{events, stallwarden, stderr, types};

/// Generous bound for a run of a few seconds on a loaded machine.
const BOUND: Duration = Duration::from_secs(60);

/// Waits for `child` within [`BOUND`], reading its pipes all along.
fn wait_bounded(child: Child) -> Output {
    common::wait_within(child, BOUND)
}

/// Whether `program` runs here; says SKIPPED when it does not.
fn have(program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !ok {
        eprintln!("SKIPPED: {program} is not installed");
    }
    ok
}

/// A Python child, its stdout NOT forced unbuffered, printing a line a
/// second for five seconds.
fn ticking_python(dir: &Path, extra: &[&str]) -> Output {
    let child = stallwarden(dir)
        .args(["run", "--idle", "3s"])
        .args(extra)
        .args(["--", "python3", "-c"])
        .arg("import time\nfor i in range(5):\n    print('tick', i)\n    time.sleep(1)\n")
        .env_remove("PYTHONUNBUFFERED")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child)
}

// R8.11: Python buffers a pipe, so a script printing every second looks
// silent for the whole run and is stopped; the stall line says it may be
// buffering and names --pty.
#[test]
fn a_buffering_python_is_stopped_on_a_pipe_with_the_hint() {
    if !have("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = ticking_python(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("budget 3s exceeded")
            && err.contains("the command may be buffering its output; try --pty"),
        "{err}"
    );
}

// R8.11: with --pty, stdout is a terminal to Python, which flushes each
// line: the same script runs to its end, every line as printed (no CR).
#[test]
fn a_buffering_python_survives_with_pty() {
    if !have("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = ticking_python(dir.path(), &["--pty"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "tick 0\ntick 1\ntick 2\ntick 3\ntick 4\n"
    );
    assert!(!stderr(&out).contains("exceeded"), "{}", stderr(&out));
}

// R8.11: the config key does what the flag does.
#[test]
fn the_pty_config_key_gives_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\npty = true\n",
    )
    .unwrap();
    let probe = "if [ -t 1 ] && [ -t 2 ]; then echo tty; else echo pipe; fi; \
                 if [ -t 0 ]; then echo in-tty; else echo in-other; fi";
    let out = wait_bounded(
        stallwarden(dir.path())
            .args(["run", "--", "sh", "-c", probe])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Stdin stays what it was (here /dev/null).
    assert_eq!(out.stdout, b"tty\nin-other\n");
    std::fs::write(dir.path().join("plain.toml"), "").unwrap();
    let plain = wait_bounded(
        stallwarden(dir.path())
            .args(["run", "-c", "plain.toml", "--", "sh", "-c", probe])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(plain.stdout, b"pipe\nin-other\n", "{}", stderr(&plain));
}

// R8.11: bytes pass through the pty unchanged: every byte value, a 64 MiB
// line, no newline at the end; no CR added, nothing lost at the end of
// the output (the pty's EIO once the command is gone is its end).
#[test]
fn output_through_the_pty_is_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.bin");
    let mut data: Vec<u8> = (0..=255u8).cycle().take(256 * 64).collect();
    data.extend(std::iter::repeat_n(b'x', 64 << 20));
    data.extend_from_slice(b"\n\r\n\tlast line, no newline");
    std::fs::write(&path, &data).unwrap();
    let out = wait_bounded(
        stallwarden(dir.path())
            .args(["run", "--pty", "--", "cat"])
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout.len(), data.len());
    assert!(out.stdout == data, "the bytes differ");
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}

/// A pipe: (read, write), both close-on-exec.
fn pipe() -> (File, File) {
    use std::os::fd::FromRawFd;
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into a valid array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both are fresh descriptors that we now own.
    unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
}

/// A shell printing `n` lines alternately to stdout and stderr.
const ALTERNATING: &str =
    "i=0; while [ $i -lt 100 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done";

fn alternating_lines() -> String {
    (0..100).map(|i| format!("out{i}\nerr{i}\n")).collect()
}

// R8.11: `> log 2>&1`: stallwarden's stdout and stderr are one open file,
// so the command gets one pipe for both and the 200 lines keep their
// order, every time.
#[test]
fn order_is_kept_into_one_file_in_20_of_20_runs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    for run in 0..20 {
        let file = File::create(&log).unwrap();
        let out = wait_bounded(
            stallwarden(dir.path())
                .args(["run", "--", "sh", "-c", ALTERNATING])
                .stdout(file.try_clone().unwrap())
                .stderr(file)
                .spawn()
                .unwrap(),
        );
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            alternating_lines(),
            "run {run}: reordered"
        );
    }
}

// R8.11: `2>&1 | cat`: one pipe shared by stdout and stderr is one open
// file too.
#[test]
fn order_is_kept_into_one_shared_pipe_in_20_of_20_runs() {
    let dir = tempfile::tempdir().unwrap();
    for run in 0..20 {
        let (mut read, write) = pipe();
        let mut command = stallwarden(dir.path());
        command
            .args(["run", "--", "sh", "-c", ALTERNATING])
            .stdout(write.try_clone().unwrap())
            .stderr(write);
        let child = command.spawn().unwrap();
        // Our copies of the write end must go, or the read never ends.
        drop(command);
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            read.read_to_string(&mut text).unwrap();
            text
        });
        let out = wait_bounded(child);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(reader.join().unwrap(), alternating_lines(), "run {run}");
    }
}

// R8.11: with different files, stdout and stderr stay apart, as before.
#[test]
fn different_files_keep_the_streams_apart() {
    let dir = tempfile::tempdir().unwrap();
    for pty in [false, true] {
        let mut args = vec!["run"];
        if pty {
            args.push("--pty");
        }
        args.extend(["--", "sh", "-c", ALTERNATING]);
        let out = wait_bounded(
            stallwarden(dir.path())
                .args(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let outs: String = (0..100).map(|i| format!("out{i}\n")).collect();
        let errs: String = (0..100).map(|i| format!("err{i}\n")).collect();
        assert_eq!(String::from_utf8_lossy(&out.stdout), outs, "pty {pty}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), errs, "pty {pty}");
    }
}

// R8.11 with R5.10: an agent CLI under a pty (here Python replaying a
// recorded Claude Code session, its stdout not forced unbuffered) still
// emits its JSON lines as it goes: the silent Bash call holds the
// execution budget, and the bytes are the recording's, without a CR.
#[test]
fn an_agent_stream_works_under_pty() {
    if !have("python3") {
        return;
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sources/tests/fixtures/agent/claude-code/bash_session.jsonl");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\nidle = \"1s\"\nexecution = \"10m\"\nstartup = \"30s\"\n",
    )
    .unwrap();
    // Line 3 is the Bash tool_use; 3 s of silence follow it.
    let replay = "import sys, time\n\
                  for i, line in enumerate(open(sys.argv[1], encoding='utf-8', newline='')):\n    \
                  sys.stdout.write(line)\n    \
                  if i == 2: time.sleep(3)\n";
    let run = |extra: &[&str]| {
        wait_bounded(
            stallwarden(dir.path())
                .args(["run", "--stream", "claude-code", "--events", "events.jsonl"])
                .args(extra)
                .args(["--", "python3", "-c", replay])
                .arg(&fixture)
                .env_remove("PYTHONUNBUFFERED")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        )
    };
    let out = run(&["--pty"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        out.stdout == std::fs::read(&fixture).unwrap(),
        "bytes differ"
    );
    let kinds = types(&events(&dir.path().join("events.jsonl")));
    assert!(!kinds.iter().any(|k| k == "stalled"), "{kinds:?}");
}

/// Runs `stallwarden run ARGS` with stdout and stderr on one pipe (as
/// `2>&1 | head -1`), reads one line, closes the pipe; returns the status.
fn into_a_reader_that_leaves(args: &[&str]) -> Option<i32> {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let (read, write) = pipe();
    let mut command = stallwarden(dir.path());
    command
        .arg("run")
        .args(args)
        .stdout(write.try_clone().unwrap())
        .stderr(write);
    let child = command.spawn().unwrap();
    drop(command);
    let mut line = String::new();
    std::io::BufReader::new(read).read_line(&mut line).unwrap();
    assert_eq!(line, "y\n");
    // As a shell sees it: the code, or 128+N (R8.16: stallwarden ends with
    // the signal the command died of).
    let status = wait_bounded(child).status;
    status
        .code()
        .or_else(|| std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s))
}

// R8.10 with R8.11: the one shared pipe still breaks the command's output
// when its reader goes away: `run -- yes 2>&1 | head -1` ends at once with
// 141, as without stallwarden; under --pty the write fails with EIO (a
// terminal has no SIGPIPE) and `yes` exits 1.
#[test]
fn a_reader_gone_ends_the_command_on_the_shared_pipe_and_the_pty() {
    assert_eq!(into_a_reader_that_leaves(&["--", "yes"]), Some(141));
    assert_eq!(into_a_reader_that_leaves(&["--pty", "--", "yes"]), Some(1));
}

// R8.11 with R8.12: a file without `#!` runs through /bin/sh with the same
// outputs: a pty under --pty, one shared pipe into one file.
#[test]
fn a_script_without_shebang_gets_the_same_outputs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("noshebang");
    std::fs::write(
        &script,
        "if [ -t 1 ]; then echo tty; else echo pipe; fi\necho err >&2\necho out\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = wait_bounded(
        stallwarden(dir.path())
            .args(["run", "--pty", "--"])
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, b"tty\nout\n");
    assert_eq!(out.stderr, b"err\n");
    let log = dir.path().join("log");
    let file = File::create(&log).unwrap();
    let out = wait_bounded(
        stallwarden(dir.path())
            .args(["run", "--"])
            .arg(&script)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap(),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "pipe\nerr\nout\n");
}
