//! R8.4: the live status line, on a real pseudo-terminal (util-linux
//! `script` allocates one), and its absence when stderr is not a terminal.

use std::path::Path;
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

/// Runs `stallguard args` under `script` (a real pty that is the
/// controlling terminal of a new session, stallguard in its foreground
/// group), typing `input` once the terminal shows `ready`; returns the
/// exit status and everything the terminal showed.
fn interactive(args: &str, input: &[u8]) -> Option<(Option<i32>, String)> {
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_stallguard"));
    on_a_pty(&cmd, &[("ready", input, Duration::ZERO)])
}

/// Runs `cmd` under `script` on a real pty that is the controlling
/// terminal of a new session. Each step waits until the screen shows its
/// text (after the previous step's), waits its pause, then types its keys.
/// Returns the exit status and everything the terminal showed.
fn on_a_pty(cmd: &str, steps: &[(&str, &[u8], Duration)]) -> Option<(Option<i32>, String)> {
    use std::io::{Read, Write};
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: util-linux `script` is not installed");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new("script")
        .args(["-qec", cmd, "/dev/null"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let mut screen = Vec::new();
    let mut next = 0;
    let mut seen_from = 0;
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "stuck at step {next}: {}",
            String::from_utf8_lossy(&screen)
        );
        if let Ok(bytes) = rx.recv_timeout(Duration::from_millis(50)) {
            screen.extend(bytes);
        }
        if let Some((wait_for, keys, pause)) = steps.get(next) {
            let text = String::from_utf8_lossy(&screen[seen_from..]).into_owned();
            if let Some(at) = text.find(wait_for) {
                // A real process's pace (a stop that must outlast a budget).
                std::thread::sleep(*pause);
                stdin.write_all(keys).unwrap();
                stdin.flush().unwrap();
                seen_from += at + wait_for.len();
                next += 1;
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            while let Ok(bytes) = rx.recv_timeout(Duration::from_millis(200)) {
                screen.extend(bytes);
            }
            drop(stdin);
            return Some((status.code(), String::from_utf8_lossy(&screen).into_owned()));
        }
    }
}

/// The pid the command printed as `pid=N`.
fn printed_pid(screen: &str) -> u32 {
    let at = screen.find("pid=").expect("no pid printed") + 4;
    screen[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

// R8.1 (the terminal): an interactive command owns the terminal while it
// runs, so it reads what is typed there, as if run directly (without the
// hand-over its read from a background group would stop it with SIGTTIN).
#[test]
fn interactive_command_reads_the_terminal() {
    let Some((code, screen)) = interactive(
        "run --idle 20s -- sh -c 'echo ready; read x; echo \"got:$x\"'",
        b"hello\n",
    ) else {
        return;
    };
    assert!(screen.contains("got:hello"), "no round-trip: {screen:?}");
    assert_eq!(code, Some(0), "{screen:?}");
}

// R8.1/R8.2: Ctrl-C on the terminal ends a command blocked reading it;
// the run ends with the command's status (130 = 128 + SIGINT), and the
// command is gone.
#[test]
fn ctrl_c_ends_a_command_blocked_reading_the_terminal() {
    let Some((code, screen)) = interactive(
        "run --idle 20s -- sh -c 'echo pid=$$ ready; read x; echo never'",
        b"\x03",
    ) else {
        return;
    };
    assert!(
        !screen.contains("never"),
        "the read was not interrupted: {screen:?}"
    );
    assert_eq!(code, Some(130), "{screen:?}");
    let pid = printed_pid(&screen);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "command {pid} left behind"
    );
}

// R2.8 / R8.1: Ctrl-Z stops the command and stallguard with it (the shell
// shows the job stopped) and pauses every budget; held longer than `idle`,
// then `fg`: the command goes on and no stall is judged.
#[test]
fn ctrl_z_longer_than_idle_then_fg_resumes_without_a_stall() {
    let cmd = format!(
        // Quotes split the markers, so the terminal's echo of this line
        // does not show them: only the command's output does.
        "{} run --idle 1s -- sh -c 'echo p\"\"id=$$ rea\"\"dy; sleep 2; echo done-\"\"ok'\n",
        env!("CARGO_BIN_EXE_stallguard")
    );
    // An interactive bash: job control on, as in a user's terminal.
    let Some((_, screen)) = on_a_pty(
        "bash --norc --noprofile -i",
        &[
            ("bash", cmd.as_bytes(), Duration::from_millis(200)),
            ("ready", b"\x1a", Duration::from_millis(300)),
            ("Stopped", b"fg\n", Duration::from_millis(2500)),
            ("done-ok", b"echo r\"\"c=$?\n", Duration::ZERO),
            ("rc=", b"exit\n", Duration::ZERO),
        ],
    ) else {
        return;
    };
    assert!(
        screen.contains("done-ok"),
        "the command did not go on: {screen:?}"
    );
    assert!(screen.contains("rc=0"), "{screen:?}");
    assert!(!screen.contains("budget"), "a stall was judged: {screen:?}");
    let pid = printed_pid(&screen);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "command {pid} left behind"
    );
}

// R8.1: a command stopped from outside while stallguard has no terminal is
// said on stderr, not left silently; its budgets keep running, so the stop
// ends as a stall (124), and the cancel's SIGCONT lets SIGTERM end it.
#[test]
fn a_command_stopped_without_a_terminal_is_reported_and_still_judged() {
    let out = Command::new(env!("CARGO_BIN_EXE_stallguard"))
        .args(["run", "--idle", "1s", "--grace", "2s", "--", "sh", "-c"])
        .arg("echo pid=$$; kill -STOP $$; echo after")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stderr.contains("stopped by SIGSTOP"), "{stderr}");
    assert!(stderr.contains("idle budget"), "{stderr}");
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    let pid = printed_pid(&stdout);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "command {pid} left behind"
    );
}
