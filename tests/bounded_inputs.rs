//! Bounded inputs and the budget flags (issue 22, second half): each test
//! runs the real binary on real files, FIFOs, scripts and processes, and
//! cites its rule. Where GNU `timeout` meets the same situation (a script
//! without `#!`, a missing interpreter), both run side by side and must
//! end with the same status.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{events, stallwarden, types, wait_bounded};

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn out(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `stallwarden ARGS` in `dir` with piped output, bounded.
fn sg(dir: &Path, args: &[&str]) -> Output {
    let child = stallwarden(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child)
}

/// Runs GNU `timeout 30 ARGS` in `dir`, bounded as stallwarden is.
fn gnu_timeout(dir: &Path, args: &[&str]) -> Output {
    let child = Command::new("timeout")
        .arg("30")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("GNU timeout (coreutils) is installed");
    wait_bounded(child)
}

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(st.success(), "mkfifo {}", path.display());
}

fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

// R8.12: a config that is not a regular file, or is over 1 MiB, is refused
// (125) before it is read whole: `check /dev/zero` and `run -c /dev/zero`
// used to grow past 2.5 GB, and a FIFO config blocked forever.
#[test]
fn config_not_regular_or_over_1mib_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    let o = sg(d, &["check", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(err(&o).contains("/dev/zero"), "{}", err(&o));
    assert!(err(&o).contains("not a regular file"), "{}", err(&o));
    assert!(err(&o).contains("1 MiB"), "{}", err(&o));

    let o = sg(d, &["run", "-c", "/dev/zero", "--", "touch", "ran"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(!d.join("ran").exists(), "the command must not run");

    let big = d.join("big.toml");
    let mut text = String::from("[defaults]\n");
    text.push_str(&"# padding\n".repeat(110_000));
    std::fs::write(&big, text).unwrap();
    let o = sg(d, &["check", big.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(err(&o).contains("big.toml"), "{}", err(&o));
    assert!(err(&o).contains("larger than the 1 MiB"), "{}", err(&o));

    // A FIFO with no writer: refused at once, not waited on.
    let fifo = d.join("fifo.toml");
    mkfifo(&fifo);
    let o = sg(d, &["run", "-c", fifo.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains("a FIFO, not a regular file"),
        "{}",
        err(&o)
    );
}

// R8.12, R10.6, R7.2: a duration past 100 years is refused with the range,
// from a flag or a key, never an overflow: `--leak-timeout
// 9223372036854775807s` used to panic after the command ran (exit 101).
#[test]
fn durations_past_100_years_are_refused_with_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for flag in [
        "--leak-timeout",
        "--idle",
        "--deadline",
        "--grace",
        "--execution",
    ] {
        let o = sg(
            d,
            &["run", flag, "9223372036854775807s", "--", "touch", "ran"],
        );
        assert_eq!(o.status.code(), Some(125), "{flag}: {}", err(&o));
        // R8.16: a budget's own range, narrower than 100 years, is quoted.
        let range = match flag {
            "--leak-timeout" => "at most 100 years",
            "--deadline" => "out of range, expected 1ms..=365days",
            "--grace" => "out of range, expected 0s..=1h",
            _ => "out of range, expected 1ms..=30days",
        };
        assert!(err(&o).contains(range), "{flag}: {}", err(&o));
        assert!(!err(&o).contains("panicked"), "{flag}: {}", err(&o));
        assert!(!d.join("ran").exists(), "{flag}: the command must not run");
    }
    let o = sg(d, &["run", "--leak-timeout", "101y", "--", "true"]);
    assert!(err(&o).contains("0s..=100years"), "{}", err(&o));

    std::fs::write(
        d.join("stallwarden.toml"),
        "[defaults]\nleak-timeout = \"9223372036854775807s\"\n",
    )
    .unwrap();
    let o = sg(d, &["check"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains("stallwarden.toml:2:16: defaults.leak-timeout"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("at most 100 years"), "{}", err(&o));
}

// R8.12: `--idle -1s` is a duration error, not clap's "unexpected argument".
#[test]
fn a_negative_duration_flag_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = sg(dir.path(), &["run", "--idle", "-1s", "--", "true"]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(err(&o).contains("--idle"), "{}", err(&o));
    assert!(
        err(&o).contains("a duration cannot be negative"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("unexpected argument"), "{}", err(&o));
}

// R8.12, R2.9: an EXTEND_TIMEOUT_USEC past 100 years is refused, so the
// deadline still stops the command (it used to be pushed 584 years out).
#[test]
fn an_extension_past_100_years_is_refused_and_the_deadline_holds() {
    let dir = tempfile::tempdir().unwrap();
    let send = "import os, socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); \
                s.sendto(b'EXTEND_TIMEOUT_USEC=18446744073709551615', os.environ['NOTIFY_SOCKET'])";
    let script = format!("echo go; python3 -c \"{send}\"; sleep 6; echo survived");
    let o = sg(
        dir.path(),
        &[
            "run",
            "--deadline",
            "3s",
            "--idle",
            "30s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(!out(&o).contains("survived"), "{}", out(&o));
    assert!(err(&o).contains("deadline"), "{}", err(&o));
    // R8.7: the refusal is said, not only logged.
    assert!(
        err(&o).contains("EXTEND_TIMEOUT_USEC asked for more than 100 years"),
        "{}",
        err(&o)
    );
}

// R8.12: `--events` appends one whole line per write: 10 runs sharing one
// file leave 10 `started` and 10 `finished`, every line whole, and what
// the file held before (it used to be truncated and torn).
#[test]
fn ten_concurrent_runs_share_one_events_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.jsonl");
    std::fs::write(&file, "{\"type\":\"before\"}\n").unwrap();
    let runs: Vec<_> = (0..10)
        .map(|i| {
            stallwarden(dir.path())
                .args(["run", "--events", "events.jsonl", "--heartbeat", "1s", "--"])
                .args(["sh", "-c", &format!("echo run-{i}; sleep 2; echo done-{i}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in runs {
        let o = wait_bounded(r);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    }
    // `events` panics on a torn (non-JSON) line.
    let all = events(&file);
    let kinds = types(&all);
    assert_eq!(kinds.first().map(String::as_str), Some("before"));
    assert_eq!(
        kinds.iter().filter(|k| *k == "started").count(),
        10,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "finished").count(),
        10,
        "{kinds:?}"
    );
}

// R8.12: an `--events` FIFO with no reader never blocks the start: the
// command runs and the run ends (it used to block in open before the
// start, forever).
#[test]
fn an_events_fifo_without_a_reader_does_not_block_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("events.fifo");
    mkfifo(&fifo);
    let o = sg(
        dir.path(),
        &[
            "run",
            "--events",
            "events.fifo",
            "--",
            "sh",
            "-c",
            "echo ran",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), "ran\n");
}

// R8.12: a reader that comes after the start still gets every event.
#[test]
fn an_events_fifo_reader_that_comes_late_gets_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("events.fifo");
    mkfifo(&fifo);
    let run = stallwarden(dir.path())
        .args([
            "run",
            "--events",
            "events.fifo",
            "--",
            "sh",
            "-c",
            "echo ran; sleep 1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Blocks until the run's events sink opens its end.
    let mut text = String::new();
    std::fs::File::open(&fifo)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let o = wait_bounded(run);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let kinds: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].to_string())
        .collect();
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("\"started\""),
        "{text}"
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("\"finished\""),
        "{text}"
    );
}

// R8.12: an executable file without `#!` runs through /bin/sh, as execvp
// and GNU `timeout` do: the script's own status (it used to be 126).
#[test]
fn a_script_without_shebang_runs_through_sh_like_timeout() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "plain.sh", "echo from-script \"$1\"; exit 7\n");
    let ours = sg(dir.path(), &["run", "--", "./plain.sh", "arg"]);
    let theirs = gnu_timeout(dir.path(), &["./plain.sh", "arg"]);
    assert_eq!(theirs.status.code(), Some(7));
    assert_eq!(ours.status.code(), theirs.status.code(), "{}", err(&ours));
    assert_eq!(out(&ours), out(&theirs));
}

// R8.12: a script whose `#!` interpreter is missing is named as such, not
// "command not found", and exits 127 as GNU `timeout` does.
#[test]
fn a_missing_interpreter_is_named_and_exits_like_timeout() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "bad.sh", "#!/no/such/interp -x\necho never\n");
    let ours = sg(dir.path(), &["run", "--", "./bad.sh"]);
    let theirs = gnu_timeout(dir.path(), &["./bad.sh"]);
    assert_eq!(theirs.status.code(), Some(127));
    assert_eq!(ours.status.code(), theirs.status.code(), "{}", err(&ours));
    let e = err(&ours);
    assert!(
        e.contains("./bad.sh: bad interpreter: /no/such/interp: No such file or directory"),
        "{e}"
    );
    assert!(!e.contains("command not found"), "{e}");
}

// R8.12: a --socket path longer than a Unix socket can hold (108 bytes with
// the NUL) is refused with the limit before the start (it used to be
// bound cut short, where no client could connect).
#[test]
fn a_socket_path_over_the_sun_path_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("s".repeat(120));
    let o = sg(
        dir.path(),
        &[
            "run",
            "--socket",
            long.to_str().unwrap(),
            "--",
            "touch",
            "ran",
        ],
    );
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(err(&o).contains("107"), "{}", err(&o));
    assert!(err(&o).contains("108 with the NUL"), "{}", err(&o));
    assert!(!dir.path().join("ran").exists());
}

// R8.12: an escape sequence in a process name reaches the terminal shown
// escaped, never raw (here in the leftover line).
#[test]
fn escapes_in_process_names_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let name = dir.path().join("sl\x1b[31mp");
    std::fs::copy("/bin/sleep", &name).unwrap();
    let o = sg(
        dir.path(),
        &[
            "run",
            "--leak-timeout",
            "200ms",
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            "\"$0\" 30 >/dev/null 2>&1 & echo hi",
            name.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains("sl\\e[31mp"), "{e}");
    assert!(!o.stderr.contains(&0x1b), "raw ESC on stderr: {e:?}");
}

// R8.12, R8.7: when the notify socket cannot be made (TMPDIR unusable), the
// parent's NOTIFY_SOCKET is not left to the command, and that is said.
#[test]
fn an_unusable_tmpdir_does_not_hand_down_the_parents_notify_socket() {
    let dir = tempfile::tempdir().unwrap();
    let child = stallwarden(dir.path())
        .env("TMPDIR", dir.path().join("missing"))
        .env("NOTIFY_SOCKET", "/run/systemd/notify")
        .args(["run", "--", "sh", "-c", "echo \"[$NOTIFY_SOCKET]\""])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_bounded(child);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), "[]\n");
    assert!(err(&o).contains("no NOTIFY_SOCKET"), "{}", err(&o));
    assert!(err(&o).contains("missing"), "{}", err(&o));
    assert!(err(&o).contains("inherited one is removed"), "{}", err(&o));
}

// R5.10, R8.1: --startup is a flag like --idle (it used to be "unexpected
// argument"): a slow first output within it is no stall.
#[test]
fn startup_flag_allows_a_slow_first_output() {
    let dir = tempfile::tempdir().unwrap();
    let o = sg(
        dir.path(),
        &[
            "run",
            "--idle",
            "1s",
            "--startup",
            "30s",
            "--",
            "sh",
            "-c",
            "sleep 2; echo hi",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), "hi\n");
}

// R2.5, R8.1: --liveness is a flag: one heartbeat arms it, and the silence
// after it is a lost liveness.
#[test]
fn liveness_flag_is_armed_by_a_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let send = "import os, socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); \
                s.sendto(b'WATCHDOG=1', os.environ['NOTIFY_SOCKET'])";
    let script = format!("echo go; python3 -c \"{send}\"; sleep 10");
    let o = sg(
        dir.path(),
        &[
            "run",
            "--idle",
            "30s",
            "--liveness",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(err(&o).contains("liveness lost"), "{}", err(&o));
}

fn claude_session() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sources/tests/fixtures/agent/claude-code/bash_session.jsonl")
}

/// Prints the session's first 3 lines (the third starts a Bash tool call),
/// is silent `secs` seconds, then prints the rest (the tool's result).
fn silent_tool(secs: u32) -> String {
    let f = claude_session().display().to_string();
    format!("head -n 3 '{f}'; sleep {secs}; tail -n +4 '{f}'")
}

// R5.10: with --stream and no execution budget set anywhere, the agent's
// tool gets 30m: a 3 s silent Bash call under --idle 1s runs to its end
// (it used to be held to the idle budget and stopped).
#[test]
fn stream_without_an_execution_budget_gives_tools_30m() {
    let dir = tempfile::tempdir().unwrap();
    let o = sg(
        dir.path(),
        &[
            "run",
            "--stream",
            "claude-code",
            "--idle",
            "1s",
            "--startup",
            "30s",
            "--",
            "sh",
            "-c",
            &silent_tool(3),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(!err(&o).contains("exceeded"), "{}", err(&o));
}

// R5.10, R8.1: --execution overrides that default (and the config).
#[test]
fn execution_flag_bounds_a_silent_tool() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[defaults]\nexecution = \"10m\"\n",
    )
    .unwrap();
    let o = sg(
        dir.path(),
        &[
            "run",
            "--stream",
            "claude-code",
            "--idle",
            "1s",
            "--startup",
            "30s",
            "--execution",
            "1500ms",
            "--",
            "sh",
            "-c",
            &silent_tool(10),
        ],
    );
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(
        err(&o).contains("execution budget 1s 500ms exceeded"),
        "{}",
        err(&o)
    );
}

// R5.10, R7.3: `check` shows the 30m a streaming profile gets when its
// execution is off (absent, or "off" as in the shipped defaults).
#[test]
fn check_shows_the_stream_execution_default() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stallwarden.toml"),
        "[profile.agent]\nstream = \"codex\"\nexecution = \"off\"\n[profile.set]\nstream = \"codex\"\nexecution = \"20m\"\n",
    )
    .unwrap();
    let o = sg(dir.path(), &["check"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = out(&o);
    let row = text.lines().find(|l| l.starts_with("execution")).unwrap();
    let cells: Vec<&str> = row
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(cells, ["execution", "= idle (5m)", "30m", "20m"], "{text}");
    assert!(text.contains("With --stream FORMAT"), "{text}");
}

// R2.3, R8.2: with no startup budget configured, a stall before any output
// names the idle budget the user set, not a "startup budget".
#[test]
fn a_stall_before_any_output_names_the_idle_budget() {
    let dir = tempfile::tempdir().unwrap();
    let o = sg(dir.path(), &["run", "--idle", "1s", "--", "sleep", "10"]);
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(
        err(&o).contains("idle budget 1s exceeded before any output"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("startup budget"), "{}", err(&o));
}

// R8.12: an escape sequence in a task name (the command's file name)
// reaches `list` and `describe` shown escaped, never raw.
#[test]
fn escapes_in_task_names_are_shown_escaped_by_list_and_describe() {
    let dir = tempfile::tempdir().unwrap();
    let name = "t\x1b[2Jx";
    script(dir.path(), name, "#!/bin/sh\necho up\nsleep 20\n");
    let run = stallwarden(dir.path())
        .args(["run", "--socket", "sg.sock", "--", &format!("./{name}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Polled by asking: each try is a real client process, bounded.
    let mut listed = None;
    for _ in 0..300 {
        let o = sg(dir.path(), &["list", "--socket", "sg.sock"]);
        if o.status.success() && out(&o).contains("x") {
            listed = Some(o);
            break;
        }
    }
    let described = sg(dir.path(), &["describe", "--socket", "sg.sock"]);
    // SAFETY: kill(2) on the pid of our own unreaped child.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let _ = wait_bounded(run);
    let listed = listed.expect("the control socket answered");
    for o in [&listed, &described] {
        assert!(out(o).contains("t\\e[2Jx"), "{}", out(o));
        assert!(!o.stdout.contains(&0x1b), "raw ESC: {:?}", out(o));
    }
}
