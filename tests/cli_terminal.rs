//! R8.4: the live status line, on a real pseudo-terminal (util-linux
//! `script` allocates one), and its absence when stderr is not a terminal.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CLEAR_LINE: &str = "\r\x1b[2K";

/// Runs `args` under `script`, so stallguard's stdout and stderr are a
/// terminal; returns everything the terminal showed.
fn on_a_terminal(args: &str) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: util-linux `script` is not installed");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_stallguard"));
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "did not exit");
        // A real process is being waited on.
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

// R8.4: on a terminal, a one-line status (elapsed, silence, last output,
// strikes) is redrawn while the command is silent, and the command's own
// lines arrive whole, never with the status mixed in.
#[test]
fn status_line_is_drawn_on_a_terminal_and_never_mixed_into_output() {
    let Some(screen) =
        on_a_terminal("run --idle 20s -- sh -c 'echo first; sleep 2.5; echo second'")
    else {
        return;
    };
    assert!(
        screen.contains("elapsed | silent") && screen.contains("| strikes 0/1"),
        "no status line on the terminal: {screen:?}"
    );
    // Every status draw starts by clearing its line, and the line is cleared
    // again before the command writes: so each of the command's lines,
    // with the clearing removed, stands alone.
    let lines: Vec<String> = screen
        .split("\r\n")
        .map(|l| l.rsplit(CLEAR_LINE).next().unwrap_or(l).to_owned())
        .collect();
    for word in ["first", "second"] {
        assert!(
            lines.iter().any(|l| l == word),
            "`{word}` is not a line of its own: {lines:?}"
        );
    }
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("second") && l.contains("elapsed")),
        "status mixed into the command's line: {lines:?}"
    );
}

// R8.4: never when stderr is not a terminal.
#[test]
fn no_status_line_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stallguard"))
        .args([
            "run",
            "--idle",
            "20s",
            "--",
            "sh",
            "-c",
            "sleep 2.5; echo done",
        ])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"done\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("elapsed"), "status line on a pipe: {err:?}");
    assert!(!err.contains('\x1b'), "escape codes on a pipe: {err:?}");
}
